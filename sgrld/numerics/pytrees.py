"""The one type alias of a pytree, :data:`PyTree`: any nesting of tuples, lists, dicts and
registered nodes with arrays at its leaves (JAX's pytrees); and the inner product over a pytree's
leaves, :func:`tree_vdot`, accumulated in at least float32 (:func:`accumulator`).

Example:
  >>> import jax.numpy as jnp
  >>> a = {"w": jnp.ones(3), "b": jnp.float32(2.0)}
  >>> float(tree_vdot(a, a))
  7.0
"""

from typing import Any

import jax
import jax.numpy as jnp

PyTree = Any


def accumulator(x: jax.Array) -> jnp.dtype:
    """The dtype sums over a leaf are accumulated in: the leaf's, at least float32."""
    return jnp.promote_types(x.dtype, jnp.float32)


def tree_vdot(a: PyTree, b: PyTree) -> jax.Array:
    """Global inner product ⟨a, b⟩ over all leaves, accumulated in at least float32."""
    parts = [
        jnp.vdot(x.astype(accumulator(x)), y.astype(accumulator(y)))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    ]
    return sum(parts[1:], parts[0]) if parts else jnp.zeros(())
