"""Run many SGRLD steps inside ``jax.lax.scan`` (and many chains with ``vmap``), keeping thinned
samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sgrld.sampler import Sampler

PyTree = Any


class Samples(NamedTuple):
    """What :func:`sample` returns.

    Attributes:
      params: thinned samples, leaves ``[num_samples, ...]`` (``[num_chains, num_samples, ...]``
        with chains).
      info: the step diagnostics of the kept steps, stacked the same way.
      state: the final sampler state (per chain), to continue sampling.
      diverged_at: int32 step at which each chain produced a NaN/inf, −1 if it did not.
    """

    params: PyTree
    info: Any
    state: Any
    diverged_at: jax.Array


class DivergenceError(FloatingPointError):
    """A chain produced a NaN or inf. ``.samples`` holds every sample taken before it diverged."""

    def __init__(self, message: str, samples: Samples):
        super().__init__(message)
        self.samples = samples


def minibatch_fn(data: PyTree, batch_size: int) -> Callable[[jax.Array], PyTree]:
    """``key -> batch``: ``batch_size`` rows drawn uniformly (with replacement) from ``data``.

    Every leaf of ``data`` must share its leading dimension N. Drawing with replacement keeps each
    minibatch potential an unbiased estimate of ``U/N``; for epochs of shuffled minibatches use the
    experiment runner.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> fn = minibatch_fn((jnp.arange(10.0), jnp.arange(10)), 4)
      >>> [x.shape for x in fn(jax.random.key(0))]
      [(4,), (4,)]
    """
    sizes = {jnp.shape(x)[0] for x in jax.tree.leaves(data)}
    if len(sizes) != 1:
        raise ValueError(
            f"every array of data needs the same leading dimension, got {sorted(sizes)}"
        )
    (n,) = sizes
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must lie in [1, {n}], got {batch_size}")

    def fn(key):
        idx = jax.random.randint(key, (batch_size,), 0, n)
        return jax.tree.map(lambda x: x[idx], data)

    return fn


def _leaf_name(tree: PyTree, index: int) -> str:
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
    if not 0 <= index < len(paths):
        return "?"
    return paths[index] or "(root)"


def sample(
    key: jax.Array,
    sampler: Sampler,
    params: PyTree,
    batch_fn: Callable[[jax.Array], PyTree],
    *,
    num_samples: int,
    thin: int = 1,
    burn_in: int = 0,
    num_chains: int | None = None,
    state: Any = None,
    progress: bool = False,
    num_chunks: int | None = None,
) -> Samples:
    """Draw thinned samples: ``burn_in`` steps, then ``num_samples × thin`` steps keeping every
    ``thin``-th.

    Steps run inside ``jax.lax.scan`` and chains inside ``jax.vmap``. Step ``t`` of chain ``c``
    uses the key ``fold_in(chain_key_c, t)``, so results do not depend on the chunking. Work is
    split into ``num_chunks`` jitted calls (default: one, or 20 with ``progress``), between which a
    progress bar advances. A chain that produces a NaN/inf stops at its last finite state; after
    the run a :class:`DivergenceError` names the chain, step and parameter leaf and carries the
    samples taken so far.

    Args:
      key: PRNG key.
      sampler: a :class:`~sgrld.Sampler` (``init`` and ``step``).
      params: starting parameters (one pytree, shared by all chains), ignored if ``state`` is given.
      batch_fn: ``key -> batch`` for each step (a target's ``batch_fn``, or :func:`minibatch_fn`).
      num_samples: number of samples to keep per chain.
      thin: steps per kept sample.
      burn_in: steps before the first kept step.
      num_chains: run this many chains with ``vmap`` (``None``: one chain, no chain axis).
      state: a sampler state to continue from (with a leading chain axis if ``num_chains``).
      progress: show a progress bar with an ETA.
      num_chunks: number of jitted calls the run is split into.

    Returns:
      :class:`Samples`.

    Example:
      >>> import jax, sgrld
      >>> t = sgrld.targets.standard_normal()
      >>> s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
      >>> out = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn,
      ...                    num_samples=100, thin=10, num_chains=4)
      >>> out.params.shape
      (4, 100)
    """
    for name, value, low in (
        ("num_samples", num_samples, 1),
        ("thin", thin, 1),
        ("burn_in", burn_in, 0),
    ):
        if int(value) != value or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    chains = 1 if num_chains is None else int(num_chains)
    if chains < 1:
        raise ValueError(f"num_chains must be None or >= 1, got {num_chains}")
    if state is None:
        state = sampler.init(params)
        if num_chains is not None:
            state = jax.tree.map(lambda x: jnp.broadcast_to(x, (chains, *jnp.shape(x))), state)
    chain_keys = jax.random.split(key, chains)

    def one_step(chain_key, carry, t, freeze):
        # freeze: keep a diverged chain's last finite state (a select over the state at every
        # step, ~8% of an MLP step on a CPU; only chunks in or after a divergence pay it).
        state, diverged_at = carry
        step_key, batch_key = jax.random.split(jax.random.fold_in(chain_key, t))
        new_state, info = sampler.step(step_key, state, batch_fn(batch_key))
        diverged_at = jnp.where((diverged_at < 0) & ~info.is_finite, t, diverged_at)
        if freeze:
            ok = (diverged_at < 0) & info.is_finite
            new_state = jax.tree.map(lambda n, o: jnp.where(ok, n, o), new_state, state)
        return (new_state, diverged_at), info

    def run_chain(chain_key, state, diverged_at, start, n_kept, n_burn, freeze):
        def burn(carry, t):
            return one_step(chain_key, carry, t, freeze)[0], None

        carry = (state, diverged_at)
        carry, _ = jax.lax.scan(burn, carry, start + jnp.arange(n_burn))

        def keep(carry, j):
            t0 = start + n_burn + j * thin
            carry, infos = jax.lax.scan(
                lambda c, t: one_step(chain_key, c, t, freeze), carry, t0 + jnp.arange(thin)
            )
            last_info = jax.tree.map(lambda x: x[-1], infos)
            return carry, (carry[0].params, last_info)

        carry, (kept, infos) = jax.lax.scan(keep, carry, jnp.arange(n_kept))
        return carry[0], carry[1], kept, infos

    runner = (
        jax.vmap(run_chain, in_axes=(0, 0, 0, None, None, None, None))
        if num_chains is not None
        else run_chain
    )
    compiled = jax.jit(runner, static_argnums=(4, 5, 6))

    chunks = num_chunks or (20 if progress else 1)
    chunks = max(1, min(int(chunks), num_samples))
    per_chunk = math.ceil(num_samples / chunks)
    diverged = (
        jnp.full((chains,), -1, jnp.int32) if num_chains is not None else jnp.asarray(-1, jnp.int32)
    )
    keys = chain_keys if num_chains is not None else chain_keys[0]
    start = state.step if num_chains is None else state.step[0]
    start = jnp.asarray(start, jnp.int32)
    kept_parts, info_parts = [], []
    done = 0
    bar = Progress(
        TextColumn("sampling"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} samples"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        disable=not progress,
        transient=False,
    )
    with bar:
        task = bar.add_task("sampling", total=num_samples)
        while done < num_samples:
            n = min(per_chunk, num_samples - done)
            n_burn = burn_in if done == 0 else 0
            offset = start + (0 if done == 0 else burn_in) + done * thin
            before = (state, diverged)
            frozen = bool(jnp.any(diverged >= 0))
            state, diverged, kept, infos = compiled(keys, *before, offset, n, n_burn, frozen)
            if not frozen and bool(jnp.any(diverged >= 0)):  # again, keeping last finite states
                state, diverged, kept, infos = compiled(keys, *before, offset, n, n_burn, True)
            kept_parts.append(kept)
            info_parts.append(infos)
            done += n
            bar.update(task, completed=done)
            if bool(jnp.all(diverged >= 0)):
                break
    axis = 1 if num_chains is not None else 0
    cat = lambda *xs: jnp.concatenate(xs, axis=axis)
    out = Samples(jax.tree.map(cat, *kept_parts), jax.tree.map(cat, *info_parts), state, diverged)
    if bool(jnp.any(diverged >= 0)):
        bad = jnp.atleast_1d(diverged)
        chain = int(jnp.argmax(bad >= 0))
        step = int(bad[chain])
        leaf_index = jnp.atleast_2d(out.info.nonfinite_leaf)[chain]
        leaf = _leaf_name(params if params is not None else state.params, int(jnp.max(leaf_index)))
        n_ok = max(0, (step - burn_in) // thin)
        raise DivergenceError(
            f"chain {chain} produced a NaN/inf at step {step} (in parameter {leaf}); "
            f"{int(jnp.sum(bad >= 0))} of {bad.size} chains diverged. Its {n_ok} sample(s) taken "
            "before that are in this error's .samples "
            "(later entries repeat the last finite state). "
            "Try a smaller learning_rate, a larger eps for an adaptive metric, or max_drift_norm.",
            out,
        )
    return out
