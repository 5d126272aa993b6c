"""Branches that stay branches over ``jax.vmap``-ped chains: :func:`any_chain`, one predicate for
all chains, and :func:`branch_over_chains`, a ``lax.cond`` that runs its rare branch only when
some chain takes it (a metric's periodic refresh, the switch at ``adapt_until``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp


@jax.custom_batching.custom_vmap
def any_chain(pred: jax.Array) -> jax.Array:
    """``pred`` itself; under ``jax.vmap``, ``any`` over the mapped axis, not mapped.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> jax.vmap(any_chain)(jnp.array([False, True])).tolist()  # one predicate for all chains
      [True, True]
    """
    return pred


@any_chain.def_vmap
def _any_chain_vmap(axis_size, in_batched, pred):
    del axis_size
    (batched,) = in_batched
    # any_chain again: under nested vmaps (rates × chains) the reduced predicate is still mapped
    # over the outer axes, and each level reduces its own
    return (any_chain(jnp.any(pred)) if batched else pred), False


def branch_over_chains(pred: jax.Array, true_fn: Callable, false_fn: Callable, *operands: Any):
    """``jax.lax.cond(pred, true_fn, false_fn, *operands)`` that stays a branch over vmapped chains.

    Under ``jax.vmap`` a ``lax.cond`` with a mapped predicate becomes a ``select`` that runs both
    branches for every chain at every call: a metric's periodic refresh (Shampoo's
    eigendecompositions) at every step, the adapting and the frozen step of ``adapt_until`` at
    every step. Here the outer branch is taken only when some chain's ``pred`` holds; inside it,
    each chain gets the result of its own ``pred``. Exact for every chain; over chains stepped
    together (equal counters) the rare branch costs one ``true_fn`` for all, the common one one
    ``false_fn``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> f = lambda p, x: branch_over_chains(p, lambda x: x + 1.0, lambda x: x, x)
      >>> jax.vmap(f)(jnp.array([False, True]), jnp.zeros(2)).tolist()
      [0.0, 1.0]
    """

    def per_chain(*ops):
        return jax.lax.cond(pred, true_fn, false_fn, *ops)

    return jax.lax.cond(any_chain(pred), per_chain, false_fn, *operands)
