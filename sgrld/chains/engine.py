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
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.chains import devices
from sgrld.chains.chunks import Carry, Chunk, chunk_fn, count_kept

# the keep rule and the sources, also here, where the engine's users import them
from sgrld.chains.chunks import is_kept as is_kept
from sgrld.chains.chunks import num_kept as num_kept
from sgrld.chains.devices import single_threaded_blas
from sgrld.chains.progress import progress_bar
from sgrld.chains.sources import Source
from sgrld.chains.sources import epochs as epochs
from sgrld.chains.sources import random_batches as random_batches
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.contract import Sampler


def chain_keys(key: jax.Array, num_chains: int) -> jax.Array:
    """The key of each chain: ``jax.random.split(key, num_chains)``."""
    return jax.random.split(key, num_chains)


def _signature(*trees: Any) -> tuple:
    """What a compiled program is specific to: the trees' structure and each leaf's shape and
    dtype. Not weak types or placements: a chunk's carry comes back from the program with other
    ones than it went in with, and keyed by them a sweep compiled its chunk twice
    (``tests/run/test_sweep.py``); :meth:`Engine.place` puts every call's arguments alike."""
    leaves, treedef = jax.tree.flatten(trees)
    return treedef, tuple((jnp.shape(x), jnp.result_type(x)) for x in leaves)


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
        self._compiled: dict[tuple, Any] = {}

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
        for the carry and keys as :meth:`place` puts them. The cache is keyed by the chunk's
        sizes and the arguments' types (tree, shapes, dtypes, shardings), so an engine used again
        on other shapes compiles again rather than calling a program made for others."""
        carry, keys = self.place(carry, keys)
        key = (num_steps, slots, freeze, _signature(carry, keys, data))
        if key not in self._compiled:
            rule = (self.burn_in, self.thin, self.keep)
            fn = chunk_fn(self.sampler, self.source, rule, *key[:3], devices.constrain(self.mesh))
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
