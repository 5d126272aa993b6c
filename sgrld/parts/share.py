"""The share of Γ a moving-average metric needs, estimated online (``correction_scale="auto"``).

A metric ``G⁻¹ = F(S_t)`` whose statistic ``S_t`` is a moving average of ``s(θ)`` follows θ only in
part. The drift that keeps the target is ``∇·E[F(S_t) | θ_t = θ]`` (docs/right-by-default.md);
linearising ``E[S_t | θ_t]`` in θ gives, for a probe ``z``,

    Γ̂ = D_S[F(S_t)·z] ( s′(g)·H(C z) ),      C = Cov(θ̄_t, θ_t)·Var(θ_t)⁻¹,

with ``θ̄`` the metric's own moving average applied to θ. :func:`share_value` estimates C as one
share per leaf, ``ĉ = Σᵢ Cov(xᵢ, x̄ᵢ) / Σᵢ Var(xᵢ)`` over the leaf's coordinates, clipped to
[0, 1], from running moments over a window of ``window`` memories of the metric; the correction
takes its Hessian-vector product along ``ĉ·z`` (:func:`sgrld.parts.correction.hutchinson`). One
share per leaf, not per coordinate: the variance and the covariance pooled over a leaf are two
scalars, where per coordinate they were two more parameter-sized arrays to read and write each
step (RESULTS §29). ``x`` is θ for a statistic of
order 1 and ``(θ − μ)²`` for one of order 2 (Mehler: a quadratic statistic decays as ρ_k²).
For an AR(1) chain with lag-1 correlation ρ and decay β: ``ĉ → (1−β)/(1−βρ^order)``; decay 0
gives ĉ = 1 (the full Γ, the metric is a function of θ), a frozen average ĉ → 0.

Example:
  >>> import jax.numpy as jnp
  >>> s = share_init(jnp.zeros(2))
  >>> for x in (1.0, -1.0, 2.0):
  ...     s = share_update(s, jnp.full(2, x), decay=0.0)
  >>> share_value(s).item()   # decay 0: x̄ = x, so ĉ = 1
  1.0
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.metric import INVERSE_SQRT, ema_step
from sgrld.numerics.pytrees import PyTree

WINDOWS = {1: 100.0, 2: 20.0}
"""The moments' window by the feature's order, in memories of the metric (1/(1 − decay) steps, or
√t under 1/√t).

Order 1: a windowed estimate is the share times ``W/(W+1)`` (docs/right-by-default.md), which
:func:`share_update` undoes; a long window lowers what is left of that bias on slow chains. On
Rensmeyer & Niggemann's 1-D Monge, 20 memories gave TV 0.025 / 0.034 / 0.034 at decay 0.9 / 0.99
/ 1/√t, 100 with the factor 0.007 / 0.019 / 0.016 (RESULTS §29). Order 2 (statistics that vanish
at the mode, where no constant share is right) keeps 20 and no factor: a longer window raised ĉ
and the error of pSGLD and Shampoo in 1-D and of RMSprop on BLR."""


class ShareState(NamedTuple):
    """Running moments of the share estimator (one set per chain, float32).

    Per coordinate it keeps two arrays, x̄ and the mean of x; the variance and the covariance are
    pooled over each leaf, two scalars. A step reads and writes 2 (order 1) or 3 (order 2)
    parameter-sized arrays: the share's memory traffic, which on a cheap metric's step is its
    cost (``benchmarks/right_by_default/share_cost.py``).

    Attributes:
      count: int32 updates folded in.
      center: running mean of θ, shaped like θ (the centre of the order-2 feature; zeros for
        order 1, which needs none).
      bar: x̄, the metric's moving average (same decay or 1/√t schedule) applied to the feature x,
        shaped like θ.
      mean: running mean of x, shaped like θ.
      pooled: per leaf, float32 ``[2]``: the running variance of x and its covariance with x̄,
        each summed over the leaf's coordinates (rows :data:`VAR` and :data:`COV`).
    """

    count: jax.Array
    center: PyTree
    bar: PyTree
    mean: PyTree
    pooled: PyTree


VAR, COV = range(2)
"""The rows of :attr:`ShareState.pooled`."""


def metric_weight(decay: float | str, count: jax.Array) -> jax.Array:
    """The weight of the ``count``-th statistic in the metric's average: 1 − decay or 1/√t."""
    if decay == INVERSE_SQRT:
        return jax.lax.rsqrt(jnp.maximum(count, 1).astype(jnp.float32))
    return jnp.asarray(1.0 - decay, jnp.float32)


def share_init(params: PyTree) -> ShareState:
    """Zero moments; x̄ starts at the first feature (the first update has weight 1)."""
    zeros = lambda p: jnp.zeros(jnp.shape(p), jnp.float32)
    pooled = jax.tree.map(lambda p: jnp.zeros((2,), jnp.float32), params)
    return ShareState(
        jnp.zeros((), jnp.int32),
        jax.tree.map(zeros, params),
        jax.tree.map(zeros, params),
        jax.tree.map(zeros, params),
        pooled,
    )


def share_update(
    state: ShareState,
    params: PyTree,
    *,
    decay: float | str,
    window: float | None = None,
    order: int = 1,
) -> ShareState:
    """Fold θ_t into the moments.

    x̄ follows the metric's schedule (:func:`sgrld.metrics.metric.ema_step`) from x₁; the moments
    use the weight ``λ_t = max(1/t, w_t/window)``: a plain mean at first, then a moving window of
    ``window`` memories of the metric (``w_t`` its weight). With ``d = x − m`` and ``e = x̄ − m``
    (m the mean of x before the update), per leaf

        V ← (1−λ)(V + λ Σᵢ dᵢ²),    C ← (1−λ)(C + λ f Σᵢ dᵢeᵢ),    m ← m + λd,

    with f = (W+1)/W, the window's bias undone, for order 1 (1 for order 2). x̄ is centred on x's
    mean, not its own: the covariance needs only one factor centred, and x̄'s mean is x's in a
    stationary chain.

    Args:
      state: the moments so far.
      params: θ_t.
      decay: the metric's decay (:attr:`sgrld.metrics.Metric.decay`).
      window: the moments' window in memories of the metric (``None``: :data:`WINDOWS`).
      order: 1 (regress θ) or 2 (regress (θ − μ)²).

    Returns:
      The updated :class:`ShareState`.
    """
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order}")
    window = WINDOWS[order] if window is None else window
    factor = (window + 1.0) / window if order == 1 else 1.0  # the window's bias, order 1
    count = state.count + 1
    lam = jnp.maximum(1.0 / count.astype(jnp.float32), metric_weight(decay, count) / window)
    theta = jax.tree.map(lambda p: p.astype(jnp.float32), params)
    if order == 1:
        center, x = state.center, theta
    else:
        center = jax.tree.map(lambda c, p: c + lam * (p - c), state.center, theta)
        x = jax.tree.map(lambda p, c: jnp.square(p - c), theta, state.center)
    bar = jax.tree.map(
        lambda b, xi: jnp.where(count == 1, xi, ema_step(decay, count, b, xi)), state.bar, x
    )
    d = jax.tree.map(jnp.subtract, x, state.mean)
    e = jax.tree.map(jnp.subtract, bar, state.mean)
    mean = jax.tree.map(lambda m, di: m + lam * di, state.mean, d)

    def pool(v, di, ei):
        return (1 - lam) * (v + lam * jnp.stack([jnp.sum(di * di), factor * jnp.sum(di * ei)]))

    pooled = jax.tree.map(pool, state.pooled, d, e)
    return ShareState(count, center, bar, mean, pooled)


def share_value(state: ShareState) -> PyTree:
    """ĉ = C/V per leaf (a float32 scalar), clipped to [0, 1]; 1 where x has not varied."""

    def ratio(v):
        c, v = v[COV], v[VAR]
        return jnp.clip(jnp.where(v > 0, c / jnp.where(v > 0, v, 1.0), 1.0), 0.0, 1.0)

    return jax.tree.map(ratio, state.pooled)


def share_mean(state: ShareState) -> jax.Array:
    """The mean of ĉ over every coordinate, each leaf weighted by its size (``info.share_mean``)."""
    sizes = [jnp.size(x) for x in jax.tree.leaves(state.bar)]
    shares = jax.tree.leaves(share_value(state))
    return sum(c * n for c, n in zip(shares, sizes, strict=True)) / sum(sizes)
