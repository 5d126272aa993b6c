"""The Kronecker-factored Shampoo metric of Yu et al. (2023), after Gupta et al. (2018).

For the Γ correction the roots are differentiated through the cached eigendecomposition
(Daleckii–Krein, :mod:`sgrld.numerics.linalg`); between refreshes Γ is therefore the derivative of
the root map at the statistic of the last refresh. The derivative is taken in the eigenbases of the
factors (``Metric.inv_grad_tangent``): the gradient, its change and the probe are rotated in, the
result rotated out once, 6k blocked products per block instead of the 8k of differentiating ``inv``
factor by factor (``benchmarks/shampoo_gamma.py cost``).

With the Γ correction use ``eps`` ≈ 1e-2: Γ contains the derivative of ``λ^{-1/(2k)}`` at the
smallest ridged eigenvalue, which grows like ``(eps·λ_max)^{-1-1/(2k)}``. On the 784-400-400-10 MLP
of ``benchmarks/shampoo_gamma.py eps`` (random data) eps = 1e-8 and 1e-6 went non-finite soon after
Γ started (steps 305 and 381, warm-up 300), 1e-4 and 1e-2 stayed finite for 600 steps; on MNIST
(horseshoe prior, lr 0.005, decay 0.99) eps = 1e-4 and 1e-3 went non-finite at steps 742 and 998,
in the first layer's bias (a one-factor leaf, whose statistic is a sum of rank-one terms), and 1e-2
stayed finite for 1,500 steps.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.blocks import (
    BlockPlan,
    block_plan,
    factor_statistics,
    from_blocks,
    mode_gram,
    mode_product,
    to_blocks,
)
from sgrld.metrics.metric import (
    Metric,
    check_decay,
    check_nonnegative,
    ema_metric,
)
from sgrld.numerics.linalg import (
    power_from_eigh,
    power_tangent,
    power_tangent_in_eigenbasis,
    ridged_eighs,
)
from sgrld.numerics.pytrees import PyTree, accumulator


@partial(jax.custom_jvp, nondiff_argnums=(4, 5))
def _cached_power(stat, q, lam, value, p, eps):
    return value


@_cached_power.defjvp
def _cached_power_jvp(p, eps, primals, tangents):
    stat, q, lam, value = primals
    return value, power_tangent(q, lam, p, tangents[0], eps)


class FactorCache(NamedTuple):
    """One Kronecker factor's decomposition and roots, per block (refreshed every update_every)."""

    eigvecs: jax.Array
    eigvals: jax.Array
    inv_root: jax.Array  # H^{-1/(2k)}
    inv_sqrt_root: jax.Array  # H^{-1/(4k)}


def eigenbasis_inv_tangent(
    z: jax.Array, g: jax.Array, dg: jax.Array, leaf_cache: list[FactorCache], eps: float
) -> jax.Array:
    """``D_S[F(S) z]`` along the statistic's change ``D s(g)[dg]``, for one leaf's blocks.

    With ``Q = ⊗ Q_i`` the cached eigenvectors, ``F(S) z = Q (⊗ diag f_i) Qᵀ z`` with
    ``f_i = λ_i^{−1/(2k)}``. In the eigenbasis of factor i the statistic's tangent is
    ``sym(dG̃_(i) G̃_(i)ᵀ)`` for the rotated blocks ``G̃ = Qᵀ g``, ``dG̃ = Qᵀ dg`` (the rotations of
    the other dimensions cancel in the contraction), and the root's tangent is the
    Daleckii–Krein kernel times it (:func:`sgrld.numerics.linalg.power_tangent_in_eigenbasis`). So:
    rotate ``z``, ``g``, ``dg`` in (k blocked products each), one product per factor for the tangent
    and one for applying it with the other factors' ``diag f_j``, rotate out once (k): 6k products
    where differentiating ``inv`` factor by factor takes about 8k.

    Args:
      z, g, dg: blocks ``[*num_blocks, *block]`` of the probe, the gradient and its change.
      leaf_cache: the leaf's k cached factors (eigenvectors and ridged eigenvalues).
      eps: the relative ridge (its derivative is included).

    Returns:
      The tangent, as blocks.
    """
    k = len(leaf_cache)

    def rotate(blocks, transpose):
        for i, c in enumerate(leaf_cache):
            q = jnp.swapaxes(c.eigvecs, -1, -2) if transpose else c.eigvecs
            blocks = mode_product(blocks, q, i, k)
        return blocks

    zt, gt, dgt = rotate(z, True), rotate(g, True), rotate(dg, True)
    exponent = -0.5 / k
    powers = [c.eigvals**exponent for c in leaf_cache]
    tangent = jnp.zeros_like(zt)
    for i, c in enumerate(leaf_cache):
        e = mode_gram(dgt, gt, i, k)
        e = power_tangent_in_eigenbasis(c.eigvals, exponent, e + jnp.swapaxes(e, -1, -2), eps)
        scaled = zt
        for j, f in enumerate(powers):
            if j != i:  # diag(f_j) along block dimension j
                along_j = tuple(f.shape[-1] if m == j else 1 for m in range(k))
                scaled = scaled * f.reshape(f.shape[:k] + along_j)
        tangent = tangent + mode_product(scaled, e, i, k)
    return rotate(tangent, False)


def _plans(block_size: int, tree: PyTree) -> list[BlockPlan]:
    """The block plan of every leaf of ``tree``."""
    return [block_plan(jnp.shape(x), block_size) for x in jax.tree.leaves(tree)]


def _eyes(plan: BlockPlan, b: int, dtype: jnp.dtype) -> jax.Array:
    """One ``b×b`` identity per block: ``[*num_blocks, b, b]``."""
    return jnp.broadcast_to(jnp.eye(b, dtype=dtype), (*plan.num_blocks, b, b))


def _statistic(block_size: int, grads: PyTree) -> list[list[jax.Array]]:
    """``G_(i) G_(i)ᵀ`` per block for every dimension i of every leaf (at least float32)."""
    return [
        factor_statistics(to_blocks(g.astype(accumulator(g)), p), p.order)
        for g, p in zip(jax.tree.leaves(grads), _plans(block_size, grads), strict=True)
    ]


def _init_stat(eps: float, block_size: int, params: PyTree) -> list[list[jax.Array]]:
    """``H_i = eps·I`` for every factor of every leaf."""
    return [
        [eps * _eyes(p, b, accumulator(x)) for b in p.block]
        for x, p in zip(jax.tree.leaves(params), _plans(block_size, params), strict=True)
    ]


def _init_cache(block_size: int, params: PyTree) -> list[list[FactorCache]]:
    """Identity roots (eigenvectors I, eigenvalues 1) for every factor of every leaf."""
    cache = []
    for x, p in zip(jax.tree.leaves(params), _plans(block_size, params), strict=True):
        factors = []
        for b in p.block:
            eye = _eyes(p, b, accumulator(x))
            ones = jnp.ones((*p.num_blocks, b), accumulator(x))
            factors.append(FactorCache(eye, ones, eye, eye))
        cache.append(factors)
    return cache


def _refreshed_factor(
    q: jax.Array, lam: jax.Array, ok: jax.Array, prev: FactorCache, k: int
) -> tuple[FactorCache, jax.Array]:
    """The roots of one factor from its decomposition; blocks not finite keep ``prev``.

    Returns:
      The new cache and the number of blocks that kept ``prev``.
    """
    inv_root = power_from_eigh(q, lam, -1.0 / (2 * k))
    inv_sqrt_root = power_from_eigh(q, lam, -1.0 / (4 * k))
    ok &= jnp.all(jnp.isfinite(inv_root), axis=(-2, -1))
    ok &= jnp.all(jnp.isfinite(inv_sqrt_root), axis=(-2, -1))
    keep = ok[..., None, None]
    factor = FactorCache(
        jnp.where(keep, q, prev.eigvecs),
        jnp.where(ok[..., None], lam, prev.eigvals),
        jnp.where(keep, inv_root, prev.inv_root),
        jnp.where(keep, inv_sqrt_root, prev.inv_sqrt_root),
    )
    return factor, jnp.sum(~ok).astype(jnp.int32)


def _refresh(
    eps: float, stat: list[list[jax.Array]], old: list[list[FactorCache]]
) -> tuple[list[list[FactorCache]], jax.Array]:
    """Recompute every factor's roots from one eigendecomposition; count the fallbacks."""
    new_cache, failed = [], jnp.zeros((), jnp.int32)
    # One decomposition at a time: concurrent batched eighs deadlock XLA's CPU runtime.
    eighs = iter(ridged_eighs([h for leaf_stat in stat for h in leaf_stat], eps))
    for leaf_stat, leaf_old in zip(stat, old, strict=True):
        factors = []
        for prev in leaf_old:
            factor, num_failed = _refreshed_factor(*next(eighs), prev, len(leaf_stat))
            factors.append(factor)
            failed = failed + num_failed
        new_cache.append(factors)
    return new_cache, failed


def _apply_roots(
    block_size: int,
    eps: float,
    root_field: str,
    order_exponent: float,
    stat: list[list[jax.Array]],
    cache: list[list[FactorCache]],
    v: PyTree,
) -> PyTree:
    """``⊗_i R_i · v`` per leaf, ``R_i`` the cached ``root_field`` (``H_i^{order_exponent/k}``).

    The roots carry the derivative of the power map (:func:`_cached_power`) for the Γ correction.
    """
    leaves, treedef = jax.tree.flatten(v)
    out = []
    for x, p, leaf_stat, leaf_cache in zip(leaves, _plans(block_size, v), stat, cache, strict=True):
        k = p.order
        blocks = to_blocks(x.astype(accumulator(x)), p)
        for i, (h, c) in enumerate(zip(leaf_stat, leaf_cache, strict=True)):
            root = _cached_power(
                h, c.eigvecs, c.eigvals, getattr(c, root_field), order_exponent / k, eps
            )
            blocks = mode_product(blocks, root, i, k)
        out.append(from_blocks(blocks, p).astype(x.dtype))
    return treedef.unflatten(out)


def _inv_grad_tangent(
    block_size: int,
    eps: float,
    cache: list[list[FactorCache]],
    v: PyTree,
    grads: PyTree,
    dgrads: PyTree,
) -> PyTree:
    """:attr:`Metric.inv_grad_tangent`, leaf by leaf with :func:`eigenbasis_inv_tangent`."""
    out = []
    leaves, treedef = jax.tree.flatten(v)
    for x, g, dg, p, leaf_cache in zip(
        leaves,
        jax.tree.leaves(grads),
        jax.tree.leaves(dgrads),
        _plans(block_size, v),
        cache,
        strict=True,
    ):
        blocks = [to_blocks(y.astype(accumulator(x)), p) for y in (x, g, dg)]
        tangent = eigenbasis_inv_tangent(*blocks, leaf_cache, eps)
        out.append(from_blocks(tangent, p).astype(x.dtype))
    return treedef.unflatten(out)


def shampoo(
    decay: float | str = 0.99, eps: float = 1e-8, update_every: int = 100, block_size: int = 128
) -> Metric:
    """Kronecker-factored Shampoo metric, per leaf and per block.

    For a leaf with k merged dimensions and gradient blocks ``G``, factor i keeps
    ``H_i ← decay·H_i + (1 − decay)·G_(i) G_(i)ᵀ`` from ``H_i = eps·I``, and::

        G⁻¹ = ⊗_i (H_i + r_i)^{−1/(2k)},      G^{−1/2} = ⊗_i (H_i + r_i)^{−1/(4k)},

    with the ridge ``r_i = eps·λ_max(H_i)``. The roots are recomputed every ``update_every`` updates
    (the metric's own counter; the identity before the first refresh) from one eigendecomposition in
    at least float32; a block whose decomposition is not finite keeps its previous roots (counted in
    ``state.fallbacks``). A vector is a one-factor tensor, so it gets full-matrix RMSprop on each
    block, as in Yu et al.'s funnel; a scalar is the 1×1 case, ``G⁻¹ = 1/|g|`` as in Rensmeyer &
    Niggemann's one-dimensional analysis. How Γ is differentiated, and why ``eps`` matters for
    it: see the module docstring.

    Args:
      decay: EMA decay λ, in [0, 1), or :data:`~sgrld.metrics.metric.INVERSE_SQRT` (the t-th
        statistic weighted 1/√t).
      eps: initial statistic scale and relative ridge; with the Γ correction use eps ≈ 1e-2.
      update_every: root refresh period in updates.
      block_size: largest block length along any dimension.

    Returns:
      The metric.

    Example:
      >>> import jax.numpy as jnp, sgrld
      >>> m = sgrld.metrics.shampoo(decay=0.0, eps=0.0, update_every=1)
      >>> s = m.update(m.init(jnp.zeros(())), jnp.array(-4.0))
      >>> round(float(m.inv(s, jnp.array(1.0))), 4)  # 1/|g| for a scalar
      0.25

    References:
      Yu et al. (TMLR 2023), Sec. 3.2 and App. A.9; Gupta, Koren & Singer (ICML 2018);
      Anil et al. (2021).
    """
    check_decay(decay)
    eps = check_nonnegative(eps, "eps")
    if int(block_size) < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size}")
    block_size = int(block_size)
    return ema_metric(
        statistic=partial(_statistic, block_size),
        init_stat=partial(_init_stat, eps, block_size),
        decay=decay,
        inv=partial(_apply_roots, block_size, eps, "inv_root", -0.5),
        inv_sqrt=partial(_apply_roots, block_size, eps, "inv_sqrt_root", -0.25),
        init_cache=partial(_init_cache, block_size),
        refresh=partial(_refresh, eps),
        update_every=update_every,
        inv_grad_tangent=partial(_inv_grad_tangent, block_size, eps),
        statistic_order=2,
    )
