"""The chain engine: the one place where sampler steps run.

Every run of chains (:func:`sgrld.sample`, the experiment runner, the reproductions) goes through
:class:`Engine`. It owns

* **keys**, one scheme: chain ``c`` has the key ``split(key, K)[c]`` (:func:`chain_keys`); its step
  ``t`` (the global step, from the sampler state's counter) uses
  ``sampler_key, data_key = split(fold_in(chain_key, t))``, so results do not depend on how a run
  is cut into chunks, and a run resumed at step ``t`` continues the same random stream;
* **data**, through a :class:`Source`: i.i.d. minibatches from ``batch_fn(data_key)``
  (:func:`random_batches`), or epochs of shuffled minibatches (:func:`epochs`; the permutation of
  epoch ``e`` is drawn with the data key of its first step);
* **scan and vmap**: a chunk of ``n`` steps is one jitted function of loops over steps of the
  ``jax.vmap``-ed step of all chains (every leaf of the :class:`Carry` has a leading chain axis,
  the axis a device mesh would shard; the carry is what a checkpoint would store);
* **blocks**: with ``thin > 1`` a chunk runs in blocks that end at the steps of the thinning grid
  (``(s − burn_in + 1) % thin == 0``, burn-in included) and at the chunk's last step. All steps of
  a block but its last run bare, in a loop whose body is the step and nothing else (its ``info``
  unused, so XLA drops it); the block's last step is the only one whose ``info`` is read:
  checked for NaN/inf, kept if it is a kept step, summarised. With ``thin == 1`` every step is
  such a step;
* **burn-in and thinning** (:func:`is_kept`): step ``s`` is kept when ``s >= burn_in`` and
  ``(s − burn_in + 1) % thin == 0``; a kept state is copied into the chunk's buffer under a
  ``jax.lax.cond`` on the (chain-independent) step; an optional ``keep`` predicate of the step
  narrows this rule (a cyclical schedule's sampling phase,
  :attr:`sgrld.numerics.schedules.Cyclical.keep`; :func:`count_kept`);
* **divergence**: a chain whose step is not finite is marked at that step and keeps no samples
  after it. NaN/inf propagate through θ, so a block's last step finds a divergence inside the
  block (a gradient overflow that leaves θ finite is seen only at a block's last step); a chunk
  in which a chain diverged runs again from the same carry step by step (``freeze``: every step
  checked, a chain that is not finite keeps its last finite state), marking the exact step and
  leaf, as does every later chunk;
* **diagnostics**: each field of the sampler's ``info`` is summarised per chunk over the finite
  *summarised steps* (the blocks' last steps; every step with ``thin == 1`` or in a re-run) of
  live chains (:func:`sgrld.chains.summaries.summarise`);
* **progress**: one rich progress bar over steps, with an ETA;
* a **callback** after each chunk, ``callback(index, carry, chunk, seconds) -> stop``, which the
  runner uses to score the chunk's samples and write its records.

The chunk function is pure, ``(carry, start, chain_keys, data) -> (carry, chunk)``, with the
chain axis leading in every argument and result, and a checkpoint is the :class:`Carry` plus the
global step (the keys of every later step follow from it). Given a device **mesh**
(:func:`sgrld.chains.devices.make_mesh`), the chunk is compiled with the carry and the chain keys
sharded over the mesh's ``chains`` axis and each step's minibatches constrained to
``P("chains", "data")`` (:mod:`sgrld.chains.devices`); the step itself is unchanged, so each chain
draws its noise from its own key whatever the mesh. Without a mesh, nothing is placed or
constrained.

Example:
  >>> import jax, sgrld
  >>> t = sgrld.samples.targets.standard_normal()
  >>> s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
  >>> engine = Engine(s, random_batches(t.batch_fn), burn_in=10, thin=5)
  >>> carry = engine.init(s.init(t.init_params), num_chains=3)
  >>> keys = chain_keys(jax.random.key(0), 3)
  >>> carry, chunk, _ = engine.run_chunk(carry, keys, None, start=0, num_steps=30)
  >>> chunk.steps.tolist()[:4], chunk.params.shape
  ([14, 19, 24, 29], (4, 3))
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.chains import devices
from sgrld.chains.devices import single_threaded_blas
from sgrld.chains.progress import progress_bar
from sgrld.chains.summaries import summary_final, summary_init, summary_update
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.contract import Sampler


class Source(NamedTuple):
    """Where a chain's minibatches come from.

    Attributes:
      prepare: ``(data, key, start, n) -> xs``: one chain's per-step inputs of a chunk of ``n``
        steps from global step ``start`` (an array with a leading axis ``n``); ``key`` is the data
        key of the chunk's first step.
      batch: ``(data, x, data_key) -> batch``: the minibatch of one step from its input and key.
    """

    prepare: Callable[[PyTree, jax.Array, jax.Array, int], jax.Array]
    batch: Callable[[PyTree, jax.Array, jax.Array], PyTree]


def _no_inputs(data: PyTree, key: jax.Array, start: int, n: int) -> jax.Array:
    """A :attr:`Source.prepare` for a source whose steps need no per-step input."""
    return jnp.zeros((n, 0), jnp.int32)


def random_batches(batch_fn: Callable[[jax.Array], PyTree]) -> Source:
    """Each step's batch is ``batch_fn(data_key)`` (``data`` unused: ``batch_fn`` holds it)."""
    return Source(_no_inputs, lambda data, x, key: batch_fn(key))


def epochs(num_examples: int, batch_size: int) -> Source:
    """Epochs of shuffled minibatches of ``data`` (a pytree with a leading example axis).

    A chunk must be one epoch of ``num_examples // batch_size`` steps; each chain walks its own
    permutation of the examples, drawn with the data key of the epoch's first step, in minibatches
    of ``batch_size``, and the last incomplete minibatch is dropped, so every step's potential is
    an unbiased estimate of ``U/N`` with the same variance.

    Full batch (``batch_size == num_examples``): every step sees all of ``data`` in its own order,
    shared by the chains. No permutation is drawn, as the order of a full batch changes only the
    sum's rounding; drawing one for each chain at each step made a step of 16 and 256 chains of a
    15-parameter logistic regression 4.7× and 6.7× slower (RESULTS §30).
    """
    if batch_size == num_examples:
        return Source(_no_inputs, lambda data, x, key: data)
    steps = num_examples // batch_size

    def prepare(data, key, start, n):
        order = jax.random.permutation(key, num_examples)[: steps * batch_size]
        return order.reshape(steps, batch_size)

    return Source(prepare, lambda data, idx, key: jax.tree.map(lambda a: a[idx], data))


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


def chain_keys(key: jax.Array, num_chains: int) -> jax.Array:
    """The key of each chain: ``jax.random.split(key, num_chains)``."""
    return jax.random.split(key, num_chains)


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


def _chunk_fn(
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


class Engine:
    """Runs a sampler's chains in chunks (see the module docstring).

    Args:
      sampler: a :class:`~sgrld.Sampler` whose ``info`` has ``is_finite`` and ``nonfinite_leaf``.
      source: where the minibatches come from (:func:`random_batches`, :func:`epochs`).
      burn_in: global steps before the first kept one (:func:`is_kept`).
      thin: a sample every ``thin`` steps.
      keep: an optional predicate ``step -> bool`` (jnp operations on the int32 global step,
        independent of the chain) that a kept step must also pass, e.g. the sampling phase of
        :func:`sgrld.numerics.schedules.cyclical`; ``None`` keeps the burn-in and thinning rule
        alone.
      mesh: a device mesh (:func:`sgrld.chains.devices.make_mesh`) to shard the chains over its
        ``chains`` axis and each minibatch over its ``data`` axis; ``None``: one device. In a
        multi-process run every result is gathered onto every process (one all-gather of the
        carry and the chunk's samples per chunk), so each process can read it.

    Attributes:
      compile_s: seconds spent compiling chunk functions.
      device_bytes: the device memory one device needs for the largest compiled chunk
        (:func:`sgrld.chains.devices.compiled_bytes`), ``None`` before a compile or where the
        backend does not report it.
    """

    def __init__(
        self,
        sampler: Sampler,
        source: Source,
        *,
        burn_in: int = 0,
        thin: int = 1,
        keep: Callable[[Any], Any] | None = None,
        mesh: jax.sharding.Mesh | None = None,
    ):
        for name, value, low in (("burn_in", burn_in, 0), ("thin", thin, 1)):
            if isinstance(value, bool) or int(value) != value or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        self.sampler, self.source = sampler, source
        if keep is not None and not callable(keep):
            raise TypeError(f"keep must be None or a callable step -> bool, got {keep!r}")
        self.burn_in, self.thin, self.keep = int(burn_in), int(thin), keep
        self.mesh, self.compile_s, self.device_bytes = mesh, 0.0, None
        self._compiled: dict[tuple[int, int, bool], Any] = {}

    def init(self, state: Any, num_chains: int | None = None) -> Carry:
        """The carry of chains starting at ``state`` (broadcast to ``num_chains`` if given;
        otherwise ``state`` already has a leading chain axis)."""
        if num_chains is not None:
            state = jax.tree.map(lambda x: jnp.broadcast_to(x, (num_chains, *jnp.shape(x))), state)
        k = jax.tree.leaves(state)[0].shape[0]
        minus = jnp.full((k,), -1, jnp.int32)
        return Carry(state, minus, minus)

    def place(self, carry: Carry, keys: jax.Array) -> tuple[Carry, jax.Array]:
        """The carry and the chain keys on the mesh, sharded over its chains (as they are
        without a mesh)."""
        if self.mesh is None:
            return carry, keys
        devices.check_mesh(self.mesh, keys.shape[0])
        chains = devices.chain_sharding(self.mesh)
        return devices.place(carry, chains), devices.place(keys, chains)

    def _start(self, start: int) -> jax.Array:
        step = jnp.int32(start)
        return step if self.mesh is None else devices.place(step, devices.replicated(self.mesh))

    def _jit(self, fn: Callable) -> Any:
        if self.mesh is None:
            return jax.jit(fn)
        rep = devices.replicated(self.mesh)
        if devices.multi_process():
            return jax.jit(fn, out_shardings=rep)
        by_chain = devices.chain_sharding(self.mesh, axis=1)
        chunk = Chunk(by_chain, by_chain, rep, by_chain, rep)
        return jax.jit(fn, out_shardings=(devices.chain_sharding(self.mesh), chunk))

    def slots(self, num_steps: int, start: int | None = None) -> int:
        """Buffer slots of a chunk: exact from a known ``start``, else the bound for any start."""
        if start is not None:
            return max(1, count_kept(start, start + num_steps, self.burn_in, self.thin, self.keep))
        return min(num_steps, math.ceil(num_steps / self.thin) + 1)

    def compile(
        self,
        carry: Carry,
        keys: jax.Array,
        data: PyTree,
        *,
        num_steps: int,
        slots: int,
        freeze: bool = False,
    ) -> Any:
        """The compiled chunk function for ``num_steps`` steps (cached; time in ``compile_s``),
        for the carry and keys as :meth:`place` puts them."""
        key = (num_steps, slots, freeze)
        if key not in self._compiled:
            rule = (self.burn_in, self.thin, self.keep)
            fn = _chunk_fn(self.sampler, self.source, rule, *key, devices.constrain(self.mesh))
            carry, keys = self.place(carry, keys)
            tic = time.perf_counter()
            compiled = self._jit(fn).lower(carry, self._start(0), keys, data).compile()
            self.compile_s += time.perf_counter() - tic
            self._compiled[key] = compiled
            need = devices.compiled_bytes(compiled)
            if need is not None:
                self.device_bytes = max(need, self.device_bytes or 0)
        return self._compiled[key]

    def run_chunk(
        self,
        carry: Carry,
        keys: jax.Array,
        data: PyTree,
        *,
        start: int,
        num_steps: int,
        exact_slots: bool = True,
    ) -> tuple[Carry, Chunk, float]:
        """Run ``num_steps`` steps from global step ``start``.

        Returns ``(carry, chunk, seconds)``; ``seconds`` is the wall time of the chunk's first
        pass (a re-run after a divergence is not counted).
        """
        slots = self.slots(num_steps, start if exact_slots else None)
        frozen = bool(np.any(np.asarray(carry.diverged_step) >= 0))
        carry, keys = self.place(carry, keys)
        args = (carry, self._start(start), keys, data)
        fn = self.compile(carry, keys, data, num_steps=num_steps, slots=slots, freeze=frozen)
        tic = time.perf_counter()
        new, chunk = jax.block_until_ready(fn(*args))
        seconds = time.perf_counter() - tic
        if not frozen and np.any(np.asarray(new.diverged_step) >= 0):
            fn = self.compile(carry, keys, data, num_steps=num_steps, slots=slots, freeze=True)
            new, chunk = jax.block_until_ready(fn(*args))
        return new, chunk, seconds

    def run(
        self,
        carry: Carry,
        keys: jax.Array,
        data: PyTree,
        chunks: Sequence[int],
        *,
        start: int = 0,
        callback: Callable[[int, Carry, Chunk, float], bool] | None = None,
        progress: bool = False,
        label: str = "sampling",
        unit: str = "chunk",
        exact_slots: bool = True,
    ) -> Carry:
        """Run chunks of ``chunks[i]`` steps one after another from global step ``start``.

        After each chunk ``callback(i, carry, chunk, seconds)`` runs; a true result stops the run.
        Returns the final carry. A ``KeyboardInterrupt`` propagates (between or inside chunks).
        """
        bar = progress_bar(sum(chunks), len(chunks), progress, label, unit)
        with single_threaded_blas(), bar as (bar, task):
            for i, n in enumerate(chunks):
                carry, chunk, seconds = self.run_chunk(
                    carry, keys, data, start=start, num_steps=n, exact_slots=exact_slots
                )
                start += n
                bar.update(task, advance=n, chunk=i + 1)
                if callback is not None and callback(i, carry, chunk, seconds):
                    break
        return carry
