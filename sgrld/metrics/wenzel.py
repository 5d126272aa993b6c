"""Wenzel et al.'s layer-wise metric: one scalar per parameter leaf."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from sgrld.metrics.metric import (
    Metric,
    cached,
    check_decay,
    check_nonnegative,
    ema_metric,
)
from sgrld.numerics.pytrees import PyTree, accumulator


def mean_square(x: jax.Array) -> jax.Array:
    """``mean(x²)`` over all entries of a leaf, accumulated in at least float32."""
    return jnp.mean(jnp.square(x.astype(accumulator(x))))


def _scales(eps: float, stat: list[jax.Array]) -> list[jax.Array]:
    """``min_k σ_k / σ_l`` per leaf, ``σ_l = √(eps + v_l)``: the diagonal of ``G⁻¹``."""
    sigma = [jnp.sqrt(eps + s) for s in jax.tree.leaves(stat)]
    smallest = jnp.min(jnp.stack(sigma))
    return [smallest / s for s in sigma]


def _refresh(
    eps: float, stat: list[jax.Array], old: list[jax.Array]
) -> tuple[list[jax.Array], jax.Array]:
    """New scales, or the old ones (one fallback counted) if any is not finite."""
    new = _scales(eps, stat)
    ok = jnp.all(jnp.isfinite(jnp.stack(new)))
    return [jnp.where(ok, n, o) for n, o in zip(new, old, strict=True)], (~ok).astype(jnp.int32)


def _scaled(
    current: Callable[[list[jax.Array], list[jax.Array]], list[jax.Array]],
    power: float,
    stat: list[jax.Array],
    cache: list[jax.Array],
    v: PyTree,
) -> PyTree:
    """Each leaf of ``v`` times its cached scale to ``power`` (1: ``G⁻¹v``; 1/2: ``G^{-1/2}v``)."""
    leaves, treedef = jax.tree.flatten(v)
    c = current(stat, cache)
    return treedef.unflatten(
        [x * (s**power).astype(x.dtype) for x, s in zip(leaves, c, strict=True)]
    )


def wenzel(decay: float | str = 0.99, eps: float = 1e-8, update_every: int = 500) -> Metric:
    """Layer-wise metric of Wenzel et al. (2020), as implemented by Fortuin et al. (2021).

    ``v_l ← decay·v_l + (1 − decay)·mean(g_l²)`` for each leaf ``l``, from ``v_l = 1``. Every
    ``update_every`` updates the per-leaf scales are refreshed: ``σ_l = √(eps + v_l)`` and
    ``G_l = (σ_l / min_k σ_k)·I``, so ``G⁻¹`` is at most 1 and equals 1 on the leaf with the
    smallest mean squared gradient. Before the first refresh ``G = I``.

    The authors keep an elementwise average ``V ← decay·V + (1 − decay)·g²`` and use only its mean;
    the mean of that average is ``v_l`` (the mean is linear), so one number per leaf is the whole
    state here: no parameter-sized buffer to read and write at every step.

    Args:
      decay: EMA decay λ, in [0, 1), or :data:`~sgrld.metrics.metric.INVERSE_SQRT` (the t-th
        statistic weighted 1/√t).
      eps: stability constant.
      update_every: refresh period in updates (the authors: once per epoch).

    Returns:
      The metric.

    Example:
      >>> import jax.numpy as jnp, sgrld
      >>> m = sgrld.metrics.wenzel(decay=0.0, eps=0.0, update_every=1)
      >>> s = m.update(m.init({"a": jnp.zeros(2), "b": jnp.zeros(1)}),
      ...              {"a": jnp.array([1.0, 1.0]), "b": jnp.array([4.0])})
      >>> [round(float(x[0]), 3) for x in m.inv(s, {"a": jnp.ones(2), "b": jnp.ones(1)}).values()]
      [1.0, 0.25]

    References:
      Wenzel et al. (ICML 2020); Yu et al. (TMLR 2023), Sec. 2.
    """
    check_decay(decay)
    eps = check_nonnegative(eps, "eps")

    current = cached(functools.partial(_scales, eps))
    return ema_metric(
        statistic=lambda g: [mean_square(x) for x in jax.tree.leaves(g)],
        init_stat=lambda params: [jnp.ones((), accumulator(x)) for x in jax.tree.leaves(params)],
        decay=decay,
        inv=functools.partial(_scaled, current, 1.0),
        inv_sqrt=functools.partial(_scaled, current, 0.5),
        init_cache=lambda params: [jnp.ones((), jnp.float32) for _ in jax.tree.leaves(params)],
        refresh=functools.partial(_refresh, eps),
        update_every=update_every,
        statistic_order=2,
    )
