"""The share of Γ a moving-average metric needs, estimated online (``correction_scale="auto"``).

A metric ``G⁻¹ = F(S_t)`` whose statistic ``S_t`` is a moving average of ``s(θ)`` follows θ only in
part. The drift that keeps the target is ``∇·E[F(S_t) | θ_t = θ]`` (docs/right-by-default.md);
linearising ``E[S_t | θ_t]`` in θ gives, for a probe ``z``,

    Γ̂ = D_S[F(S_t)·z] ( s′(g)·H(C z) ),      C = Cov(θ̄_t, θ_t)·Var(θ_t)⁻¹,

with ``θ̄`` the metric's own moving average applied to θ. :func:`share_value` estimates the
diagonal of C per coordinate, ``ĉ = Cov(x, x̄)/Var(x)`` clipped to [0, 1], from running moments
over a window of ``window`` memories of the metric; the correction takes its Hessian-vector
product along ``ĉ⊙z`` (:func:`sgrld.parts.correction.hutchinson`). ``x`` is θ for a statistic of
order 1 and ``(θ − μ)²`` for one of order 2 (Mehler: a quadratic statistic decays as ρ_k²).
For an AR(1) chain with lag-1 correlation ρ and decay β: ``ĉ → (1−β)/(1−βρ^order)``; decay 0
gives ĉ = 1 (the full Γ, the metric is a function of θ), a frozen average ĉ → 0.

Example:
  >>> import jax.numpy as jnp
  >>> s = share_init(jnp.zeros(2))
  >>> for x in (1.0, -1.0, 2.0):
  ...     s = share_update(s, jnp.full(2, x), decay=0.0)
  >>> share_value(s).tolist()   # decay 0: x̄ = x, so ĉ = 1
  [1.0, 1.0]
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.metric import INVERSE_SQRT, ema_step
from sgrld.numerics.pytrees import PyTree

WINDOW = 20.0
"""The moments' window, in memories of the metric (1/(1 − decay) steps, or √t under 1/√t)."""


class ShareState(NamedTuple):
    """Running moments of the share estimator (one set per chain, float32).

    The five moments of a coordinate sit in one array per leaf, shaped ``(5, *leaf.shape)``, so
    that one fused pass reads and writes them all: on the MLP of ``benchmarks/mlp.py`` the update
    accesses about half the bytes of five separate arrays (XLA's ``cost_analysis``).

    Attributes:
      count: int32 updates folded in.
      center: running mean of θ, shaped like θ (the centre of the order-2 feature; zeros for
        order 1, which needs none).
      moments: per leaf, the rows :data:`BAR` (x̄, the metric's moving average, same decay or
        1/√t schedule, applied to the feature x), :data:`MEAN` (running mean of x),
        :data:`MEAN_BAR` (of x̄), :data:`VAR` (running variance of x) and :data:`COV`
        (covariance of x and x̄).
    """

    count: jax.Array
    center: PyTree
    moments: PyTree


BAR, MEAN, MEAN_BAR, VAR, COV = range(5)
"""The rows of :attr:`ShareState.moments`."""


def metric_weight(decay: float | str, count: jax.Array) -> jax.Array:
    """The weight of the ``count``-th statistic in the metric's average: 1 − decay or 1/√t."""
    if decay == INVERSE_SQRT:
        return jax.lax.rsqrt(jnp.maximum(count, 1).astype(jnp.float32))
    return jnp.asarray(1.0 - decay, jnp.float32)


def share_init(params: PyTree) -> ShareState:
    """Zero moments; x̄ starts at the first feature (the first update has weight 1)."""
    zeros = lambda shape: jax.tree.map(lambda p: jnp.zeros(shape(p), jnp.float32), params)
    return ShareState(
        jnp.zeros((), jnp.int32), zeros(jnp.shape), zeros(lambda p: (5, *jnp.shape(p)))
    )


def _moments(decay, count, lam, moments, x):
    """The five moments of one leaf with the feature ``x`` folded in (weight ``lam``)."""
    bar = jnp.where(count == 1, x, ema_step(decay, count, moments[BAR], x))
    d, e = x - moments[MEAN], bar - moments[MEAN_BAR]
    return jnp.stack(
        [
            bar,
            moments[MEAN] + lam * d,
            moments[MEAN_BAR] + lam * e,
            (1 - lam) * (moments[VAR] + lam * d * d),
            (1 - lam) * (moments[COV] + lam * d * e),
        ]
    )


def share_update(
    state: ShareState,
    params: PyTree,
    *,
    decay: float | str,
    window: float = WINDOW,
    order: int = 1,
) -> ShareState:
    """Fold θ_t into the moments.

    x̄ follows the metric's schedule (:func:`sgrld.metrics.metric.ema_step`) from x₁; the moments
    use the weight ``max(1/t, w_t/window)``: a plain mean at first, then a moving window of
    ``window`` memories of the metric (``w_t`` its weight).

    Args:
      state: the moments so far.
      params: θ_t.
      decay: the metric's decay (:attr:`sgrld.metrics.Metric.decay`).
      window: the moments' window in memories of the metric.
      order: 1 (regress θ) or 2 (regress (θ − μ)²).

    Returns:
      The updated :class:`ShareState`.
    """
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order}")
    count = state.count + 1
    lam = jnp.maximum(1.0 / count.astype(jnp.float32), metric_weight(decay, count) / window)
    theta = jax.tree.map(lambda p: p.astype(jnp.float32), params)
    if order == 1:
        center, x = state.center, theta
    else:
        center = jax.tree.map(lambda c, p: c + lam * (p - c), state.center, theta)
        x = jax.tree.map(lambda p, c: jnp.square(p - c), theta, state.center)
    moments = jax.tree.map(lambda m, xi: _moments(decay, count, lam, m, xi), state.moments, x)
    return ShareState(count, center, moments)


def share_value(state: ShareState) -> PyTree:
    """ĉ = Cov(x, x̄)/Var(x) per coordinate, clipped to [0, 1]; 1 where x has not varied."""

    def ratio(m):
        c, v = m[COV], m[VAR]
        return jnp.clip(jnp.where(v > 0, c / jnp.where(v > 0, v, 1.0), 1.0), 0.0, 1.0)

    return jax.tree.map(ratio, state.moments)


def share_mean(share: PyTree) -> jax.Array:
    """The mean of ĉ over every coordinate (``info.share_mean``)."""
    leaves = jax.tree.leaves(share)
    return sum(jnp.sum(x) for x in leaves) / sum(jnp.size(x) for x in leaves)
