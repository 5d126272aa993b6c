"""What one step of a sampler reports: :class:`SGRLDInfo`, the ``info`` type every sampler
extends (:func:`info_type`), and :func:`step_info`, which fills it from the step's gradient and
new parameters.

Example:
  >>> import jax.numpy as jnp
  >>> info = step_info(jnp.float32(1.0), jnp.array([3.0, 4.0]), jnp.float32(0.1), jnp.zeros(2))
  >>> float(info.grad_norm), bool(info.is_finite)
  (5.0, True)
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.metric import tree_vdot
from sgrld.numerics.checks import checked_squares, first_nonfinite
from sgrld.numerics.pytrees import PyTree


class SGRLDInfo(NamedTuple):
    """Diagnostics of one step (returned, never stored in the state).

    Attributes:
      potential: Û(θ_t)/N on the step's batch.
      grad_norm: ‖∇Û(θ_t)/N‖.
      learning_rate: the learning rate used.
      gamma_norm: ‖Γ̂(θ_t)‖ as applied (0 without a correction or once the metric is frozen; the
        tamed Γ̂ with ``gamma_kick_limit``).
      drift_fallback: True where ``max_drift_norm`` replaced the metric by a scaled identity.
      metric_fallbacks: cumulative count of metric refreshes that kept their previous value.
      is_finite: True if θ_{t+1} and the gradient are finite (and ‖∇Û/N‖² fits in the float:
        a gradient norm over about 1.8e19 in float32 counts as a divergence).
      nonfinite_leaf: index (in ``jax.tree.leaves`` order) of the first non-finite leaf, or −1.
    """

    potential: jax.Array
    grad_norm: jax.Array
    learning_rate: jax.Array
    gamma_norm: jax.Array
    drift_fallback: jax.Array
    metric_fallbacks: jax.Array
    is_finite: jax.Array
    nonfinite_leaf: jax.Array


def info_type(name: str, extra: tuple[str, ...], doc: str) -> type:
    """A sampler's own ``info`` type: the fields of :class:`SGRLDInfo` followed by ``extra``,
    every one a ``jax.Array``, so the engine and the records treat every sampler alike.

    Example:
        >>> info_type("DemoInfo", ("kinetic",), "A demo.")._fields[-2:]
        ('nonfinite_leaf', 'kinetic')
    """
    fields = [(field, jax.Array) for field in (*SGRLDInfo._fields, *extra)]
    cls = NamedTuple(name, fields)
    cls.__doc__ = doc
    cls.__module__ = sys._getframe(1).f_globals.get("__name__", __name__)
    return cls


SGRLDShareInfo = info_type(
    "SGRLDShareInfo",
    ("share_mean",),
    """:class:`SGRLDInfo` and ``share_mean``, the mean over coordinates of the share ĉ applied
    (``correction_scale="auto"``).""",
)


def step_info(
    value: jax.Array,
    grads: PyTree,
    lr: jax.Array,
    new_params: PyTree,
    *,
    gamma: PyTree | None = None,
    fallback: jax.Array | None = None,
    metric_fallbacks: jax.Array | None = None,
) -> SGRLDInfo:
    """The :class:`SGRLDInfo` of a step that moved to ``new_params`` with gradient ``grads``."""
    squares = checked_squares(grads, new_params)
    bad_leaf = first_nonfinite(squares)
    return SGRLDInfo(
        potential=value,
        grad_norm=jnp.sqrt(jnp.sum(squares)),
        learning_rate=lr,
        gamma_norm=jnp.zeros(()) if gamma is None else jnp.sqrt(tree_vdot(gamma, gamma)),
        drift_fallback=jnp.zeros((), bool) if fallback is None else fallback,
        metric_fallbacks=jnp.zeros((), jnp.int32) if metric_fallbacks is None else metric_fallbacks,
        is_finite=bad_leaf < 0,
        nonfinite_leaf=bad_leaf,
    )
