"""The RMSprop metric of pSGLD (Li et al., 2016)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sgrld.metrics.metric import (
    Metric,
    check_decay,
    check_nonnegative,
    ema_metric,
    leaf_mean_floor,
)


def rmsprop(decay: float | str = 0.99, eps: float = 1e-8) -> Metric:
    """Diagonal RMSprop metric (pSGLD).

    ``V ← decay·V + (1 − decay)·g²`` from ``V₀ = 0`` (no bias correction, as in the paper and the
    authors' code), ``G = diag(√V + eps)``, so ``G⁻¹v = v / (√V + eps)`` and
    ``G^{-1/2}ξ = ξ / √(√V + eps)``. The statistic is ``s(g) = g²``.

    Args:
      decay: EMA decay λ, in [0, 1), or :data:`~sgrld.metrics.metric.INVERSE_SQRT` (the t-th
        statistic weighted 1/√t).
      eps: stability constant added to √V (0 is allowed, as in Yu et al.'s funnel run).

    Returns:
      The metric.

    Example:
      >>> import jax.numpy as jnp, sgrld
      >>> m = sgrld.metrics.rmsprop(decay=0.0, eps=0.0)
      >>> s = m.update(m.init(jnp.zeros(2)), jnp.array([2.0, -4.0]))
      >>> m.inv(s, jnp.ones(2)).tolist()
      [0.5, 0.25]

    References:
      Li et al. (AAAI 2016), Alg. 1; Yu et al. (TMLR 2023), Sec. 2.
    """
    check_decay(decay)
    eps = check_nonnegative(eps, "eps")

    def inv(stat, cache, v):
        return jax.tree.map(lambda s, x: x / (jnp.sqrt(s) + eps), stat, v)

    def inv_sqrt(stat, cache, xi):
        return jax.tree.map(lambda s, x: x * jax.lax.rsqrt(jnp.sqrt(s) + eps), stat, xi)

    return ema_metric(
        statistic=lambda g: jax.tree.map(jnp.square, g),
        init_stat=lambda params: jax.tree.map(jnp.zeros_like, params),
        decay=decay,
        inv=inv,
        inv_sqrt=inv_sqrt,
        statistic_order=2,
        floor=leaf_mean_floor,
    )
