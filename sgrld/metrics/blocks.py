"""Kronecker blocks of a tensor, as Shampoo cuts it: merged small dimensions, padded blocks.

A leaf of shape ``(d_1, ..., d_m)`` becomes ``k`` merged dimensions (:func:`block_plan`), each split
into equal blocks; :func:`to_blocks` lays it out as ``[*num_blocks, *block]`` so that every
operation on one block is batched over all blocks. :func:`mode_gram` and :func:`mode_product`
are the two contractions Shampoo needs along block dimension ``i``.
"""

from __future__ import annotations

import math
import string
from typing import NamedTuple

import jax
import jax.numpy as jnp


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
