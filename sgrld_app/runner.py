"""The experiment runner: SGRLD over epochs of shuffled minibatches, with an online ensemble.

How a run works (:func:`run`):

* The steps run on the chain engine (:mod:`sgrld.chains.engine`), **one jitted chunk per epoch**
  with the data on the device: every chain walks its own permutation of the training set in
  minibatches of ``batch_size``, the **last incomplete minibatch dropped** (an epoch is ``n_train //
  batch_size`` steps, each potential an unbiased estimate of ``U/N`` with the same variance; at
  ``batch_size = n_train``, one step over all of it, no permutation drawn).
  ``chains = K`` chains are ``jax.vmap``-ed, each with its own initialisation, shuffling and noise.
* Burn-in and thinning count minibatches over the whole run (global step ``s``, from 0), as in
  the authors' code: ``s`` is a sample when ``s >= burn_in and (s + 1) % thin == 0``
  (:func:`sgrld_app.experiment.sample_steps`).
* Samples are scored online: after the chunk, which buffers the epoch's samples, one jitted call
  (:mod:`sgrld_app.scoring`) lets each predict the evaluation sets and folds it into the ensembles.
  Memory holds one epoch's samples at most (a warning says when that exceeds
  :data:`BUFFER_WARN_BYTES`). The two calls are timed apart (``sample_s``, ``eval_s``), so the
  sampler's own cost is measured in every epoch, as Yu et al. time their samplers.
* After each epoch one line goes to ``metrics.jsonl`` (:func:`sgrld_app.records.record`): the
  diagnostics, ensemble scores, sample count and wall times; ``compile_s`` is the compilation.
* A chain whose update produces a NaN/inf keeps its last finite state and takes no more samples;
  the run stops after that epoch with a message naming the epoch, step, chain and parameter leaf.
  Ctrl-C or SIGTERM stops the run after the epoch in flight (a second one at once, discarding
  it). Either way everything computed so far is on disk and :class:`Result` says what happened.
* A checkpoint (:mod:`sgrld_app.checkpoint`) is written every ``checkpoint_every`` epochs (not
  within ``checkpoint_seconds`` of the last) and at the end; ``run(..., resume=checkpoint.latest(
  out))`` continues the run in ``out`` as an uninterrupted run (:mod:`sgrld_app.run_folder`).
* ``save_samples=True`` writes each epoch's samples to ``samples/epoch_EEEE.npz``
  (:func:`sgrld.load_samples` reads them back, with no template).

:func:`sgrld_app.launch.run_config` builds everything from a configuration and runs it.

Example:
    >>> from sgrld_app.config import load_config
    >>> from sgrld_app.launch import run_config
    >>> cfg = load_config(None, ["data.name=digits", "data.batch_size=32",
    ...     "model.widths=[16]", "prior.kind=gaussian", "sampler.learning_rate=0.05",
    ...     "run.epochs=2", "run.burn_in=20", "run.thin=10"])
    >>> result = run_config(cfg, out=None)  # 39 steps per epoch; samples at steps 29, 39, ..., 69
    >>> result.status, [r["samples"] for r in result.records]
    ('completed', [1, 5])
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sgrld import interrupts
from sgrld.chains import devices, divergence
from sgrld.chains import engine as eng
from sgrld.chains.dispersion import warn_if_chains_disagree
from sgrld.numerics.pytrees import PyTree
from sgrld_app import checkpoint, records, run_end, run_folder, scoring
from sgrld_app.epoch_writer import EpochWriter, RunSetup
from sgrld_app.experiment import Experiment, Result, RunPlan, Status, first_kept_window

BUFFER_WARN_BYTES = 2**30
"""An epoch's sample buffer (all chains; ``ceil(steps / thin) + 1`` copies) above this warns."""


def _prepare(
    experiment: Experiment, schedule: RunPlan, curvature: bool, points: int, mesh: Any
) -> RunSetup:
    n_train = len(experiment.train[0])
    steps = n_train // schedule.batch_size
    if steps < 1:
        raise ValueError(
            f"batch_size {schedule.batch_size} is larger than the training set ({n_train} examples)"
        )
    if mesh is None:
        x_train, y_train = (jnp.asarray(a) for a in experiment.train)
    else:
        devices.check_mesh(mesh, schedule.chains, schedule.batch_size)
        x_train, y_train = devices.place_rows(mesh, tuple(experiment.train))
    eval_sets = {
        name: (jnp.asarray(x), jnp.asarray(y))
        for name, (x, y) in experiment.eval_sets.items()
        if len(x)
    }
    k = schedule.chains
    init_keys, keys, curvature_keys = _chain_roots(schedule)
    params = jax.vmap(experiment.init_fn)(init_keys)
    states = jax.vmap(experiment.sampler.init)(params, *experiment.chain_args)
    one_chain = jax.tree.map(lambda a: a[0], params)
    num_classes = None
    if experiment.kind == "classification":
        logits = jax.eval_shape(experiment.predict_fn, one_chain, experiment.train[0][:1])
        num_classes = int(logits.shape[-1])
    ensemble = scoring.ensemble_ops(experiment.kind, num_classes)
    engine = eng.Engine(
        experiment.sampler,
        eng.epochs(n_train, schedule.batch_size),
        burn_in=first_kept_window(schedule.burn_in, schedule.thin),
        thin=schedule.thin,
        keep=experiment.keep,
        mesh=mesh,
    )
    _warn_buffer(engine.slots(steps), params)
    return RunSetup(
        engine=engine,
        carry=engine.init(states),
        keys=keys,
        curvature_keys=curvature_keys,
        train=(x_train, y_train),
        eval_sets=eval_sets,
        scores=scoring.init_scores(ensemble, eval_sets, k),
        score_fn=scoring.score_function(
            experiment.kind, experiment.predict_fn, ensemble, curvature, points
        ),
        steps=steps,
        names=divergence.leaf_names(one_chain),
        kind=experiment.kind,
        groups=None if schedule.seeds is None else len(schedule.seeds),
    )


def _chain_roots(schedule: RunPlan) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Each chain's initialisation key, chain key (:func:`sgrld.chains.engine.chain_keys`) and
    curvature key, from ``schedule.seed`` or per group from ``schedule.seeds``."""
    seeds = (schedule.seed,) if schedule.seeds is None else schedule.seeds
    k = schedule.chains // len(seeds)
    groups = []
    for seed in seeds:
        init_root, chain_root, curvature_root = jax.random.split(jax.random.key(seed), 3)
        groups.append(
            (
                jax.random.split(init_root, k),
                eng.chain_keys(chain_root, k),
                jax.random.split(curvature_root, k),
            )
        )
    return tuple(jnp.concatenate(keys) for keys in zip(*groups, strict=True))


def _warn_buffer(slots: int, params: PyTree) -> None:
    buffer_bytes = slots * sum(x.nbytes for x in jax.tree.leaves(params))
    if buffer_bytes > BUFFER_WARN_BYTES:
        k = jax.tree.leaves(params)[0].shape[0]
        warnings.warn(
            f"the epoch's sample buffer takes {buffer_bytes / 2**30:.1f} GiB ({slots} slots x "
            f"{k} chain(s) x the parameters); a larger run.thin makes it smaller",
            stacklevel=3,
        )


def _divergence_message(bad: divergence.Divergence, steps: int, out: Path | None) -> str:
    where = f" Results so far are in {out}." if out is not None else ""
    many = f" ({bad.count} chains diverged)" if bad.count > 1 else ""
    return (
        f"chain {bad.chain} diverged at epoch {bad.step // steps + 1}, step {bad.step} "
        f"(step {bad.step % steps} of the epoch): NaN/inf in parameter {bad.leaf}{many}. The run "
        "stopped after that epoch; samples before the divergence are in the ensemble, none after "
        f"it.{where} {divergence.ADVICE}"
    )


def _restore(setup: RunSetup, saved: checkpoint.Saved, schedule: RunPlan) -> RunSetup:
    """The setup with the carry, ensembles and keys of a checkpoint of the same schedule."""
    # As the checkpoint stored it, in JSON (a tuple of seeds comes back a list).
    now = json.loads(json.dumps(vars(schedule)))
    differ = checkpoint.differences(saved.info["schedule"], now)
    if differ:
        raise checkpoint.CheckpointError(
            f"checkpoint {saved.path} has another schedule: {', '.join(differ)}"
        )
    trees = {name: getattr(setup, name) for name in ("carry", "scores", "keys")}
    return dataclasses.replace(
        setup, **{name: checkpoint.restore(saved, name, tree) for name, tree in trees.items()}
    )


def _run_epochs(
    setup: RunSetup,
    epochs: EpochWriter,
    num_epochs: int,
    out: Path | None,
    progress: bool,
    label: str,
    agree: bool,
) -> tuple[Status, str]:
    """Compile, then run the epochs left on the engine; return the status and its message. With
    ``agree``, a run whose chains all completed warns if they disagree
    (:func:`sgrld.chains.dispersion.warn_if_chains_disagree` of the potentials of the draws
    kept since it started or resumed)."""
    final, potentials = None, []

    def callback(index: int, carry: eng.Carry, chunk: eng.Chunk, seconds: float) -> bool:
        if hasattr(chunk.info, "potential"):
            potentials.append(np.asarray(chunk.info.potential)[np.asarray(chunk.steps) >= 0].T)
        return epochs(index, carry, chunk, seconds)

    with eng.single_threaded_blas():
        try:
            epochs.compile()
            diverged = bool(np.any(np.asarray(setup.carry.diverged_step) >= 0))
            stop = (diverged and epochs.stop_on_divergence) or epochs.stop.signal
            left = 0 if stop else num_epochs - epochs.first
            final = setup.engine.run(
                setup.carry,
                setup.keys,
                setup.train,
                [setup.steps] * left,
                start=epochs.first * setup.steps,
                callback=callback,
                progress=progress,
                label=label,
                unit="epoch",
                exact_slots=False,
            )
        except KeyboardInterrupt:
            pass
    with contextlib.suppress(KeyboardInterrupt):  # a second signal skips only the checkpoint
        epochs.checkpoint()
    where = f"; partial results in {out}" if out is not None else ""
    if final is None or (epochs.stop.signal and len(epochs.records) < num_epochs):
        by = " by SIGTERM" if epochs.stop.signal == "SIGTERM" else ""
        return "interrupted", f"interrupted{by} after epoch {len(epochs.records)}{where}"
    bad = divergence.first_divergence(final, setup.names)
    if bad is not None and epochs.stop_on_divergence:
        return "diverged", _divergence_message(bad, setup.steps, out)
    where = f"; results in {out}" if out else ""
    if bad is None and agree and potentials:
        warn_if_chains_disagree(np.concatenate(potentials, axis=1))
    if bad is not None:  # the other chains went on
        where += (
            f"; {bad.count} chain(s) diverged and took no samples after it (the first: chain "
            f"{bad.chain} at step {bad.step}, NaN/inf in parameter {bad.leaf})"
        )
    return "completed", f"completed {len(epochs.records)} epochs{where}"


def _device_summary(engine: eng.Engine, chains: int) -> dict[str, Any]:
    """The summary's ``devices``: the mesh, and the device memory of the epoch's chunk function
    (XLA's ``memory_analysis``, :func:`sgrld.chains.devices.compiled_bytes`) per device and per
    chain."""
    need, per_device = engine.device_bytes, devices.chains_per_device(engine.mesh, chains)
    return {
        **devices.describe(engine.mesh),
        "chunk_bytes_per_device": need,
        "chunk_bytes_per_chain": None if need is None else need / per_device,
    }


def run(
    experiment: Experiment,
    schedule: RunPlan,
    *,
    out: str | Path | None = None,
    save_samples: bool = False,
    curvature: bool = False,
    curvature_points: int = 1000,
    progress: bool = False,
    label: str = "sampling",
    existing: run_folder.Existing = "overwrite",
    resume: checkpoint.Saved | None = None,
    checkpoint_every: int = 1,
    checkpoint_seconds: float = 60.0,
    stop_on_divergence: bool = True,
    mesh: jax.sharding.Mesh | None = None,
) -> Result:
    """Run SGRLD chains over epochs of shuffled minibatches and score the thinned samples online.

    See the module docstring for the scheme. Files written to ``out`` (if given):
    ``metrics.jsonl`` (one JSON line per epoch, appended as each completes,
    :func:`sgrld_app.records.record`), ``summary.json`` (``"running"`` until the run ends, then
    its status, also after a divergence or an interruption; ``"failed"``, naming the error, if an
    exception such as a failed write ends it, which is then raised), checkpoints
    (:mod:`sgrld_app.checkpoint`); with ``save_samples``, ``samples/epoch_EEEE.npz``. SIGINT and
    SIGTERM stop the run after the epoch in flight (:mod:`sgrld.interrupts`), with a
    checkpoint and the summary; if the ``sgrld`` command's watcher must end the process first
    (compiling, or an epoch longer than its grace), the summary still says ``"interrupted"``,
    with the epochs completed (:class:`sgrld_app.run_end.RunEnd`).
    Each record's ``epoch_s`` (wall time of the epoch) = ``sample_s`` (the sampling chunk) +
    ``eval_s`` (scoring the epoch's samples); ``epoch_cpu_s`` is the CPU time the process used
    meanwhile, over all cores. The summary adds ``compile_s`` and medians over epochs. Where
    ``schedule.seeds`` cuts the chains into groups (the replicates of a sweep), each record's
    ``"groups"`` also gives every group's ensemble scores so far (:func:`sgrld_app.records.record`).

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
        existing: what to do with an earlier run's files in ``out``: ``"refuse"`` or
            ``"overwrite"`` (remove them first; :mod:`sgrld_app.run_folder`).
        resume: continue the run in ``out`` from this checkpoint
            (:func:`sgrld_app.checkpoint.latest`) instead; the records and samples are those of
            an uninterrupted run.
        checkpoint_every: write a checkpoint after every this many epochs (and when the run ends).
        checkpoint_seconds: skip a due checkpoint until this many seconds have passed since the
            last one (or since sampling started); ``0``: write every due one.
        stop_on_divergence: stop after the epoch in which a chain diverged (status
            ``"diverged"``); ``False``: the other chains go on to the end (status ``"completed"``,
            the message counting the diverged chains, ``Result.diverged_step`` saying which).
        mesh: a device mesh (:func:`sgrld.chains.devices.make_mesh`) to shard the chains and each
            minibatch over; ``None``: one device. In a multi-process run
            (:func:`sgrld.chains.devices.initialize`) only process 0 writes ``out``; the others
            write nothing. ``summary.json``'s ``devices`` gives the mesh and the device memory per
            chain of the epoch's chunk.

    Returns:
        A :class:`Result`; ``status`` is ``"diverged"`` or ``"interrupted"`` when the run stopped
        early, with ``message`` saying where and why. It does not raise for either.

    Raises:
        ValueError: for ``save_samples`` or ``resume`` without ``out``, a batch larger than the
            training set, or ``curvature`` without a ``"test"`` set.
        sgrld.samples.results.ResultsError: ``out`` holds a run and ``existing="refuse"``
            (:class:`sgrld_app.checkpoint.CheckpointError`: ``resume`` is of another schedule or
            model).
    """
    for name, value in (("save_samples=True", save_samples), ("resume", resume)):
        if value and out is None:
            raise ValueError(f"{name} needs an out folder")
    if curvature and "test" not in experiment.eval_sets:
        raise ValueError("curvature=True scores the 'test' evaluation set, which is missing")
    if not devices.is_writer():  # another process of a multi-process run writes the results
        out, save_samples = None, False
    with interrupts.stop_on_signals() as stop:
        setup = _prepare(experiment, schedule, curvature, curvature_points, mesh)
        if resume is not None:
            setup = _restore(setup, resume, schedule)
        out = None if out is None else Path(out)
        if out is not None:
            run_folder.start(out, existing, resume, experiment.meta)
        info = {"schedule": vars(schedule), "meta": experiment.meta}
        epochs = EpochWriter(
            setup,
            out,
            save_samples,
            curvature,
            stop,
            info,
            checkpoint_every,
            checkpoint_seconds,
            resume,
            stop_on_divergence,
        )
        summary = None if out is None else run_end.Summary(out)
        ended = run_end.RunEnd(summary, epochs, schedule, setup.steps, experiment.meta)
        with interrupts.last_word(ended.by_signal), ended.on_error():
            agree = not experiment.chain_args and schedule.seeds is None  # not a sweep's chains
            status, message = _run_epochs(
                setup, epochs, schedule.epochs, out, progress, label, agree
            )
            so_far = epochs.records, epochs.compile_s, epochs.state, out, {}
            result = Result(status, message, *so_far)
            result.scores = epochs.scores
            result.diverged_step = np.asarray(epochs.carry.diverged_step)
            result.summary = records.summary(result, schedule, setup.steps, experiment.meta)
            result.summary["devices"] = _device_summary(setup.engine, schedule.chains)
            if summary is not None:
                summary.write(result.summary)
    return result
