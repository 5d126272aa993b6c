"""The experiment runner: SGRLD over epochs of shuffled minibatches, with an online ensemble.

How a run works (:func:`run`):

* The steps run on the chain engine (:mod:`sgrld.engine`), **one jitted chunk per epoch** with the
  data on the device: every chain walks its own permutation of the training set in minibatches of
  ``batch_size``, the **last incomplete minibatch dropped** (an epoch is ``n_train // batch_size``
  steps, each potential an unbiased estimate of ``U/N`` with the same variance). ``chains = K``
  chains are ``jax.vmap``-ed, each with its own initialisation, shuffling and noise.
* Burn-in and thinning count minibatches over the whole run (global step ``s``, from 0), as in
  the authors' code: ``s`` is a sample when ``s >= burn_in and (s + 1) % thin == 0``
  (:func:`sample_steps`).
* Samples are scored online: after the chunk, which buffers the epoch's samples, one jitted call
  (:mod:`sgrld.scoring`) lets each predict the evaluation sets and folds it into the ensembles.
  Memory holds one epoch's samples at most (a warning says when that exceeds
  :data:`BUFFER_WARN_BYTES`). The two calls are timed apart (``sample_s``, ``eval_s``), so the
  sampler's own cost is measured in every epoch, as Yu et al. time their samplers.
* After each epoch one line goes to ``metrics.jsonl`` (:func:`sgrld.records.record`): the
  sampler's diagnostics, the ensemble scores so far, the sample count and the wall times.
  Compilation happens before the first epoch and is reported as ``compile_s``.
* A chain whose update produces a NaN/inf keeps its last finite state and takes no more samples;
  the run stops after that epoch with a message naming the epoch, step, chain and parameter leaf.
  Ctrl-C stops the run (an epoch in flight is discarded). Either way everything computed so far
  is on disk and :class:`Result` says what happened.
* ``save_samples=True`` writes each epoch's samples to ``samples/epoch_EEEE.npz``
  (:func:`sgrld.load_samples` reads them back, with no template).

:func:`sgrld.from_config.run_config` builds everything from a configuration and runs it.

Example:
    >>> import sgrld
    >>> from sgrld.from_config import run_config
    >>> cfg = sgrld.config.load_config(None, ["data.name=digits", "data.batch_size=32",
    ...     "model.widths=[16]", "prior.kind=gaussian", "run.epochs=2", "run.burn_in=20",
    ...     "run.thin=10"])
    >>> result = run_config(cfg, out=None)  # 39 steps per epoch; samples at steps 29, 39, ..., 69
    >>> result.status, [r["samples"] for r in result.records]
    ('completed', [1, 5])
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from sgrld import divergence, records, results, scoring
from sgrld import engine as eng
from sgrld.sampler import Sampler

PyTree = Any
Status = Literal["completed", "diverged", "interrupted"]
EXIT_CODES = {"completed": 0, "diverged": 1, "interrupted": 130}
"""The ``sgrld`` command's exit code for each :class:`Result` status."""
BUFFER_WARN_BYTES = 2**30
"""An epoch's sample buffer larger than this (all chains) gets a warning: a low ``thin`` costs
memory, the buffer holding up to ``ceil(steps / thin) + 1`` copies of each chain's parameters."""


def first_kept_window(burn_in: int, thin: int) -> int:
    """The engine's burn-in (:func:`sgrld.engine.is_kept`) for the authors' rule.

    Example:
        >>> first_kept_window(7, 4)  # kept: 7, 11, ... = the engine's rule from step 4
        4
    """
    return math.ceil((burn_in + 1) / thin) * thin - thin


def sample_steps(num_steps: int, burn_in: int, thin: int) -> np.ndarray:
    """The global steps (0-based) at which a sample is taken.

    Step ``s`` is a sample when ``s >= burn_in`` and ``(s + 1) % thin == 0``, as in the authors'
    code (``inference.py``), so with ``burn_in = 1000`` and ``thin = 100`` the first sample is the
    state after the 1100th minibatch.

    Example:
        >>> sample_steps(30, burn_in=7, thin=4).tolist()
        [7, 11, 15, 19, 23, 27]
    """
    s = np.arange(num_steps)
    return s[eng.is_kept(s, first_kept_window(burn_in, thin), thin)]


@dataclass(frozen=True)
class Schedule:
    """How long to sample and which steps to keep.

    Attributes:
        epochs: passes over the training set.
        batch_size: minibatch size B (an epoch is ``n_train // B`` steps).
        burn_in: global steps before the first sample.
        thin: a sample every ``thin`` steps (see :func:`sample_steps`).
        chains: independent chains, run with ``jax.vmap``.
        seed: seed of the initialisation, shuffling and noise of all chains.
    """

    epochs: int
    batch_size: int
    burn_in: int = 0
    thin: int = 1
    chains: int = 1
    seed: int = 0

    def __post_init__(self):
        lows = {"epochs": 1, "batch_size": 1, "burn_in": 0, "thin": 1, "chains": 1}
        for name, low in lows.items():
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class Experiment:
    """What to sample and how to score it.

    Attributes:
        sampler: a :class:`sgrld.Sampler` whose ``step(key, state, (x, y))`` takes a minibatch.
        init_fn: ``key -> params`` of one chain (called with a different key per chain).
        predict_fn: ``(params, x) -> logits [n, C]`` (classification) or
            ``(params, x) -> (mean [n], std [n] or scalar)`` (regression).
        train: training inputs and targets (numpy or JAX arrays with a leading example axis).
        eval_sets: evaluation sets by name, e.g. ``{"test": (x, y), "val": (x, y)}``; empty
            sets are skipped.
        kind: ``"classification"`` or ``"regression"``.
        meta: anything JSON-serialisable to store in ``summary.json`` (e.g. the configuration).
    """

    sampler: Sampler
    init_fn: Callable[[jax.Array], PyTree]
    predict_fn: Callable[[PyTree, jax.Array], Any]
    train: tuple[Any, Any]
    eval_sets: Mapping[str, tuple[Any, Any]]
    kind: scoring.Kind = "classification"
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Result:
    """The outcome of :func:`run`.

    Attributes:
        status: ``"completed"``, ``"diverged"`` or ``"interrupted"``.
        message: a human-readable account of what happened (and where the results are).
        records: one dict per completed epoch (the lines of ``metrics.jsonl``).
        compile_s: seconds to compile the epoch's two functions.
        state: the final sampler states (leading chain axis), or ``None`` if no epoch completed.
        out: the results folder, or ``None``.
        summary: the contents of ``summary.json``.
    """

    status: Status
    message: str
    records: list[dict[str, Any]]
    compile_s: float
    state: Any
    out: Path | None
    summary: dict[str, Any]


@dataclass
class _Setup:
    """Everything a run needs, prepared before its first epoch."""

    engine: eng.Engine
    carry: eng.Carry
    keys: jax.Array
    curvature_keys: jax.Array
    train: tuple[jax.Array, jax.Array]
    eval_sets: dict[str, tuple[jax.Array, jax.Array]]
    scores: scoring.Scores
    score_fn: Callable
    steps: int
    names: list[str]


def _prepare(experiment: Experiment, schedule: Schedule, curvature: bool, points: int) -> _Setup:
    x_train, y_train = (jnp.asarray(a) for a in experiment.train)
    steps = x_train.shape[0] // schedule.batch_size
    if steps < 1:
        raise ValueError(
            f"batch_size {schedule.batch_size} is larger than the training set "
            f"({x_train.shape[0]} examples)"
        )
    eval_sets = {
        name: (jnp.asarray(x), jnp.asarray(y))
        for name, (x, y) in experiment.eval_sets.items()
        if len(x)
    }
    k = schedule.chains
    init_root, chain_root, curvature_root = jax.random.split(jax.random.key(schedule.seed), 3)
    params = jax.vmap(experiment.init_fn)(jax.random.split(init_root, k))
    one_chain = jax.tree.map(lambda a: a[0], params)
    num_classes = None
    if experiment.kind == "classification":
        logits = jax.eval_shape(experiment.predict_fn, one_chain, x_train[:1])
        num_classes = int(logits.shape[-1])
    ensemble = scoring.ensemble_ops(experiment.kind, num_classes)
    engine = eng.Engine(
        experiment.sampler,
        eng.epochs(x_train.shape[0], schedule.batch_size),
        burn_in=first_kept_window(schedule.burn_in, schedule.thin),
        thin=schedule.thin,
    )
    _warn_buffer(engine.slots(steps), params)
    return _Setup(
        engine=engine,
        carry=engine.init(jax.vmap(experiment.sampler.init)(params)),
        keys=eng.chain_keys(chain_root, k),
        curvature_keys=jax.random.split(curvature_root, k),
        train=(x_train, y_train),
        eval_sets=eval_sets,
        scores=scoring.init_scores(ensemble, eval_sets, k),
        score_fn=scoring.score_function(
            experiment.kind, experiment.predict_fn, ensemble, curvature, points
        ),
        steps=steps,
        names=divergence.leaf_names(one_chain),
    )


def _warn_buffer(slots: int, params: PyTree) -> None:
    buffer_bytes = slots * sum(x.nbytes for x in jax.tree.leaves(params))
    if buffer_bytes > BUFFER_WARN_BYTES:
        k = jax.tree.leaves(params)[0].shape[0]
        warnings.warn(
            f"the epoch's sample buffer takes {buffer_bytes / 2**30:.1f} GiB ({slots} slots x "
            f"{k} chain(s) x the parameters); a larger run.thin makes it smaller",
            stacklevel=3,
        )


def _compile(setup: _Setup) -> tuple[Callable, float]:
    """Compile the epoch's chunk and scoring functions; return the scorer and the seconds."""
    start = time.perf_counter()
    slots = setup.engine.slots(setup.steps)
    chunk = setup.engine.compile(
        setup.carry, setup.keys, setup.train, num_steps=setup.steps, slots=slots
    )
    chunk_out = chunk.out_info[1]
    score = (
        jax.jit(setup.score_fn)
        .lower(setup.scores, chunk_out, setup.curvature_keys, setup.eval_sets)
        .compile()
    )
    return score, time.perf_counter() - start


def _divergence_message(bad: divergence.Divergence, steps: int, out: Path | None) -> str:
    where = f" Results so far are in {out}." if out is not None else ""
    many = f" ({bad.count} chains diverged)" if bad.count > 1 else ""
    return (
        f"chain {bad.chain} diverged at epoch {bad.step // steps + 1}, step {bad.step} "
        f"(step {bad.step % steps} of the epoch): NaN/inf in parameter {bad.leaf}{many}. The run "
        "stopped after that epoch; samples before the divergence are in the ensemble, none after "
        f"it.{where} {divergence.ADVICE}"
    )


class _Epochs:
    """The per-epoch callback of the engine: score the epoch's samples, record, write."""

    def __init__(self, setup: _Setup, out: Path | None, save_samples: bool, curvature: bool):
        self.setup, self.out, self.save, self.curvature = setup, out, save_samples, curvature
        self.score: Callable | None = None
        self.compile_s = math.nan
        self.scores = setup.scores
        self.records: list[dict[str, Any]] = []
        self.state = None
        self.cpu = time.process_time()

    def compile(self) -> None:
        """Compile the epoch's chunk and scoring functions (timed as ``compile_s``)."""
        self.score, self.compile_s = _compile(self.setup)
        self.cpu = time.process_time()

    def __call__(self, epoch: int, carry: eng.Carry, chunk: eng.Chunk, sample_s: float) -> bool:
        s = self.setup
        start = time.perf_counter()
        scores, values = jax.block_until_ready(
            self.score(self.scores, chunk, s.curvature_keys, s.eval_sets)
        )
        eval_s = time.perf_counter() - start
        cpu, self.cpu = self.cpu, time.process_time()
        seconds = {
            "epoch_s": sample_s + eval_s,
            "sample_s": sample_s,
            "eval_s": eval_s,
            "epoch_cpu_s": self.cpu - cpu,
        }
        previous = self.records[-1]["samples"] if self.records else 0
        rec = records.record(epoch, s.steps, scores, previous, chunk, values, carry, seconds)
        if self.curvature:
            total = float(np.sum(np.asarray(scores.curvature_sum)))
            rec["curvature"] = total / rec["samples"] if rec["samples"] else math.nan
        self.scores, self.state = scores, carry.state
        self.records.append(rec)
        if self.out is not None:
            results.append_record(self.out / "metrics.jsonl", rec)
            if self.save:
                results.write_samples(self.out / "samples", epoch + 1, chunk)
        return bool(np.any(np.asarray(carry.diverged_step) >= 0))


def _run_epochs(
    setup: _Setup, epochs: _Epochs, num_epochs: int, out: Path | None, progress: bool, label: str
) -> tuple[Status, str]:
    """Compile, then run the epochs on the engine; return the status and its message."""
    with eng.single_threaded_blas():
        try:
            epochs.compile()
            final = setup.engine.run(
                setup.carry,
                setup.keys,
                setup.train,
                [setup.steps] * num_epochs,
                callback=epochs,
                progress=progress,
                label=label,
                unit="epoch",
                exact_slots=False,
            )
        except KeyboardInterrupt:
            where = f"; partial results in {out}" if out is not None else ""
            return "interrupted", f"interrupted after epoch {len(epochs.records)}{where}"
    bad = divergence.first_divergence(final, setup.names)
    if bad is not None:
        return "diverged", _divergence_message(bad, setup.steps, out)
    return "completed", f"completed {len(epochs.records)} epochs" + (
        f"; results in {out}" if out else ""
    )


def run(
    experiment: Experiment,
    schedule: Schedule,
    *,
    out: str | Path | None = None,
    save_samples: bool = False,
    curvature: bool = False,
    curvature_points: int = 1000,
    progress: bool = False,
    label: str = "sampling",
) -> Result:
    """Run SGRLD chains over epochs of shuffled minibatches and score the thinned samples online.

    See the module docstring for the scheme. Files written to ``out`` (if given):
    ``metrics.jsonl`` (one JSON line per epoch, appended as each completes,
    :func:`sgrld.records.record`) and ``summary.json`` (also after a divergence or an
    interruption); with ``save_samples``, ``samples/epoch_EEEE.npz``.
    Each record's ``epoch_s`` (wall time of the epoch) = ``sample_s`` (the sampling chunk) +
    ``eval_s`` (scoring the epoch's samples); ``epoch_cpu_s`` is the CPU time the process used
    meanwhile, over all cores. The summary adds ``compile_s`` and medians over epochs.

    Args:
        experiment: the sampler, initialisation, predictor and data.
        schedule: epochs, batch size, burn-in, thinning, chains and seed.
        out: the results folder (created), or ``None`` to write nothing.
        save_samples: write every kept sample to ``out/samples/`` (needs ``out``).
        curvature: also score the input-space curvature C(x) (:func:`sgrld.evaluation.curvature`,
            20 power iterations) of every sample on the first ``curvature_points`` test points,
            as Yu et al. (Table 2); reported as the mean over samples. Slow.
        curvature_points: test points used for the curvature.
        progress: show a progress bar with an ETA over epochs and steps.
        label: the progress bar's description.

    Returns:
        A :class:`Result`; ``status`` is ``"diverged"`` or ``"interrupted"`` when the run stopped
        early, with ``message`` saying where and why. It does not raise for either.

    Raises:
        ValueError: for ``save_samples`` without ``out``, a batch larger than the training set,
            or ``curvature`` without a ``"test"`` set.
    """
    if save_samples and out is None:
        raise ValueError("save_samples=True needs an out folder")
    if curvature and "test" not in experiment.eval_sets:
        raise ValueError("curvature=True scores the 'test' evaluation set, which is missing")
    setup = _prepare(experiment, schedule, curvature, curvature_points)
    out = None if out is None else Path(out)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.jsonl").write_text("")
    epochs = _Epochs(setup, out, save_samples, curvature)
    status, message = _run_epochs(setup, epochs, schedule.epochs, out, progress, label)
    result = Result(status, message, epochs.records, epochs.compile_s, epochs.state, out, {})
    result.summary = records.summary(result, schedule, setup.steps, experiment.meta)
    if out is not None:
        results.write_json(out / "summary.json", result.summary)
    return result
