"""Thinned samples from any sampler: :func:`sample`, the simple front end of the chain engine.

Steps run inside ``jax.lax.scan`` and chains inside ``jax.vmap`` (:mod:`sgrld.chains.engine`); step
``t`` of chain ``c`` uses the key ``fold_in(chain_key_c, t)``, so results do not depend on the
chunking. A run is split into ``num_chunks`` jitted calls (default: one, or 20 with ``progress``),
between which a progress bar advances. A chain that produces a NaN/inf stops at its last finite
state; after the run a :class:`DivergenceError` names the chain, step and parameter leaf and carries
the samples taken so far. With a device ``mesh`` (:func:`sgrld.chains.devices.make_mesh`) the chains
are sharded over its devices and each minibatch over its ``data`` axis, with the same samples
(:mod:`sgrld.chains.devices`).

A run's chunks are compiled once per setting: a later call with the same sampler, ``batch_fn`` and
``keep`` (the same objects, as ``jax.jit`` knows a function), the same burn-in, thinning, start and
mesh, and arguments of the same shapes compiles nothing (the last :data:`ENGINES_KEPT` settings are
kept). As under ``jax.jit``, what these functions read from outside when first traced stays in the
compiled program.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.chains.dispersion import Init, starts, warn_if_chains_disagree
from sgrld.chains.divergence import ADVICE, first_divergence, leaf_names
from sgrld.chains.engine import Chunk, Engine, chain_keys, count_kept, random_batches
from sgrld.chains.rate_grid import fit_state
from sgrld.chains.step_size import resolve_learning_rate
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.contract import Sampler
from sgrld.samplers.guarantee import (
    guarantee,
    identity_clause,
    warn_if_adapting_on_minibatches,
    warn_if_minibatch_noise_dominates,
)


class Samples(NamedTuple):
    """What :func:`sample` returns.

    Attributes:
      params: thinned samples, leaves ``[num_samples, ...]`` (``[num_chains, num_samples, ...]``
        with chains).
      info: the step diagnostics of the kept steps, stacked the same way.
      state: the final sampler state (per chain), to continue sampling.
      diverged_at: int32 step at which each chain produced a NaN/inf, −1 if it did not.
      guarantee: what the run samples, in one line (:func:`sgrld.samplers.guarantee.guarantee`
        of the sampler as it ran, the line ``sgrld run`` prints); :func:`sgrld.to_arviz` puts it
        in the attributes. Not a leaf: ``jax.tree.map`` over samples keeps it.
    """

    params: PyTree
    info: Any
    state: Any
    diverged_at: jax.Array
    guarantee: str = ""

    def __repr__(self) -> str:
        shapes = jax.tree.map(lambda x: tuple(np.shape(x)), self.params)
        return f"Samples(params={shapes}, guarantee={self.guarantee!r})"


jax.tree_util.register_pytree_node(
    Samples,
    lambda s: ((s.params, s.info, s.state, s.diverged_at), s.guarantee),
    lambda line, children: Samples(*children, line),
)


class DivergenceError(FloatingPointError):
    """A chain produced a NaN or inf. ``.samples`` holds every sample taken before it diverged."""

    def __init__(self, message: str, samples: Samples):
        super().__init__(message)
        self.samples = samples


@dataclasses.dataclass(frozen=True, eq=False)
class Minibatches:
    """``key -> batch`` (:func:`minibatch_fn`): ``batch_size`` of the ``num_examples`` rows of
    ``data``, drawn with replacement; its sizes let :func:`sample` warn about a metric that adapts
    throughout on minibatches (:func:`sgrld.samplers.guarantee.warn_if_adapting_on_minibatches`)
    and about a Fisher metric's step whose minibatch noise outweighs the Langevin noise
    (:func:`sgrld.samplers.guarantee.warn_if_minibatch_noise_dominates`).
    """

    data: PyTree
    batch_size: int
    num_examples: int

    def __call__(self, key: jax.Array) -> PyTree:
        idx = jax.random.randint(key, (self.batch_size,), 0, self.num_examples)
        return jax.tree.map(lambda x: x[idx], self.data)


def minibatch_fn(data: PyTree, batch_size: int) -> Minibatches:
    """``key -> batch``: ``batch_size`` rows drawn uniformly (with replacement) from ``data``.

    Every leaf of ``data`` must share its leading dimension N; a leaf may be a NumPy or a JAX
    array (any array ``jnp.asarray`` takes), and is held as a JAX array. Drawing with
    replacement keeps each minibatch potential an unbiased estimate of ``U/N``; for epochs of
    shuffled minibatches use the experiment runner.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> fn = minibatch_fn((jnp.arange(10.0), jnp.arange(10)), 4)
      >>> [x.shape for x in fn(jax.random.key(0))], fn.batch_size, fn.num_examples
      ([(4,), (4,)], 4, 10)
    """
    sizes = {np.shape(x)[0] for x in jax.tree.leaves(data)}
    if len(sizes) != 1:
        raise ValueError(
            f"every array of data needs the same leading dimension, got {sorted(sizes)}"
        )
    (n,) = sizes
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must lie in [1, {n}], got {batch_size}")
    return Minibatches(jax.tree.map(jnp.asarray, data), batch_size, n)


def _chunk_steps(num_samples: int, thin: int, burn_in: int, chunks: int) -> list[int]:
    """Step counts of the chunks: ``chunks`` near-equal shares of the samples, burn-in first."""
    per_chunk = math.ceil(num_samples / chunks)
    sizes = [min(per_chunk, num_samples - done) for done in range(0, num_samples, per_chunk)]
    return [n * thin + (burn_in if i == 0 else 0) for i, n in enumerate(sizes)]


def _steps_to_keep(num_samples: int, start: int, burn_in: int, thin: int, keep: Callable) -> int:
    """Steps from ``start`` until ``num_samples`` steps pass burn-in, thinning and ``keep``."""
    total = burn_in + num_samples * thin
    while count_kept(start, start + total, start + burn_in, thin, keep) < num_samples:
        if total > 2**30:
            raise ValueError(f"keep selects fewer than num_samples={num_samples} steps")
        total *= 2
    low, high = burn_in, total  # the smallest total with num_samples kept steps, by bisection
    while low < high:
        mid = (low + high) // 2
        enough = count_kept(start, start + mid, start + burn_in, thin, keep) >= num_samples
        low, high = (low, mid) if enough else (mid + 1, high)
    return low


def _collect(chunks: list[Chunk], single: bool) -> tuple[PyTree, Any]:
    """The used slots of every chunk, concatenated: leaves ``[K, S, ...]`` (``[S, ...]`` if
    ``single``)."""
    used = [np.flatnonzero(np.asarray(c.steps) >= 0) for c in chunks]
    take = lambda tree, idx: jax.tree.map(lambda x: x[idx], tree)
    cat = lambda *xs: jnp.swapaxes(jnp.concatenate(xs, axis=0), 0, 1)
    params = jax.tree.map(cat, *[take(c.params, u) for c, u in zip(chunks, used, strict=True)])
    info = jax.tree.map(cat, *[take(c.info, u) for c, u in zip(chunks, used, strict=True)])
    if single:
        params, info = jax.tree.map(lambda x: x[0], (params, info))
    return params, info


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
    init: Init = "jitter",
    state: Any = None,
    progress: bool = False,
    num_chunks: int | None = None,
    keep: Callable[[Any], Any] | None = None,
    mesh: jax.sharding.Mesh | None = None,
) -> Samples:
    """Draw thinned samples: ``burn_in`` steps, then ``num_samples × thin`` steps keeping every
    ``thin``-th, on the chain engine (see the module docstring).

    Args:
      key: PRNG key.
      sampler: a :class:`~sgrld.Sampler` (``init`` and ``step``).
      params: the starting parameters (any arrays), as ``init`` says; ignored if ``state`` is
        given.
      batch_fn: ``key -> batch`` for each step (a target's ``batch_fn``, or :func:`minibatch_fn`).
      num_samples: number of samples to keep per chain.
      thin: steps per kept sample.
      burn_in: steps before the first kept step.
      num_chains: run this many chains with ``vmap`` (``None``: one chain, no chain axis, that
        starts at ``params``).
      init: how the chains start (:data:`sgrld.chains.dispersion.Init`): ``"jitter"``: each at
        ``params + σ·ξ``, ξ ~ N(0, I) per chain, σ the root mean square of each leaf of
        ``params`` (for a leaf of zeros that of all of ``params``, or 1), drawn from ``key``;
        ``"shared"``: all at ``params``; ``"stacked"``: ``params`` holds one start per chain
        (a leading axis of ``num_chains``). Dispersed starts let R-hat see a chain that stays
        apart: after the run a :class:`~sgrld.chains.dispersion.ChainsDisagreeWarning` names
        the chains if the potential's split R-hat exceeds 1.05.
      state: a sampler state to continue from (with a leading chain axis if ``num_chains``).
      progress: show a progress bar with an ETA.
      num_chunks: number of jitted calls the run is split into.
      keep: an extra predicate ``step -> bool`` on the global step that a kept step must pass
        (:class:`sgrld.chains.engine.Engine`), e.g. a cyclical schedule's sampling phase
        (:attr:`sgrld.numerics.schedules.Cyclical.keep`); the run lasts until ``num_samples`` are
        kept.
      mesh: a device mesh (:func:`sgrld.chains.devices.make_mesh`): the chains are sharded over its
        ``chains`` axis (``num_chains`` must be a multiple of its size) and each minibatch over
        its ``data`` axis; ``None``: one device. Sharding the chains alone gives the same samples
        bit for bit; a ``data`` axis changes the order of the minibatch sums (float rounding).

    Returns:
      :class:`Samples`, with the run's guarantee.

    Example:
      >>> import jax, sgrld
      >>> t = sgrld.samples.targets.standard_normal()
      >>> s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
      >>> out = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn,
      ...                    num_samples=100, thin=10, num_chains=4)
      >>> out.params.shape, out.guarantee
      ((4, 100), 'exact: constant metric (not adaptive)')
      >>> mesh = sgrld.chains.devices.make_mesh(devices="all", data_parallel=1)
      >>> same = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn,
      ...                     num_samples=100, thin=10, num_chains=4, mesh=mesh)
      >>> bool((same.params == out.params).all())
      True
    """
    chains = _check(num_samples, thin, burn_in, num_chains)
    given = sampler  # the caller's sampler, which names the compiled chunks (_engine)
    if state is None:  # each chain's start, leading axis the chains
        params = starts(key, params, chains, init if num_chains is not None else "shared")
    start = 0 if state is None else int(np.asarray(state.step).reshape(-1)[0])
    state = _chain_states(sampler, params, state, single=num_chains is None)
    run = num_samples * thin  # the steps its samples are kept over
    sampler, state, choice = resolve_learning_rate(key, sampler, state, batch_fn, burn_in, run)
    pilot = 0 if choice is None else choice.pilot_steps  # steps the search took of the burn-in
    sampler = with_burn_in(sampler, burn_in, start)
    if isinstance(batch_fn, Minibatches):  # a batch_fn of one's own does not say its sizes
        adaptation = getattr(sampler, "adaptation", None)
        warn_if_adapting_on_minibatches(adaptation, batch_fn.batch_size, batch_fn.num_examples)
        warn_if_minibatch_noise_dominates(adaptation, batch_fn.batch_size, batch_fn.num_examples)
    state = fit_state(sampler, state)
    rate = None if choice is None else choice.learning_rate
    engine = _engine((given, batch_fn, keep, mesh, start + burn_in, thin, rate), sampler)
    kept: list[Chunk] = []

    def collect(i, carry, chunk, seconds):
        kept.append(chunk)
        return bool(np.all(np.asarray(carry.diverged_step) >= 0))

    chunks = max(1, min(int(num_chunks or (20 if progress else 1)), num_samples))
    if keep is None:
        steps = _chunk_steps(num_samples, thin, burn_in - pilot, chunks)
    else:
        total = _steps_to_keep(num_samples, start + pilot, burn_in - pilot, thin, keep)
        steps = [len(part) for part in np.array_split(np.arange(total), chunks) if len(part)]
    carry = engine.run(
        engine.init(state),
        chain_keys(key, chains),
        None,
        steps,
        start=start + pilot,
        callback=collect,
        progress=progress,
    )
    out = _samples(kept, carry, sampler, single=num_chains is None, choice=choice)
    _raise_if_diverged(carry, out, start, burn_in, thin, keep)
    if num_chains is not None and "potential" in getattr(out.info, "_fields", ()):
        warn_if_chains_disagree(out.info.potential)
    return out


ENGINES_KEPT = 8
"""How many settings' engines :func:`sample` keeps, each with its compiled chunks (least recently
used first out)."""

_engines: collections.OrderedDict[tuple, tuple[tuple, Engine]] = collections.OrderedDict()


def _engine(setting: tuple, sampler: Sampler) -> Engine:
    """The engine of a run's ``setting`` ``(sampler, batch_fn, keep, mesh, burn_in, thin,
    learning_rate)``: the one made for the same setting before (its chunks compiled), else a new
    one running ``sampler``. The setting's sampler, ``batch_fn`` and ``keep`` are the caller's
    own objects, compared by identity, as ``jax.jit`` compares functions; ``sampler`` is the
    caller's resolved for the burn-in from its start (:func:`with_burn_in`) and, with
    ``learning_rate="auto"``, at the rate chosen, both in the setting. The engine's own cache
    tells the arguments' shapes apart (:meth:`Engine.compile`). The last :data:`ENGINES_KEPT`
    settings are kept, holding the objects they name."""
    named, rest = setting[:3], setting[3:]
    key = (*map(id, named), *rest)
    held = _engines.get(key)
    if held is not None and all(a is b for a, b in zip(held[0], named, strict=True)):
        _engines.move_to_end(key)
        return held[1]
    _, batch_fn, keep, mesh, burn_in, thin, _ = setting
    engine = Engine(
        sampler, random_batches(batch_fn), burn_in=burn_in, thin=thin, keep=keep, mesh=mesh
    )
    _engines[key] = (named, engine)
    while len(_engines) > ENGINES_KEPT:
        _engines.popitem(last=False)
    return engine


def _samples(
    kept: list[Chunk], carry: Any, sampler: Sampler, single: bool, choice: Any = None
) -> Samples:
    """The :class:`Samples` of a run's chunks and final carry (no chain axis if ``single``);
    its guarantee states a ``learning_rate="auto"`` ``choice``."""
    first = (lambda x: x[0]) if single else (lambda x: x)
    adaptation = getattr(sampler, "adaptation", None)
    line = _stated(guarantee(adaptation), choice)
    if adaptation is not None and isinstance(adaptation.adapt_until, int):  # frozen
        line += identity_clause(adaptation.metric, carry.state.metric_state, carry.state.params)
    return Samples(
        *_collect(kept, single),
        jax.tree.map(first, carry.state),
        first(carry.diverged_step),
        line,
    )


def _stated(line: str, choice: Any) -> str:
    """The guarantee's line, with a ``learning_rate="auto"`` choice appended."""
    return line if choice is None else choice.clause(line)


def with_burn_in(sampler: Sampler, burn_in: int, start: int = 0) -> Sampler:
    """``sampler`` for a run of ``burn_in`` steps from step ``start``: ``adapt_until="auto"``
    resolved (:func:`sgrld.samplers.guarantee.auto_freeze`); an ``adapt_until`` after the burn-in
    refused, since the kept samples would come from a metric still adapting. A
    ``learning_rate="auto"`` sampler keeps its search, whose ``build`` resolves the same way."""
    search = getattr(sampler, "rate_search", None)
    if search is not None:  # learning_rate="auto": resolved at the rate a run chooses
        with_burn_in(search.build(1.0), burn_in, start)  # refuses a bad adapt_until now
        build = lambda lr: with_burn_in(search.build(lr), burn_in, start)  # noqa: E731
        return sampler._replace(rate_search=search._replace(build=build))
    adaptation = getattr(sampler, "adaptation", None)
    if adaptation is None:
        return sampler
    if adaptation.resolve is not None:
        return adaptation.resolve(burn_in, start)
    until = adaptation.adapt_until
    if isinstance(until, int) and until > start + burn_in:
        raise ValueError(
            f"adapt_until={until} is after the burn-in (burn_in={burn_in} from step {start}): "
            "the first samples would come from a metric still adapting; raise burn_in to at "
            f"least {until - start} or lower adapt_until"
        )
    return sampler


def _check(num_samples: int, thin: int, burn_in: int, num_chains: int | None) -> int:
    """Validate the counts; return the number of chains."""
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
    return chains


def _chain_states(sampler: Sampler, params: PyTree, state: Any, single: bool) -> Any:
    """The starting states with a leading chain axis: ``sampler.init`` of each chain's
    ``params`` (leading chain axis), or ``state``."""
    if state is None:
        return jax.vmap(sampler.init)(params)
    return jax.tree.map(lambda x: x[None], state) if single else state


def _raise_if_diverged(
    carry: Any, out: Samples, start: int, burn_in: int, thin: int, keep: Callable | None
) -> None:
    """A :class:`DivergenceError` naming the first chain, step and leaf that went non-finite."""
    bad = first_divergence(carry, leaf_names(jax.tree.map(lambda x: x[0], carry.state.params)))
    if bad is None:
        return
    n_ok = count_kept(start, bad.step, start + burn_in, thin, keep)
    raise DivergenceError(
        f"chain {bad.chain} produced a NaN/inf at step {bad.step} (in parameter {bad.leaf}); "
        f"{bad.count} of {bad.num_chains} chains diverged. Its {n_ok} sample(s) taken "
        "before that are in this error's .samples "
        "(later entries repeat the last finite state). " + ADVICE,
        out,
    )
