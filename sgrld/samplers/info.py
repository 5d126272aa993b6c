"""What one step of a sampler reports: the ``info`` types and :func:`step_info`, which fills a
:class:`StepInfo` from the step's gradient and new parameters.

The ``info`` types are one family, declared here: :class:`StepInfo`, the fields every sampler
reports, and the ``NamedTuple`` types that start with its fields, in its order, and add a
sampler's own: :class:`SGRLDShareInfo` (SGRLD with ``correction_scale="auto"``),
:class:`MomentumInfo` (SGHMC, SGNHT), :class:`ISGDInfo` (i-SGD). So the engine and the records
treat every sampler alike, and a type checker knows every field. A ``NamedTuple`` cannot inherit
fields, so each declares them all; the contract test checks the common prefix.

Example:
  >>> import jax.numpy as jnp
  >>> info = step_info(jnp.float32(1.0), jnp.array([3.0, 4.0]), jnp.float32(0.1), jnp.zeros(2))
  >>> float(info.grad_norm), bool(info.is_finite)
  (5.0, True)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.numerics.checks import checked_squares, first_nonfinite
from sgrld.numerics.pytrees import PyTree, tree_vdot


class StepInfo(NamedTuple):
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


SGRLDInfo = StepInfo
"""SGRLD's ``info`` without ``correction_scale="auto"``: :class:`StepInfo` (its former name)."""


class SGRLDShareInfo(NamedTuple):
    """SGRLD's ``info`` with ``correction_scale="auto"``: :class:`StepInfo` and ``share_mean``.

    Attributes:
      potential, grad_norm, learning_rate, gamma_norm, drift_fallback, metric_fallbacks,
      is_finite, nonfinite_leaf: as in :class:`StepInfo`.
      share_mean: the mean over coordinates of the share ĉ applied.
    """

    potential: jax.Array
    grad_norm: jax.Array
    learning_rate: jax.Array
    gamma_norm: jax.Array
    drift_fallback: jax.Array
    metric_fallbacks: jax.Array
    is_finite: jax.Array
    nonfinite_leaf: jax.Array
    share_mean: jax.Array


class MomentumInfo(NamedTuple):
    """Diagnostics of one momentum-sampler step (returned, never stored in the state).

    Attributes:
      potential, grad_norm, learning_rate, gamma_norm, drift_fallback, metric_fallbacks,
      is_finite, nonfinite_leaf: as in :class:`StepInfo`.
      kinetic: ``‖v‖²/(D·lr/N)``, the kinetic temperature (D coordinates): T at equilibrium.
      noise_clipped: True where the minibatch-noise estimate β̂ exceeded α·T in some coordinate
        and was clipped (SGHMC's ``gradient_noise``).
      thermostat: SGNHT's ξ (SGHMC: its constant friction α).
    """

    potential: jax.Array
    grad_norm: jax.Array
    learning_rate: jax.Array
    gamma_norm: jax.Array
    drift_fallback: jax.Array
    metric_fallbacks: jax.Array
    is_finite: jax.Array
    nonfinite_leaf: jax.Array
    kinetic: jax.Array
    noise_clipped: jax.Array
    thermostat: jax.Array


class ISGDInfo(NamedTuple):
    """Diagnostics of one i-SGD step (returned, never stored in the state).

    Attributes:
      potential, grad_norm, gamma_norm, drift_fallback, metric_fallbacks, is_finite,
      nonfinite_leaf: as in :class:`StepInfo` (Γ = 0, no metric).
      learning_rate: the largest layer's ``N/λ^(p)``.
      noise_clipped: True where some coordinate's B̂ exceeded T·λ^(p) (clipped to C = 0).
      clipped_share: the share of coordinates clipped.
      warming_up: True while the rule's λ still adapts (during the warm-up, without a
        ``learning_rate``).
    """

    potential: jax.Array
    grad_norm: jax.Array
    learning_rate: jax.Array
    gamma_norm: jax.Array
    drift_fallback: jax.Array
    metric_fallbacks: jax.Array
    is_finite: jax.Array
    nonfinite_leaf: jax.Array
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
