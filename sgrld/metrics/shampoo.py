"""The Kronecker-factored Shampoo metric of Yu et al. (2023), after Gupta et al. (2018)."""

from __future__ import annotations

import math
import string
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.linalg import (
    power_from_eigh,
    power_tangent,
    power_tangent_in_eigenbasis,
    ridged_eighs,
)
from sgrld.metrics.base import Metric, check_decay, check_nonnegative, ema_metric


class BlockPlan(NamedTuple):
    """How one parameter leaf is cut into Kronecker-factored blocks (static, from its shape).

    Attributes:
      shape: the leaf's shape.
      merged: the shape after merging consecutive small dimensions (product ≤ block_size); a
        scalar becomes ``(1,)``.
      num_blocks: blocks along each merged dimension.
      block: block length along each merged dimension (dimension padded to num_blocks·block).
    """

    shape: tuple[int, ...]
    merged: tuple[int, ...]
    num_blocks: tuple[int, ...]
    block: tuple[int, ...]

    @property
    def order(self) -> int:
        """The number k of Kronecker factors."""
        return len(self.merged)


def block_plan(shape: tuple[int, ...], block_size: int) -> BlockPlan:
    """Merge small dimensions and split large ones, as in scalable Shampoo.

    Consecutive dimensions are merged greedily while their product stays ≤ ``block_size``; each
    merged dimension longer than ``block_size`` is split into the fewest equal blocks of at most
    ``block_size`` (the last padded with zeros, which never mix with real entries).

    Example:
      >>> block_plan((16, 16, 3, 3), 128).merged
      (16, 48, 3)
      >>> p = block_plan((400, 784), 128); p.num_blocks, p.block
      ((4, 7), (100, 112))
      >>> block_plan((), 128).merged
      (1,)
    """
    merged: list[int] = []
    current = 1
    for d in shape:
        if current * d <= block_size:
            current *= d
        else:
            if current > 1:
                merged.append(current)
            current = d
    if current > 1 or not merged:
        merged.append(current)
    num_blocks = tuple(max(1, math.ceil(d / block_size)) for d in merged)
    block = tuple(math.ceil(d / n) for d, n in zip(merged, num_blocks, strict=True))
    return BlockPlan(tuple(shape), tuple(merged), num_blocks, block)


def to_blocks(x: jax.Array, plan: BlockPlan) -> jax.Array:
    """Reshape a leaf to ``[*num_blocks, *block]`` (zero padded)."""
    k = plan.order
    x = x.reshape(plan.merged)
    pad = [(0, n * b - d) for d, n, b in zip(plan.merged, plan.num_blocks, plan.block, strict=True)]
    x = jnp.pad(x, pad).reshape(
        [s for nb in zip(plan.num_blocks, plan.block, strict=True) for s in nb]
    )
    return x.transpose([2 * i for i in range(k)] + [2 * i + 1 for i in range(k)])


def from_blocks(x: jax.Array, plan: BlockPlan) -> jax.Array:
    """Inverse of :func:`to_blocks`."""
    k = plan.order
    x = x.transpose([j for i in range(k) for j in (i, k + i)])
    x = x.reshape([n * b for n, b in zip(plan.num_blocks, plan.block, strict=True)])
    x = x[tuple(slice(0, d) for d in plan.merged)]
    return x.reshape(plan.shape)


def _subscripts(k: int) -> tuple[str, str]:
    return string.ascii_uppercase[:k], string.ascii_lowercase[:k]


def mode_gram(a: jax.Array, b: jax.Array, i: int, k: int) -> jax.Array:
    """``A_(i) B_(i)ᵀ`` per block: the contraction of two block arrays over all dimensions but i."""
    batch, idx = _subscripts(k)
    left = batch + idx[:i] + "x" + idx[i + 1 :]
    right = batch + idx[:i] + "y" + idx[i + 1 :]
    return jnp.einsum(f"{left},{right}->{batch}xy", a, b)


def factor_statistics(blocks: jax.Array, k: int) -> list[jax.Array]:
    """``G_(i) G_(i)ᵀ`` for every dimension i: the contraction over all other block dimensions."""
    return [mode_gram(blocks, blocks, i, k) for i in range(k)]


def mode_product(blocks: jax.Array, mat: jax.Array, i: int, k: int) -> jax.Array:
    """Multiply the i-th block dimension by a (symmetric) per-block matrix
    ``[*num_blocks, b, b]``."""
    batch, idx = _subscripts(k)
    src = batch + idx
    dst = batch + idx[:i] + "x" + idx[i + 1 :]
    return jnp.einsum(f"{batch}x{idx[i]},{src}->{dst}", mat, blocks)


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
    Daleckii–Krein kernel times it (:func:`sgrld.linalg.power_tangent_in_eigenbasis`). So: rotate
    ``z``, ``g``, ``dg`` in (k blocked products each), one product per factor for the tangent and
    one for applying it with the other factors' ``diag f_j``, rotate out once (k): 6k products
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


def shampoo(
    decay: float = 0.99, eps: float = 1e-8, update_every: int = 100, block_size: int = 128
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
    Niggemann's one-dimensional analysis.

    For the Γ correction the roots are differentiated through the cached eigendecomposition
    (Daleckii–Krein, :mod:`sgrld.linalg`); between refreshes Γ is therefore the derivative of the
    root map at the statistic of the last refresh. The derivative is taken in the eigenbases of the
    factors (``Metric.inv_grad_tangent``): the gradient, its change and the probe are rotated in,
    the result rotated out once, 6k blocked products per block instead of the 8k of
    differentiating ``inv`` factor by factor (``benchmarks/shampoo_gamma_path.py``).

    Args:
      decay: EMA decay λ, in [0, 1).
      eps: initial statistic scale and relative ridge. With the Γ correction use eps ≈ 1e-2: Γ
        contains the derivative of ``λ^{-1/(2k)}`` at the smallest ridged eigenvalue, which grows
        like ``(eps·λ_max)^{-1-1/(2k)}``. On the 784-400-400-10 MLP of
        ``benchmarks/shampoo_gamma_eps.py`` (random data) eps = 1e-8 and 1e-6 went non-finite
        soon after Γ started (steps 305 and 381, warm-up 300), 1e-4 and 1e-2 stayed finite for
        600 steps; on MNIST (horseshoe prior, lr 0.005, decay 0.99) eps = 1e-4 and 1e-3 went
        non-finite at steps 742 and 998, in the first layer's bias (a one-factor leaf, whose
        statistic is a sum of rank-one terms), and 1e-2 stayed finite for 1,500 steps.
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

    def plans(tree):
        return [block_plan(jnp.shape(x), block_size) for x in jax.tree.leaves(tree)]

    def compute_dtype(x):
        return jnp.promote_types(x.dtype, jnp.float32)

    def statistic(grads):
        return [
            factor_statistics(to_blocks(g.astype(compute_dtype(g)), p), p.order)
            for g, p in zip(jax.tree.leaves(grads), plans(grads), strict=True)
        ]

    def init_stat(params):
        return [
            [
                eps * jnp.broadcast_to(jnp.eye(b, dtype=compute_dtype(x)), (*p.num_blocks, b, b))
                for b in p.block
            ]
            for x, p in zip(jax.tree.leaves(params), plans(params), strict=True)
        ]

    def init_cache(params):
        cache = []
        for x, p in zip(jax.tree.leaves(params), plans(params), strict=True):
            factors = []
            for b in p.block:
                eye = jnp.broadcast_to(jnp.eye(b, dtype=compute_dtype(x)), (*p.num_blocks, b, b))
                ones = jnp.ones((*p.num_blocks, b), compute_dtype(x))
                factors.append(FactorCache(eye, ones, eye, eye))
            cache.append(factors)
        return cache

    def refresh(stat, old):
        new_cache, failed = [], jnp.zeros((), jnp.int32)
        # One decomposition at a time: concurrent batched eighs deadlock XLA's CPU runtime.
        eighs = iter(ridged_eighs([h for leaf_stat in stat for h in leaf_stat], eps))
        for leaf_stat, leaf_old in zip(stat, old, strict=True):
            k = len(leaf_stat)
            factors = []
            for prev in leaf_old:
                q, lam, ok = next(eighs)
                inv_root = power_from_eigh(q, lam, -1.0 / (2 * k))
                inv_sqrt_root = power_from_eigh(q, lam, -1.0 / (4 * k))
                ok &= jnp.all(jnp.isfinite(inv_root), axis=(-2, -1))
                ok &= jnp.all(jnp.isfinite(inv_sqrt_root), axis=(-2, -1))
                keep = ok[..., None, None]
                factors.append(
                    FactorCache(
                        jnp.where(keep, q, prev.eigvecs),
                        jnp.where(ok[..., None], lam, prev.eigvals),
                        jnp.where(keep, inv_root, prev.inv_root),
                        jnp.where(keep, inv_sqrt_root, prev.inv_sqrt_root),
                    )
                )
                failed = failed + jnp.sum(~ok).astype(jnp.int32)
            new_cache.append(factors)
        return new_cache, failed

    def apply(root_field, order_exponent):
        def fn(stat, cache, v):
            leaves, treedef = jax.tree.flatten(v)
            out = []
            for x, p, leaf_stat, leaf_cache in zip(leaves, plans(v), stat, cache, strict=True):
                k = p.order
                blocks = to_blocks(x.astype(compute_dtype(x)), p)
                for i, (h, c) in enumerate(zip(leaf_stat, leaf_cache, strict=True)):
                    root = _cached_power(
                        h, c.eigvecs, c.eigvals, getattr(c, root_field), order_exponent / k, eps
                    )
                    blocks = mode_product(blocks, root, i, k)
                out.append(from_blocks(blocks, p).astype(x.dtype))
            return treedef.unflatten(out)

        return fn

    def inv_grad_tangent(cache, v, grads, dgrads):
        out = []
        leaves, treedef = jax.tree.flatten(v)
        for x, g, dg, p, leaf_cache in zip(
            leaves,
            jax.tree.leaves(grads),
            jax.tree.leaves(dgrads),
            plans(v),
            cache,
            strict=True,
        ):
            blocks = [to_blocks(y.astype(compute_dtype(x)), p) for y in (x, g, dg)]
            tangent = eigenbasis_inv_tangent(*blocks, leaf_cache, eps)
            out.append(from_blocks(tangent, p).astype(x.dtype))
        return treedef.unflatten(out)

    return ema_metric(
        statistic=statistic,
        init_stat=init_stat,
        decay=decay,
        inv=apply("inv_root", -0.5),
        inv_sqrt=apply("inv_sqrt_root", -0.25),
        init_cache=init_cache,
        refresh=refresh,
        update_every=update_every,
        inv_grad_tangent=inv_grad_tangent,
    )
