"""What the momentum samplers (:func:`sgrld.sghmc`, :func:`sgrld.sgnht`) share besides their parts
(:mod:`sgrld.samplers.assembly`, :mod:`sgrld.parts.integrators`): the friction's check and
:func:`momentum_info`, which fills their :class:`~sgrld.samplers.info.MomentumInfo`.

Example:
  >>> import jax.numpy as jnp
  >>> check_friction(0.1)
  0.1
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sgrld.numerics.checks import Bound
from sgrld.numerics.pytrees import PyTree, tree_vdot
from sgrld.samplers.info import MomentumInfo, step_info


def momentum_info(
    value: jax.Array,
    grads: PyTree,
    lr: jax.Array,
    new_params: PyTree,
    momentum: PyTree,
    *,
    thermostat: jax.Array,
    num_data: int,
    gamma: PyTree | None = None,
    noise_clipped: jax.Array | None = None,
    metric_fallbacks: jax.Array | None = None,
) -> MomentumInfo:
    """The :class:`MomentumInfo` of a step to ``new_params`` with the new ``momentum`` (a
    non-finite momentum makes ``new_params`` non-finite: it is checked through them)."""
    base = step_info(value, grads, lr, new_params, gamma=gamma)
    size = sum(x.size for x in jax.tree.leaves(momentum))
    return MomentumInfo(
        **base._replace(
            metric_fallbacks=base.metric_fallbacks if metric_fallbacks is None else metric_fallbacks
        )._asdict(),
        kinetic=tree_vdot(momentum, momentum) / size / (lr / num_data),
        noise_clipped=jnp.zeros((), bool) if noise_clipped is None else noise_clipped,
        thermostat=jnp.asarray(thermostat, jnp.float32),
    )


FRICTION = Bound(0, 1, open_low=True)
"""SGHMC's ``friction`` and SGNHT's ``diffusion``: α, the share of the momentum lost per step."""


def check_friction(friction: float, name: str = "friction") -> float:
    """``friction`` as a float in :data:`FRICTION`, or ``ValueError`` naming it."""
    value = float(friction)
    if not FRICTION.holds(value):
        raise ValueError(
            f"{name} must lie {FRICTION.text()} (α = h·C, the share of the momentum lost per "
            f"step), got {friction}"
        )
    return value
