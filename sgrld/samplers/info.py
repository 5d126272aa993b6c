"""What one step of a sampler reports: the ``info`` types and :func:`step_info`, which fills a
:class:`StepInfo` from the step's gradient and new parameters.

The ``info`` types are one family, declared here: :class:`StepInfo`, the fields every sampler
reports, and its subclasses, which add a sampler's own after them: :class:`SGRLDShareInfo` (SGRLD
with ``correction_scale="auto"``), :class:`MomentumInfo` (SGHMC, SGNHT), :class:`ISGDInfo`
(i-SGD). So the engine and the records treat every sampler alike, and a type checker knows every
field. Each is a frozen dataclass registered as a pytree (its leaves are its fields, in order) that
reads as a ``NamedTuple``: ``_fields``, ``_asdict()``, ``_replace(...)`` and unpacking.

Example:
  >>> import jax.numpy as jnp
  >>> info = step_info(jnp.float32(1.0), jnp.array([3.0, 4.0]), jnp.float32(0.1), jnp.zeros(2))
  >>> float(info.grad_norm), bool(info.is_finite)
  (5.0, True)
  >>> more = ISGDInfo(*info, noise_clipped=False, clipped_share=0.0, warming_up=False)
  >>> isinstance(more, StepInfo), more._fields[-3:], len(jax.tree.leaves(more))
  (True, ('noise_clipped', 'clipped_share', 'warming_up'), 11)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Self

import jax
import jax.numpy as jnp

from sgrld.numerics.checks import checked_squares, first_nonfinite
from sgrld.numerics.pytrees import PyTree, tree_vdot


class _FieldNames:
    """A dataclass's field names, in order, read from the class (a ``NamedTuple``'s ``_fields``)."""

    def __get__(self, obj: object, owner: type) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(owner))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class StepInfo:
    """Diagnostics of one step, every sampler's (returned, never stored in the state).

    Attributes:
      potential: Û(θ_t)/N on the step's batch.
      grad_norm: ‖∇Û(θ_t)/N‖.
      learning_rate: the learning rate used.
      gamma_norm: ‖Γ̂(θ_t)‖ as applied (0 without a correction or once the metric is frozen; the
        tamed Γ̂ with ``gamma_kick_limit``).
      drift_fallback: True where a safeguard changed the drift: ``max_drift_norm`` replaced the
        metric by a scaled identity, or a frozen metric's drift was clipped
        (``frozen_drift_limit``).
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

    _fields = _FieldNames()

    def _asdict(self) -> dict[str, Any]:
        """The fields by name, in order."""
        return {name: getattr(self, name) for name in self._fields}

    def _replace(self, **changes: Any) -> Self:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def __iter__(self) -> Iterator[Any]:
        """The fields in order: ``Subclass(*info, ...)`` extends an ``info``."""
        return iter(self._asdict().values())


SGRLDInfo = StepInfo
"""SGRLD's ``info`` without ``correction_scale="auto"``: :class:`StepInfo` (its former name)."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SGRLDShareInfo(StepInfo):
    """SGRLD's ``info`` with ``correction_scale="auto"``: :class:`StepInfo` and ``share_mean``.

    Attributes:
      share_mean: the mean over coordinates of the share ĉ applied.
    """

    share_mean: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class MomentumInfo(StepInfo):
    """Diagnostics of one momentum-sampler step: :class:`StepInfo` and the momentum's own.

    Attributes:
      kinetic: ``‖v‖²/(D·lr/N)``, the kinetic temperature (D coordinates): T at equilibrium.
      noise_clipped: True where the minibatch-noise estimate β̂ exceeded α·T in some coordinate
        and was clipped (SGHMC's ``gradient_noise``).
      thermostat: SGNHT's ξ (SGHMC: its constant friction α).
    """

    kinetic: jax.Array
    noise_clipped: jax.Array
    thermostat: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ISGDInfo(StepInfo):
    """Diagnostics of one i-SGD step: :class:`StepInfo` (Γ = 0, no metric, ``learning_rate`` the
    largest layer's ``N/λ^(p)``) and i-SGD's own.

    Attributes:
      noise_clipped: True where some coordinate's B̂ exceeded T·λ^(p) (clipped to C = 0).
      clipped_share: the share of coordinates clipped.
      warming_up: True while the rule's λ still adapts (during the warm-up, without a
        ``learning_rate``).
    """

    noise_clipped: jax.Array
    clipped_share: jax.Array
    warming_up: jax.Array


def step_info(
    value: jax.Array,
    grads: PyTree,
    lr: jax.Array,
    new_params: PyTree,
    *,
    gamma: PyTree | None = None,
    fallback: jax.Array | None = None,
    metric_fallbacks: jax.Array | None = None,
) -> StepInfo:
    """The :class:`StepInfo` of a step that moved to ``new_params`` with gradient ``grads``."""
    squares = checked_squares(grads, new_params)
    bad_leaf = first_nonfinite(squares)
    return StepInfo(
        potential=value,
        grad_norm=jnp.sqrt(jnp.sum(squares)),
        learning_rate=lr,
        gamma_norm=jnp.zeros(()) if gamma is None else jnp.sqrt(tree_vdot(gamma, gamma)),
        drift_fallback=jnp.zeros((), bool) if fallback is None else fallback,
        metric_fallbacks=jnp.zeros((), jnp.int32) if metric_fallbacks is None else metric_fallbacks,
        is_finite=bad_leaf < 0,
        nonfinite_leaf=bad_leaf,
    )
