"""The Langevin noise ξ: the same numbers as ``jax.random.normal``, drawn faster on CPU.

Each SGLD step draws one standard normal per parameter, and on a CPU that draw costs as much as the
forward and backward pass of an MLP (``benchmarks/draws.py``). JAX lowers the threefry hash on
CPU as a *rolled* loop of five four-round blocks, each writing its intermediate words to memory.
:func:`normal` evaluates the same hash unrolled, so that XLA fuses counter, hash, uniform and
inverse error function into one pass over memory: about 2× faster on the 478k-parameter MLP, and
bit-identical to ``jax.random.normal(key, shape, dtype)``: the Threefry-2x32 hash of Salmon et al.
(2011) applied to the counters of JAX's partitionable threefry (``jax_threefry_partitionable``, the
default), the two output words combined by xor, and JAX's map from bits to uniforms on
[nextafter(−1, 0), 1) to normals, √2·erf⁻¹(u).

:func:`normal_like` also makes XLA keep the draw in memory. Where the noise is read more than once
(Monge's ``G^{-1/2}ξ`` needs ``⟨m, ξ⟩`` before it can use ξ), XLA would otherwise recompute the
cheap unrolled hash inside each reader: Monge's step cost about 1.55× Identity's that way, and
1.1–1.25× with the draw kept (``benchmarks/draws.py``, with and without ``--chains 1``).
Identity's step does not get slower.
This applies on CPU only: it has not been measured on a GPU, where a conditional may cost a
synchronisation per step, so other backends keep the fused draw.

The hash, each leaf's draw and each tree's draw are jitted functions, so that tracing a program
reuses them per size instead of re-tracing the unrolled hash at every call: XLA inlines them, and
the compiled program is the same.

Keys of another implementation (``rbg``, ``unsafe_rbg``), dtypes other than float32, the
non-partitionable threefry mode and sizes of 2³² or more go to ``jax.random.normal`` unchanged.

Reference: J. K. Salmon, M. A. Moraes, R. O. Dror, D. E. Shaw, "Parallel random numbers: as easy as
1, 2, 3", SC 2011.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

# Threefry-2x32 with 20 rounds: rotation constants of the two alternating four-round blocks and the
# key-schedule parity constant (Salmon et al. 2011, Table 4; JAX's `threefry2x32_p`).
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)
_BLOCKS = 5


def _rotate_left(v: Array, r: int) -> Array:
    return (v << np.uint32(r)) | (v >> np.uint32(32 - r))


def _threefry2x32(k0: Array, k1: Array, x0: Array, x1: Array) -> tuple[Array, Array]:
    schedule = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0, x1 = x0 + schedule[0], x1 + schedule[1]
    for block in range(_BLOCKS):
        for r in _ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = x0 ^ _rotate_left(x1, r)
        x0 = x0 + schedule[(block + 1) % 3]
        x1 = x1 + schedule[(block + 2) % 3] + np.uint32(block + 1)
    return x0, x1


def _fast_path(key: PRNGKeyArray, size: int) -> bool:
    """Whether ``jax.random`` would draw ``size`` 32-bit words as :func:`_bits` does."""
    return (
        size < 2**32
        and bool(jax.config.jax_threefry_partitionable)
        and jax.random.key_impl(key) == "threefry2x32"
    )


@functools.partial(jax.jit, static_argnums=1)
def _bits(key: PRNGKeyArray, size: int) -> Array:
    """The ``size`` 32-bit words of ``jax.random.bits(key, (size,))``, with the hash unrolled."""
    k0, k1 = jax.random.key_data(key)
    counter = lax.iota(np.uint32, size)
    w0, w1 = _threefry2x32(k0, k1, jnp.zeros_like(counter), counter)
    return w0 ^ w1


def _checked_shape(shape: Sequence[int]) -> tuple[tuple[int, ...], int]:
    shape = tuple(shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"shape must have non-negative dimensions, got {shape}")
    return shape, int(np.prod(shape, dtype=np.int64))


def normal(
    key: PRNGKeyArray, shape: Sequence[int] = (), dtype: jnp.dtype = jnp.float32
) -> Float[Array, ...]:
    """Standard normals of ``shape``, bit for bit ``jax.random.normal(key, shape, dtype)``.

    Args:
        key: a PRNG key (typed or raw ``uint32[2]``).
        shape: shape of the draw.
        dtype: floating dtype of the draw.

    Returns:
        An array of ``shape`` and ``dtype`` of independent N(0, 1) numbers.

    Raises:
        ValueError: for a negative dimension (``jax.random.normal`` fails there with an MLIR
            error).

    Example:
        >>> import jax, jax.numpy as jnp, sgrld
        >>> key = jax.random.key(0)
        >>> drawn = sgrld.numerics.noise.normal(key, (3, 4))
        >>> bool(jnp.all(drawn == jax.random.normal(key, (3, 4))))
        True
    """
    shape, size = _checked_shape(shape)
    if jnp.dtype(dtype) != jnp.float32 or not _fast_path(key, size):
        return jax.random.normal(key, shape, dtype)
    return _normal(key, size).reshape(shape)


@functools.partial(jax.jit, static_argnums=1)
def _normal(key: PRNGKeyArray, size: int) -> Array:
    mantissa = (_bits(key, size) >> np.uint32(9)) | np.uint32(0x3F800000)  # a float in [1, 2)
    unit = lax.bitcast_convert_type(mantissa, np.float32) - np.float32(1.0)
    low = np.nextafter(np.float32(-1.0), np.float32(0.0))
    uniform = lax.max(low, unit * (np.float32(1.0) - low) + low)
    return np.float32(np.sqrt(2.0)) * lax.erf_inv(uniform)


def rademacher(
    key: PRNGKeyArray, shape: Sequence[int] = (), dtype: jnp.dtype = jnp.float32
) -> Float[Array, ...]:
    """Random signs ±1 of ``shape``, bit for bit ``jax.random.rademacher(key, shape, dtype)``.

    ``jax.random.rademacher`` is ``2·[u < 1/2] − 1`` with ``u`` the float32 uniform of
    ``jax.random.uniform``, whose bits are the top 23 of each random word: ``u < 1/2`` exactly when
    the word's top bit is 0. Here that bit comes from the unrolled hash of :func:`normal`, so the
    Rademacher probes of the Γ correction cost one fused pass instead of JAX's rolled loop (with
    64-bit mode on, ``jax.random`` draws 64-bit words, and this falls back to it).

    Args:
        key: a PRNG key (typed or raw ``uint32[2]``).
        shape: shape of the draw.
        dtype: dtype of the draw.

    Returns:
        An array of ``shape`` and ``dtype`` of independent random signs.

    Raises:
        ValueError: for a negative dimension.

    Example:
        >>> import jax, jax.numpy as jnp, sgrld
        >>> signs = sgrld.numerics.noise.rademacher(jax.random.key(0), (3, 4))
        >>> bool(jnp.all(signs == jax.random.rademacher(jax.random.key(0), (3, 4))))
        True
    """
    shape, size = _checked_shape(shape)
    if bool(jax.config.jax_enable_x64) or not _fast_path(key, size):
        return jax.random.rademacher(key, shape, dtype)
    negative = (_bits(key, size) >> np.uint32(31)).astype(bool)
    return jnp.where(negative, -1, 1).astype(dtype).reshape(shape)


def normal_like(key: PRNGKeyArray, tree: PyTree[Array]) -> PyTree[Array]:
    """One standard normal per entry of ``tree``, each leaf drawn with its own subkey of ``key``.

    Args:
        key: a PRNG key, split into one subkey per leaf.
        tree: a pytree of floating arrays; the draw has its structure, shapes and dtypes.

    Returns:
        A pytree like ``tree`` of independent N(0, 1) numbers.

    Example:
        >>> import jax, jax.numpy as jnp, sgrld
        >>> tree = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}
        >>> xi = sgrld.numerics.noise.normal_like(jax.random.key(0), tree)
        >>> jax.tree.map(jnp.shape, xi)
        {'b': (3,), 'w': (2, 3)}
    """
    leaves, treedef = jax.tree.flatten(tree)
    specs = tuple((tuple(jnp.shape(x)), jnp.dtype(x.dtype)) for x in leaves)
    if not specs:
        return treedef.unflatten([])
    draw = functools.partial(_draw, specs=specs)
    # Kept in memory on CPU only, where it was measured; other backends fuse the draw as before.
    return treedef.unflatten(list(lax.platform_dependent(key, cpu=_stored(draw), default=draw)))


@functools.partial(jax.jit, static_argnames="specs")
def _draw(key: PRNGKeyArray, specs: tuple[tuple[tuple[int, ...], jnp.dtype], ...]) -> list[Array]:
    """One draw of :func:`normal` per ``(shape, dtype)`` of ``specs``, each with its own subkey."""
    keys = jax.random.split(key, len(specs))
    return [normal(k, shape, dtype) for k, (shape, dtype) in zip(keys, specs, strict=True)]


def _stored(draw: Callable[[PRNGKeyArray], list[Array]]) -> Callable[[PRNGKeyArray], list[Array]]:
    """``draw``, with its result written to memory once instead of recomputed inside each reader.

    The result of a conditional is a buffer that XLA cannot fuse into its readers, so the draw runs
    as both branches of a ``lax.cond``: the predicate (any run-time value) only picks between two
    identical draws. Under ``vmap`` a batched predicate would turn the conditional into a select
    that runs both branches, so the batching rule draws the whole batch under one unbatched
    predicate instead (recursively, for nested ``vmap``).
    """

    @jax.custom_batching.custom_vmap
    def stored(key: PRNGKeyArray) -> list[Array]:
        either = jax.random.key_data(key).ravel()[0] != 0
        return lax.cond(either, draw, draw, key)

    @stored.def_vmap
    def _batched(axis_size: int, in_batched: list[bool], key: PRNGKeyArray):
        out = _stored(jax.vmap(draw))(key)
        return out, [True] * len(out)

    return stored
