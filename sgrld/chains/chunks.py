"""The engine's pure chunk function (:func:`chunk_fn`): ``n`` steps of every chain, in loops over
the ``jax.vmap``-ed step, each block's last step marked (divergence), kept (burn-in, thinning,
``keep``: :func:`is_kept`) and summarised; and what it carries and returns (:class:`Carry`,
:class:`Chunk`). :mod:`sgrld.chains.engine` describes the scheme and drives it.

Example:
  >>> [s for s in range(20) if is_kept(s, burn_in=3, thin=5)], num_kept(0, 20, 3, 5)
  ([7, 12, 17], 3)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.chains.sources import Source
from sgrld.chains.summaries import summary_final, summary_init, summary_update
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.contract import Sampler


class Carry(NamedTuple):
    """What the engine carries between chunks, every leaf with a leading chain axis.

    Attributes:
      state: the sampler states.
      diverged_step: the global step at which each chain produced a NaN/inf, or −1.
      diverged_leaf: index (``jax.tree.leaves`` order) of its first non-finite leaf, or −1.
    """

    state: Any
    diverged_step: jax.Array
    diverged_leaf: jax.Array


class Chunk(NamedTuple):
    """What a chunk returns besides the carry.

    Attributes:
      params: the kept samples, leaves ``[slots, K, ...]``.
      info: the step diagnostics of the kept steps, ``[slots, K]``.
      steps: the global step of each slot, −1 for an unused slot.
      valid: ``[slots, K]``, False for a chain that had diverged (not a sample).
      summary: :func:`sgrld.chains.summaries.summarise` of the chunk's summarised steps.
    """

    params: PyTree
    info: Any
    steps: jax.Array
    valid: jax.Array
    summary: dict[str, jax.Array]


def is_kept(step: Any, burn_in: int, thin: int) -> Any:
    """Whether global step ``step`` (0-based) is kept: ``step >= burn_in`` and
    ``(step − burn_in + 1) % thin == 0`` (the state after ``burn_in + j·thin`` steps, j ≥ 1).

    Example:
      >>> [s for s in range(20) if is_kept(s, burn_in=3, thin=5)]
      [7, 12, 17]
    """
    return (step >= burn_in) & ((step - burn_in + 1) % thin == 0)


def num_kept(start: int, stop: int, burn_in: int, thin: int) -> int:
    """How many steps in ``[start, stop)`` are kept (:func:`is_kept`)."""
    first = max(start, burn_in)
    before = lambda s: max(0, (s - burn_in) // thin)  # kept steps in [burn_in, s)
    return before(stop) - before(first) if stop > first else 0


def count_kept(start: int, stop: int, burn_in: int, thin: int, keep: Callable | None) -> int:
    """How many steps in ``[start, stop)`` pass :func:`is_kept` and ``keep(step)`` (``None``: no
    extra condition, :func:`num_kept`).

    Example:
      >>> count_kept(0, 20, burn_in=3, thin=5, keep=lambda s: s > 10)
      2
    """
    if keep is None:
        return num_kept(start, stop, burn_in, thin)
    if stop <= start:
        return 0
    steps = np.arange(start, stop, dtype=np.int32)
    mask = np.asarray(is_kept(steps, burn_in, thin)) & np.asarray(keep(jnp.asarray(steps)))
    return int(mask.sum())


def _select(mask: jax.Array, new: PyTree, old: PyTree) -> PyTree:
    """Per chain: ``new`` where ``mask`` (shape [K]) is True, else ``old``."""
    return jax.tree.map(
        lambda n, o: jnp.where(mask.reshape(mask.shape + (1,) * (n.ndim - 1)), n, o), new, old
    )


def _empty_buffer(slots: int, params: PyTree, info: Any) -> tuple:
    """``(params, info, steps, valid)`` buffers of ``slots`` samples of K chains, unused."""
    zeros = lambda x: jnp.zeros((slots, *x.shape), x.dtype)
    k = jax.tree.leaves(params)[0].shape[0]
    return (
        jax.tree.map(zeros, params),
        jax.tree.map(zeros, info),
        jnp.full((slots,), -1, jnp.int32),
        jnp.zeros((slots, k), bool),
    )


def _step_fn(sampler: Sampler, source: Source, constrain: Callable, ctx: tuple) -> Callable:
    """``(state, s) -> (state, info)``: global step ``s`` of every chain, for the chunk's
    ``ctx = (data, chain_keys, inputs [n, K, ...], start)``; ``constrain`` places the
    minibatches."""
    data, keys, xs, start = ctx
    step_chains = jax.vmap(sampler.step)

    def advance(state, s):
        k = jax.vmap(lambda c: jax.random.split(jax.random.fold_in(c, s)))(keys)
        batch = constrain(jax.vmap(source.batch, (None, 0, 0))(data, xs[s - start], k[:, 1]))
        return step_chains(k[:, 0], state, batch)

    return advance


def _finish_fn(rule: tuple[int, int, Callable | None], freeze: bool) -> Callable:
    """``(loop, s, new_state, info) -> loop``: the result of step ``s`` marked (divergence),
    kept (burn-in, thinning, ``keep``) and summarised, on ``loop = (carry, buffer, slot, acc)``
    (``freeze``: a chain that is not finite keeps its last finite state)."""
    burn_in, thin, keep_fn = rule

    def put(s, carry, info, buffer, slot):
        put_at = lambda b, x: b.at[slot].set(x)
        params, infos, steps_at, valid = buffer
        return (
            jax.tree.map(put_at, params, carry.state.params),
            jax.tree.map(put_at, infos, info),
            steps_at.at[slot].set(s),
            valid.at[slot].set(carry.diverged_step < 0),
        ), slot + 1

    def finish(loop, s, new_state, info):
        carry, buffer, slot, acc = loop
        alive = carry.diverged_step < 0
        ok = alive & info.is_finite
        newly_bad = alive & ~info.is_finite
        carry = Carry(
            _select(ok, new_state, carry.state) if freeze else new_state,
            jnp.where(newly_bad, s, carry.diverged_step),
            jnp.where(newly_bad, info.nonfinite_leaf, carry.diverged_leaf),
        )
        # The predicate depends on the step only, never on a chain: a real branch under vmap.
        kept = is_kept(s, burn_in, thin)
        buffer, slot = jax.lax.cond(
            kept if keep_fn is None else kept & keep_fn(s),
            partial(put, s, carry, info),
            lambda b, i: (b, i),
            buffer,
            slot,
        )
        return carry, buffer, slot, summary_update(acc, info, ok)

    return finish


def _blocks(advance: Callable, finish: Callable, loop: tuple, start: Any, n: int, rule: tuple):
    """``loop`` after the chunk's ``n`` steps from ``start`` in blocks: each block ends at a
    step of the thinning grid (``(s − burn_in + 1) % thin == 0``, burn-in included) or at the
    chunk's last step; its steps but the last run bare (a loop whose body is the step alone), its
    last step is :func:`_finish_fn`'s. A block is ``thin`` steps but the chunk's first and last,
    and ``1 + ceil((n − 1) / thin)`` blocks cover any chunk (a last one may be empty)."""
    burn_in, thin, _ = rule
    first_end = start + (burn_in - 1 - start) % thin
    last = start + n - 1

    def block(loop, b):
        end = jnp.minimum(first_end + b * thin, last)
        begin = jnp.where(b == 0, start, first_end + (b - 1) * thin + 1)

        def steps(loop):
            carry = loop[0]
            bare = lambda s, state: advance(state, s)[0]
            state = jax.lax.fori_loop(begin, end, bare, carry.state)
            return finish((carry._replace(state=state), *loop[1:]), end, *advance(state, end))

        return jax.lax.cond(begin <= end, steps, lambda loop: loop, loop), None

    return jax.lax.scan(block, loop, jnp.arange(1 + (n + thin - 2) // thin, dtype=jnp.int32))[0]


def chunk_fn(
    sampler: Sampler,
    source: Source,
    rule: tuple[int, int, Callable | None],
    n: int,
    slots: int,
    freeze: bool,
    constrain: Callable[[PyTree], PyTree],
) -> Callable:
    """``(carry, start, chain_keys, data) -> (carry, Chunk)``: ``n`` steps of every chain, keeping
    the steps of ``rule = (burn_in, thin, keep)``; ``constrain`` places each step's minibatches.
    Without ``freeze`` and with ``thin > 1`` the steps run in blocks (:func:`_blocks`), else one
    scan over steps, each marked, kept and summarised."""
    finish = _finish_fn(rule, freeze)

    def run(carry, start, keys, data):
        first_keys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, start))[1])(keys)
        xs = jax.vmap(source.prepare, (None, 0, None, None))(data, first_keys, start, n)
        first = jax.vmap(source.batch, (None, 0, 0))(data, xs[:, 0], first_keys)
        info = jax.eval_shape(jax.vmap(sampler.step), first_keys, carry.state, first)[1]
        loop = (carry, _empty_buffer(slots, carry.state.params, info), jnp.int32(0))
        loop += (summary_init(info),)
        ctx = (data, keys, jnp.swapaxes(xs, 0, 1), start)
        advance = _step_fn(sampler, source, constrain, ctx)
        if freeze or rule[1] == 1:
            each = lambda loop, s: (finish(loop, s, *advance(loop[0].state, s)), None)
            loop = jax.lax.scan(each, loop, start + jnp.arange(n, dtype=jnp.int32))[0]
        else:
            loop = _blocks(advance, finish, loop, start, n, rule)
        carry, buffer, _, acc = loop
        return carry, Chunk(*buffer, summary_final(acc))

    return run
