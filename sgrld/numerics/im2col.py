"""The patches of a convolution as one matrix (im2col): what an im2col convolution multiplies by
its kernel, and the per-example gradient of a convolution's kernel
(:mod:`sgrld.numerics.tap_statistics`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import jax
import jax.numpy as jnp


def im2col_patches(
    x: jax.Array,
    window: Sequence[int],
    strides: Sequence[int],
    padding: Sequence[tuple[int, int]],
) -> jax.Array:
    """The patches of a convolution: ``P[b, p, (k, c)] = x̃[b, s ⊙ p + k, c]`` for inputs
    ``x [B, *spatial, C]`` padded to ``x̃`` by ``padding`` (``(low, high)`` per spatial
    dimension), every output position ``p``, window offset ``k`` (row-major) and channel ``c``:
    ``[B, *out_spatial, K·C]``, matching a kernel ``[*window, C, O]`` reshaped to ``[K·C, O]``
    (:func:`sgrld.bnn.convolutions.im2col_conv`; the per-example gradients of convolutions in
    :mod:`sgrld.numerics.tap_statistics`).

    Example:
        >>> x = jnp.arange(4.0).reshape(1, 4, 1)  # one 1-D signal 0, 1, 2, 3
        >>> im2col_patches(x, (2,), (2,), ((0, 0),))[0].tolist()  # windows of 2, stride 2
        [[0.0, 1.0], [2.0, 3.0]]
    """
    window, strides = tuple(window), tuple(strides)
    zero = jnp.zeros((), x.dtype)
    x = jax.lax.pad(x, zero, [(0, 0, 0), *((lo, hi, 0) for lo, hi in padding), (0, 0, 0)])
    out = [(size - k) // s + 1 for size, k, s in zip(x.shape[1:-1], window, strides, strict=True)]

    def patch(offset: tuple[int, ...]) -> jax.Array:  # x̃[:, s ⊙ p + k, :] over all p, for k
        end = [k + (o - 1) * s + 1 for k, o, s in zip(offset, out, strides, strict=True)]
        return jax.lax.slice(x, (0, *offset, 0), (x.shape[0], *end, x.shape[-1]), (1, *strides, 1))

    return jnp.concatenate([patch(k) for k in itertools.product(*map(range, window))], axis=-1)
