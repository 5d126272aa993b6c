"""The experiment runner: SGRLD over epochs of shuffled minibatches, with an online ensemble.

How a run works (:func:`run`):

* The data live on the device. Each epoch is **one jitted call** of a ``jax.lax.scan`` over the
  epoch's minibatches: every chain draws its own permutation of the training set with
  ``jax.random.permutation`` (key ``fold_in(chain_key, epoch)``) and walks it in minibatches of
  ``batch_size``; the **last incomplete minibatch is dropped**, so an epoch is
  ``n_train // batch_size`` steps and every step's potential is an unbiased estimate of ``U/N``
  with the same variance. No Python runs between steps.
* ``chains = K`` independent chains are ``jax.vmap``-ed: each has its own initialisation key, its
  own shuffling and its own noise. The chains step together, so a metric's periodic refresh stays
  one branch for all of them (:func:`sgrld.metrics.base.branch_over_chains`).
* Burn-in and thinning are counted in minibatches over the whole run (global step ``s``, from 0),
  as in the authors' code: step ``s`` is a sample when ``s >= burn_in and (s + 1) % thin == 0``
  (:func:`sample_steps`).
* Samples are scored online. An epoch is two jitted calls: the sampling scan, which copies each
  chain's parameters into a buffer of the epoch's ``ceil(steps / thin) + 1`` sample slots at every
  sample step (a ``jax.lax.cond`` on the chain-independent step index, so other steps pay
  nothing), then the scoring call, which lets every buffered sample predict the evaluation sets
  (test and validation) and folds it into the ensembles of :mod:`sgrld.evaluation`. Memory holds
  one epoch's samples at most (a warning says when that exceeds :data:`BUFFER_WARN_BYTES`) and
  does not grow with the number of samples; the two calls are
  timed apart (``sample_s``, ``eval_s``), so the sampler's own cost per epoch is measured in every
  epoch, as Yu et al. time their samplers (evaluation excluded).
* After each epoch one record goes to ``metrics.jsonl``: the mean potential Û/N and gradient norm
  over the epoch's steps, the ensemble scores of each evaluation set so far (classification:
  ``log_likelihood`` = log p(y|X), ``accuracy``, ``ece`` with 30 bins; regression: ``rmse``,
  ``nll``), the number of samples and the wall times of the epoch, of its sampling and of its
  scoring (``block_until_ready``). Compilation happens once, before the first epoch
  (``jit(...).lower(...).compile()``), and is reported separately as ``compile_s``.
* A chain whose update produces a NaN/inf keeps its last finite state and takes no more samples;
  the run stops after that epoch with a message naming the epoch, step, chain and parameter leaf.
  (Keeping the last finite state costs a select over the whole sampler state at every step: on a
  CPU, 8% of an Identity epoch of the MNIST MLP and 30% of a Shampoo one. So epochs run without
  it, and only an epoch in which some chain diverged runs again, from the same carry and keys,
  with it.)
  Ctrl-C stops the run between epochs (an epoch in flight is discarded). Either way everything
  computed so far is on disk and :class:`Result` says what happened.
* ``save_samples=True`` writes the thinned samples of each epoch (the buffer above) to
  ``samples/epoch_EEEE.npz``; :func:`load_samples` reads them back.

:func:`run_config` builds everything from a :class:`sgrld.config.Config` and runs it; it is what
``sgrld run``, ``sgrld demo`` and ``sgrld reproduce mnist-mlp`` use.

Example:
    >>> import sgrld
    >>> cfg = sgrld.config.load_config(None, ["data.name=digits", "data.batch_size=32",
    ...     "model.widths=[16]", "prior.kind=gaussian", "run.epochs=2", "run.burn_in=20",
    ...     "run.thin=10"])
    >>> result = run_config(cfg, out=None)  # 39 steps per epoch; samples at steps 29, 39, ..., 69
    >>> result.status, [r["samples"] for r in result.records]
    ('completed', [1, 5])
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import threadpoolctl
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

import sgrld
from sgrld import bnn, evaluation
from sgrld.config import METRICS, PRIORS, Config, ConfigError, write_config
from sgrld.data import DATASETS, DataError, load_dataset

PyTree = Any
Kind = Literal["classification", "regression"]
Status = Literal["completed", "diverged", "interrupted"]

ECE_BINS = 30
EXIT_CODES = {"completed": 0, "diverged": 1, "interrupted": 130}
"""The ``sgrld`` command's exit code for each :class:`Result` status."""
EVAL_BATCH = 2048
BUFFER_WARN_BYTES = 2**30
"""An epoch's sample buffer larger than this (all chains) gets a warning: lower ``thin`` costs
memory, since the buffer holds ``ceil(steps / thin) + 1`` copies of every chain's parameters."""


def sample_steps(num_steps: int, burn_in: int, thin: int) -> np.ndarray:
    """The global steps (0-based) at which a sample is taken.

    Step ``s`` is a sample when ``s >= burn_in`` and ``(s + 1) % thin == 0``, as in the authors'
    code (``inference.py``), so with ``burn_in = 1000`` and ``thin = 100`` the first sample is the
    state after the 1100th minibatch.

    Args:
        num_steps: steps in the whole run.
        burn_in: steps before the first possible sample.
        thin: a sample every ``thin`` steps.

    Returns:
        The sample steps, increasing.

    Example:
        >>> sample_steps(30, burn_in=7, thin=4).tolist()
        [7, 11, 15, 19, 23, 27]
    """
    s = np.arange(num_steps)
    return s[(s >= burn_in) & ((s + 1) % thin == 0)]


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

    sampler: sgrld.Sampler
    init_fn: Callable[[jax.Array], PyTree]
    predict_fn: Callable[[PyTree, jax.Array], Any]
    train: tuple[Any, Any]
    eval_sets: Mapping[str, tuple[Any, Any]]
    kind: Kind = "classification"
    meta: Mapping[str, Any] = field(default_factory=dict)


class Carry(NamedTuple):
    """What an epoch carries over, every leaf with a leading chain axis.

    Attributes:
        state: the sampler states.
        ensembles: per evaluation set, the chain's online ensemble.
        samples: samples taken by the chain (before any divergence).
        curvature_sum: sum over the chain's samples of the mean input-space curvature.
        diverged_step: the global step at which the chain produced a NaN/inf, or −1.
        diverged_leaf: index (``jax.tree.leaves`` order) of the first non-finite leaf, or −1.
    """

    state: Any
    ensembles: dict[str, Any]
    samples: jax.Array
    curvature_sum: jax.Array
    diverged_step: jax.Array
    diverged_leaf: jax.Array


@dataclass
class Result:
    """The outcome of :func:`run`.

    Attributes:
        status: ``"completed"``, ``"diverged"`` or ``"interrupted"``.
        message: a human-readable account of what happened (and where the results are).
        records: one dict per completed epoch (the lines of ``metrics.jsonl``).
        compile_s: seconds to compile the epoch function.
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


def _select(mask: jax.Array, new: PyTree, old: PyTree) -> PyTree:
    """Per chain: ``new`` where ``mask`` (shape [K]) is True, else ``old``."""
    return jax.tree.map(
        lambda n, o: jnp.where(mask.reshape(mask.shape + (1,) * (n.ndim - 1)), n, o), new, old
    )


def _chunked(fn: Callable[[jax.Array], Any], x: jax.Array, size: int) -> Any:
    """``fn(x)`` evaluated on chunks of at most ``size`` rows (bounded activation memory)."""
    n = x.shape[0]
    if n <= size:
        return fn(x)
    chunks = math.ceil(n / size)
    padded = jnp.pad(x, [(0, chunks * size - n)] + [(0, 0)] * (x.ndim - 1))
    out = jax.lax.map(fn, padded.reshape(chunks, size, *x.shape[1:]))
    return jax.tree.map(lambda a: a.reshape(chunks * size, *a.shape[2:])[:n], out)


def _per_point(kind: Kind, predict_fn: Callable) -> Callable[[PyTree, jax.Array], Any]:
    """``predict_fn`` with a regression's scalar standard deviation broadcast to every point."""
    if kind == "classification":
        return predict_fn

    def predict(params, x):
        mean, std = predict_fn(params, x)
        return mean, jnp.broadcast_to(jnp.asarray(std, mean.dtype), mean.shape)

    return predict


def _nll_fn(kind: Kind, predict_fn: Callable) -> Callable[[PyTree, jax.Array, jax.Array], Any]:
    """``(params, x_i, y_i) -> −log p(y_i | x_i, θ)`` of one example, for the curvature."""

    def nll(params, x, y):
        out = predict_fn(params, x[None])
        if kind == "classification":
            return -jax.nn.log_softmax(out[0])[y]
        mean, std = out
        return -jax.scipy.stats.norm.logpdf(y, mean[0], std[0])

    return nll


def _ensemble_ops(kind: Kind, num_classes: int | None):
    """``(init(n), update(ens, prediction, y), scores(merged, y), merge)`` of the ensemble kind."""
    if kind == "classification":
        return (
            lambda n: evaluation.init_classification(n, num_classes),
            lambda ens, logits, y: evaluation.update_classification(ens, logits),
            lambda ens, y: evaluation.classification_scores(ens, y, ECE_BINS),
            evaluation.merge_classification,
        )
    return (
        evaluation.init_regression,
        lambda ens, pred, y: evaluation.update_regression(ens, pred[0], pred[1], y),
        lambda ens, y: evaluation.regression_scores(ens, y),
        evaluation.merge_regression,
    )


def leaf_names(params: PyTree) -> list[str]:
    """Readable names of the leaves of ``params``, in ``jax.tree.leaves`` order.

    Example:
        >>> leaf_names({"net": {"w": 0.0}, "prior": {}})
        ["['net']['w']"]
    """
    return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]


def _json_safe(value: Any) -> Any:
    """Floats that are not finite become ``None`` (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def write_json(path: str | Path, value: Any) -> None:
    """Write ``value`` as indented JSON, with non-finite floats as ``null``."""
    Path(path).write_text(json.dumps(_json_safe(value), indent=2, allow_nan=False) + "\n")


def _write_samples(folder: Path, epoch: int, output: Sampled) -> None:
    """Write one epoch's kept samples (``param{i}``: ``[n, chains, ...]``), steps and validity."""
    steps = np.asarray(output.sample_steps)
    used = steps >= 0
    if not used.any():
        return
    folder.mkdir(parents=True, exist_ok=True)
    leaves = jax.tree.leaves(output.samples)
    np.savez(
        folder / f"epoch_{epoch:04d}.npz",
        step=steps[used],
        valid=np.asarray(output.sample_valid)[used],
        **{f"param{i}": np.asarray(x)[used] for i, x in enumerate(leaves)},
    )


def load_samples(folder: str | Path, template: PyTree) -> tuple[np.ndarray, np.ndarray, PyTree]:
    """Read the samples that ``save_samples=True`` wrote, in step order.

    Args:
        folder: the results folder (holding ``samples/``).
        template: a pytree with the structure of one chain's parameters.

    Returns:
        ``(steps [S], valid [S, chains], params)``, the leaves of ``params`` shaped
        ``[S, chains, ...]``; ``valid`` is False for the copies of a diverged chain's last finite
        state, which were not added to the ensemble.
    """
    files = sorted((Path(folder) / "samples").glob("epoch_*.npz"))
    if not files:
        raise FileNotFoundError(f"no samples in {Path(folder) / 'samples'}")
    loaded = [np.load(f) for f in files]
    treedef = jax.tree.structure(template)
    leaves = [np.concatenate([z[f"param{i}"] for z in loaded]) for i in range(treedef.num_leaves)]
    steps = np.concatenate([z["step"] for z in loaded])
    valid = np.concatenate([z["valid"] for z in loaded])
    return steps, valid, treedef.unflatten(leaves)


def plot_curves(
    runs: Mapping[str, list[dict[str, Any]]], path: str | Path, title: str = ""
) -> Path:
    """Test log-likelihood and accuracy of the ensembles against epochs (Yu et al. Fig. 3).

    Args:
        runs: per label (e.g. a metric), the epoch records of a run.
        path: the PNG file to write.
        title: the figure title.

    Returns:
        ``path``. Regression runs plot the test NLL and RMSE instead.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = next((r[0] for r in runs.values() if r), {})
    panels = (
        [("test_log_likelihood", "test log p(y|X)"), ("test_accuracy", "test accuracy")]
        if "test_log_likelihood" in first
        else [("test_nll", "test NLL"), ("test_rmse", "test RMSE")]
    )
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    for ax, (key, label) in zip(axes, panels, strict=True):
        for name, records in runs.items():
            points = [
                (r["epoch"], r[key]) for r in records if math.isfinite(r.get(key) or math.nan)
            ]
            if points:
                ax.plot(
                    *zip(*points, strict=True), marker="." if len(points) < 30 else None, label=name
                )
        ax.set(xlabel="epoch", ylabel=label)
        ax.grid(alpha=0.3)
    if axes[0].lines:  # no line before the first thinned sample (e.g. a run shorter than burn-in)
        axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


@contextlib.contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """Limit BLAS/LAPACK (OpenBLAS) to one thread while XLA runs on the CPU.

    XLA's CPU runtime already uses every core; a LAPACK call inside a jitted function (Shampoo's
    ``eigh``) that starts its own OpenBLAS threads oversubscribes the cores and runs up to 20x
    slower. On other backends this does nothing.
    """
    if jax.default_backend() != "cpu":
        yield
        return
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        yield


def _progress(epochs: int, enabled: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("epoch {task.fields[epoch]}/" + str(epochs)),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        disable=not enabled,
        transient=False,
    )


class Sampled(NamedTuple):
    """What the sampling half of an epoch returns besides the carry.

    Attributes:
        potential: mean Û/N over the epoch's steps (of chains not diverged).
        grad_norm: mean ‖∇Û/N‖ over the same steps.
        samples: the epoch's samples ``[slots, chains, ...]`` per leaf.
        sample_steps: the global step of each slot, −1 for an unused slot.
        sample_valid: ``[slots, chains]``, False for a diverged chain (not in the ensemble).
    """

    potential: jax.Array
    grad_norm: jax.Array
    samples: PyTree
    sample_steps: jax.Array
    sample_valid: jax.Array


def _sample_function(
    experiment: Experiment, schedule: Schedule, steps: int, *, freeze: bool
) -> Callable:
    """The sampling half of an epoch: ``(carry, epoch, chain_keys, data) -> (carry, Sampled)``.

    With ``freeze``, a chain whose step is not finite keeps its last finite state; without it the
    chain carries on from the non-finite state. Either way it is marked diverged at its first
    non-finite step and takes no samples after it, so the scores are the same.
    """
    chain_step = jax.vmap(experiment.sampler.step)
    b, burn_in, thin = schedule.batch_size, schedule.burn_in, schedule.thin
    slots = math.ceil(steps / thin) + 1

    def keep_sample(s, carry, buffer, slot):
        alive = carry.diverged_step < 0
        params, steps_at, valid = buffer
        buffer = (
            jax.tree.map(lambda x, p: x.at[slot].set(p), params, carry.state.params),
            steps_at.at[slot].set(s),
            valid.at[slot].set(alive),
        )
        return carry._replace(samples=carry.samples + alive.astype(jnp.int32)), buffer, slot + 1

    def step_fn(data, loop, inputs):
        carry, buffer, slot = loop
        idx, keys, s = inputs
        new_state, info = chain_step(keys, carry.state, (data["x"][idx], data["y"][idx]))
        alive = carry.diverged_step < 0
        ok = alive & info.is_finite
        newly_bad = alive & ~info.is_finite
        carry = carry._replace(
            state=_select(ok, new_state, carry.state) if freeze else new_state,
            diverged_step=jnp.where(newly_bad, s, carry.diverged_step),
            diverged_leaf=jnp.where(newly_bad, info.nonfinite_leaf, carry.diverged_leaf),
        )
        # The predicate depends on the step only, never on a chain: a real branch under vmap.
        loop = jax.lax.cond(
            (s >= burn_in) & ((s + 1) % thin == 0),
            partial(keep_sample, s),
            lambda *args: args,
            carry,
            buffer,
            slot,
        )
        finite = lambda x: jnp.where(ok, x, 0.0)  # not x * ok: a NaN times 0 is NaN
        return loop, (finite(info.potential), finite(info.grad_norm), ok.astype(jnp.float32))

    def sample_fn(carry, epoch, chain_keys, data):
        n_train = data["x"].shape[0]
        keys = jax.vmap(lambda key: jax.random.split(jax.random.fold_in(key, epoch)))(chain_keys)
        # Each chain's own shuffle; the last n_train % b examples of the permutation are dropped.
        order = jax.vmap(lambda key: jax.random.permutation(key, n_train)[: steps * b])(keys[:, 0])
        step_keys = jax.vmap(lambda key: jax.random.split(key, steps))(keys[:, 1])
        k = order.shape[0]
        buffer = (
            jax.tree.map(lambda p: jnp.zeros((slots, *p.shape), p.dtype), carry.state.params),
            jnp.full((slots,), -1, jnp.int32),
            jnp.zeros((slots, k), bool),
        )
        inputs = (
            jnp.swapaxes(order.reshape(k, steps, b), 0, 1),
            jnp.swapaxes(step_keys, 0, 1),
            epoch * steps + jnp.arange(steps, dtype=jnp.int32),
        )
        (carry, buffer, _), (potential, grad_norm, w) = jax.lax.scan(
            partial(step_fn, data), (carry, buffer, jnp.zeros((), jnp.int32)), inputs
        )
        count = jnp.maximum(jnp.sum(w), 1.0)
        return carry, Sampled(jnp.sum(potential) / count, jnp.sum(grad_norm) / count, *buffer)

    return sample_fn


def _score_function(
    experiment: Experiment,
    ensemble: tuple[Callable, ...],
    curvature: bool,
    curvature_points: int,
) -> Callable:
    """The scoring half: ``(carry, Sampled, curvature_keys, data) -> (carry, scores)``.

    Folds the epoch's valid samples into the ensembles (one slot after the other, all chains at
    once; unused slots are skipped) and returns the ensemble scores so far.
    """
    _, ens_update, ens_scores, ens_merge = ensemble
    predict = _per_point(experiment.kind, experiment.predict_fn)
    nll = _nll_fn(experiment.kind, predict)

    def score_sample(params, ensembles, key, data):
        """One chain's sample: its ensembles updated, and its mean curvature (or 0)."""
        new = {
            name: ens_update(ensembles[name], _chunked(partial(predict, params), x, EVAL_BATCH), y)
            for name, (x, y) in data["eval"].items()
        }
        if not curvature:
            return new, jnp.zeros((), jnp.float32)
        x, y = (a[:curvature_points] for a in data["eval"]["test"])
        return new, jnp.mean(evaluation.curvature(key, partial(nll, params), x, y)).astype(
            jnp.float32
        )

    def fold(curvature_keys, data, carry, slot):
        params, s, valid = slot
        keys = jax.vmap(jax.random.fold_in, (0, None))(curvature_keys, s)
        ensembles, c = jax.vmap(score_sample, (0, 0, 0, None))(params, carry.ensembles, keys, data)
        return carry._replace(
            ensembles=_select(valid, ensembles, carry.ensembles),
            curvature_sum=carry.curvature_sum + jnp.where(valid, c, 0.0),
        )

    def score_fn(carry, sampled, curvature_keys, data):
        def body(carry, slot):
            # The predicate is per slot, not per chain: unused slots skip the evaluation.
            used = slot[1] >= 0
            return jax.lax.cond(
                used, partial(fold, curvature_keys, data), lambda c, _: c, carry, slot
            ), None

        slots = (sampled.samples, sampled.sample_steps, sampled.sample_valid)
        carry, _ = jax.lax.scan(body, carry, slots)
        scores = {
            f"{name}_{score}": value
            for name, (_, y) in data["eval"].items()
            for score, value in ens_scores(ens_merge(carry.ensembles[name]), y).items()
        }
        return carry, scores

    return score_fn


def _record(
    epoch: int,
    steps: int,
    carry: Carry,
    previous: int,
    sampled: Sampled,
    scores: dict[str, jax.Array],
    seconds: dict[str, float],
    curvature: bool,
) -> dict[str, Any]:
    samples = int(np.sum(np.asarray(carry.samples)))
    record = {
        "epoch": epoch + 1,
        "steps": (epoch + 1) * steps,
        "samples": samples,
        "samples_in_epoch": samples - previous,
        "potential": float(sampled.potential),
        "grad_norm": float(sampled.grad_norm),
        # An empty ensemble has no scores (its "accuracy" would be that of argmax over NaNs).
        **{name: float(value) if samples else math.nan for name, value in scores.items()},
        **seconds,
    }
    if curvature:
        total = float(np.sum(np.asarray(carry.curvature_sum)))
        record["curvature"] = total / samples if samples else math.nan
    return record


def _divergence_message(carry: Carry, names: list[str], steps: int, out: Path | None) -> str:
    bad = np.asarray(carry.diverged_step)
    chains = np.flatnonzero(bad >= 0)
    first = int(chains[np.argmin(bad[chains])])
    step = int(bad[first])
    leaf = int(np.asarray(carry.diverged_leaf)[first])
    name = names[leaf] if 0 <= leaf < len(names) else "?"
    where = f" Results so far are in {out}." if out is not None else ""
    return (
        f"chain {first} diverged at epoch {step // steps + 1}, step {step} "
        f"(step {step % steps} of the epoch): NaN/inf in parameter {name}"
        f"{f' ({len(chains)} chains diverged)' if len(chains) > 1 else ''}. The run stopped after "
        "that epoch; samples before the divergence are in the ensemble, none after it."
        + where
        + " Try a smaller learning rate (sampler.learning_rate), a larger eps for an adaptive "
        "metric, or sampler.max_drift_norm."
    )


def _summary(
    status: Status,
    message: str,
    records: list[dict[str, Any]],
    compile_s: float,
    schedule: Schedule,
    steps: int,
    experiment: Experiment,
) -> dict[str, Any]:
    def median(key: str) -> float | None:
        return float(np.median([r[key] for r in records])) if records else None

    return {
        "status": status,
        "message": message,
        "epochs_completed": len(records),
        "steps_per_epoch": steps,
        "schedule": vars(schedule),
        "compile_s": compile_s,
        "seconds_per_epoch": median("epoch_s"),
        "sampler_seconds_per_epoch": median("sample_s"),
        "eval_seconds_per_epoch": median("eval_s"),
        "cpu_seconds_per_epoch": median("epoch_cpu_s"),
        "final": records[-1] if records else None,
        "meta": dict(experiment.meta),
    }


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

    See the module docstring for the scheme. Files written to ``out`` (if given): ``metrics.jsonl``
    (one JSON line per epoch, appended as each completes) and ``summary.json`` (also after a
    divergence or an interruption); with ``save_samples``, ``samples/epoch_EEEE.npz``.

    Each record has ``epoch`` (from 1), ``steps`` and ``samples`` so far (over all chains),
    ``samples_in_epoch``, ``potential`` and ``grad_norm`` (means over the epoch), the scores
    ``<set>_<score>`` of the ensemble so far, ``epoch_s`` (wall time of the epoch, evaluation of
    its samples included) = ``sample_s`` (the sampling scan) + ``eval_s`` (scoring the epoch's
    samples), ``epoch_cpu_s`` (the CPU time the process used meanwhile, over all cores: on a
    shared machine the ratio of two metrics' CPU times is steadier than that of their wall times)
    and, with ``curvature``, ``curvature``. The summary adds ``compile_s`` and the medians over
    epochs ``seconds_per_epoch``, ``sampler_seconds_per_epoch`` and ``eval_seconds_per_epoch``.

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
    x_train, y_train = (jnp.asarray(a) for a in experiment.train)
    steps = x_train.shape[0] // schedule.batch_size
    if steps < 1:
        raise ValueError(
            f"batch_size {schedule.batch_size} is larger than the training set "
            f"({x_train.shape[0]} examples)"
        )
    out = None if out is None else Path(out)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.jsonl").write_text("")
    data = {
        "x": x_train,
        "y": y_train,
        "eval": {
            name: (jnp.asarray(x), jnp.asarray(y))
            for name, (x, y) in experiment.eval_sets.items()
            if len(x)
        },
    }
    k = schedule.chains
    init_root, chain_root, curvature_root = jax.random.split(jax.random.key(schedule.seed), 3)
    chain_keys = jax.random.split(chain_root, k)
    curvature_keys = jax.random.split(curvature_root, k)
    params = jax.vmap(experiment.init_fn)(jax.random.split(init_root, k))
    one_chain = jax.tree.map(lambda a: a[0], params)
    num_classes = None
    if experiment.kind == "classification":
        logits = jax.eval_shape(experiment.predict_fn, one_chain, x_train[:1])
        num_classes = int(logits.shape[-1])
    ensemble = _ensemble_ops(experiment.kind, num_classes)
    carry = Carry(
        state=jax.vmap(experiment.sampler.init)(params),
        ensembles={
            name: jax.vmap(lambda _, n=x.shape[0]: ensemble[0](n))(jnp.arange(k))
            for name, (x, _) in data["eval"].items()
        },
        samples=jnp.zeros((k,), jnp.int32),
        curvature_sum=jnp.zeros((k,), jnp.float32),
        diverged_step=jnp.full((k,), -1, jnp.int32),
        diverged_leaf=jnp.full((k,), -1, jnp.int32),
    )
    slots = math.ceil(steps / schedule.thin) + 1
    buffer_bytes = slots * sum(x.nbytes for x in jax.tree.leaves(params))
    if buffer_bytes > BUFFER_WARN_BYTES:
        warnings.warn(
            f"the epoch's sample buffer takes {buffer_bytes / 2**30:.1f} GiB ({slots} slots x "
            f"{k} chain(s) x the parameters); a larger run.thin makes it smaller",
            stacklevel=2,
        )
    sample_fn = _sample_function(experiment, schedule, steps, freeze=False)
    frozen_sample = None  # compiled on the first divergence
    score_fn = _score_function(experiment, ensemble, curvature, curvature_points)
    names = leaf_names(one_chain)
    status: Status = "completed"
    message = ""
    records: list[dict[str, Any]] = []
    compile_s = math.nan
    bar = _progress(schedule.epochs, progress)
    with _single_threaded_blas(), bar:
        task = bar.add_task(f"{label} (compiling)", total=schedule.epochs * steps, epoch=0)
        try:
            start = time.perf_counter()
            epoch0 = jnp.zeros((), jnp.int32)
            sample = jax.jit(sample_fn).lower(carry, epoch0, chain_keys, data).compile()
            score = jax.jit(score_fn).lower(*sample.out_info, curvature_keys, data).compile()
            compile_s = time.perf_counter() - start
            bar.reset(task, description=label, epoch=0)
            for epoch in range(schedule.epochs):
                start, cpu = time.perf_counter(), time.process_time()
                sampled_carry, sampled = jax.block_until_ready(
                    sample(carry, jnp.int32(epoch), chain_keys, data)
                )
                middle = time.perf_counter()
                if np.any(np.asarray(sampled_carry.diverged_step) >= 0):
                    # Again with the last finite state kept (the run stops after this epoch).
                    if frozen_sample is None:
                        frozen_sample = jax.jit(
                            _sample_function(experiment, schedule, steps, freeze=True)
                        )
                    sampled_carry, sampled = jax.block_until_ready(
                        frozen_sample(carry, jnp.int32(epoch), chain_keys, data)
                    )
                scoring = time.perf_counter()  # the re-run is not counted
                new_carry, scores = jax.block_until_ready(
                    score(sampled_carry, sampled, curvature_keys, data)
                )
                end = time.perf_counter()
                seconds = {
                    "epoch_s": (middle - start) + (end - scoring),
                    "sample_s": middle - start,
                    "eval_s": end - scoring,
                    "epoch_cpu_s": time.process_time() - cpu,
                }
                previous = records[-1]["samples"] if records else 0
                carry = new_carry
                records.append(
                    _record(epoch, steps, carry, previous, sampled, scores, seconds, curvature)
                )
                if out is not None:
                    with (out / "metrics.jsonl").open("a") as f:
                        f.write(json.dumps(_json_safe(records[-1]), allow_nan=False) + "\n")
                    if save_samples:
                        _write_samples(out / "samples", epoch + 1, sampled)
                bar.update(task, completed=(epoch + 1) * steps, epoch=epoch + 1)
                if np.any(np.asarray(carry.diverged_step) >= 0):
                    status = "diverged"
                    message = _divergence_message(carry, names, steps, out)
                    break
        except KeyboardInterrupt:
            status = "interrupted"
            message = f"interrupted after epoch {len(records)}" + (
                f"; partial results in {out}" if out is not None else ""
            )
    if status == "completed":
        message = f"completed {len(records)} epochs" + (f"; results in {out}" if out else "")
    summary = _summary(status, message, records, compile_s, schedule, steps, experiment)
    if out is not None:
        write_json(out / "summary.json", summary)
    return Result(
        status, message, records, compile_s, carry.state if records else None, out, summary
    )


# --------------------------------------------------------------------------------------------
# From a configuration


def build_experiment(config: Config) -> Experiment:
    """Load the data and build the model, prior, potential and sampler of a configuration.

    The potential is ``−mean log p(y|x, θ) − log p(θ)/N`` (:func:`sgrld.potential`) with ``N``
    the training-set size; parameters are ``{"net": ..., "prior": ...}`` initialised per chain by
    :func:`sgrld.bnn.init_params` (He initialisation) and ``prior.init``.

    Classification uses the categorical likelihood. Regression (the UCI sets) uses the Gaussian
    likelihood on the standardised targets (:func:`sgrld.data.load_dataset`), with σ fixed at
    ``likelihood.noise_std / target_std`` or sampled as ``params["likelihood"]["log_noise"]``
    (flat prior on ``log σ``, started at σ = 1, the targets' std); the predictions are mapped
    back to the targets' own units, so RMSE and NLL are reported in those units, as in the
    literature.

    Args:
        config: a validated configuration.

    Returns:
        The :class:`Experiment`, with ``meta = {"config": config.to_dict()}``.

    Raises:
        sgrld.data.DataError: if the data set's files are missing or corrupt.
        sgrld.config.ConfigError: if ``data.split`` or ``data.validation_size`` is out of the
            range the files allow.
    """
    d, m = config.data, config.model
    try:
        ds = load_dataset(
            d.name,
            d.data_dir,
            validation_size=d.validation_size,
            split=d.split,
            verify=None if d.verify_checksums else False,
        )
    except DataError:
        raise
    except ValueError as err:  # a split or validation size the files do not allow
        raise ConfigError(f"[data]: {err}") from None
    x_train, y_train = ds.x_train[: d.train_size], ds.y_train[: d.train_size]
    regression = DATASETS[d.name].regression
    if m.kind == "cnn":
        model = bnn.CNN(
            dense_features=m.widths,
            num_outputs=ds.num_classes,
            image_shape=DATASETS[d.name].image_shape,
        )
    else:
        model = bnn.MLP(features=m.widths, num_outputs=1 if regression else ds.num_classes)
    apply = bnn.apply_fn(model)
    prior = PRIORS[config.prior.kind](**config.prior.params)
    s = config.sampler
    noise_std = config.likelihood.noise_std
    if regression:
        fixed = None if noise_std is None else noise_std / ds.target_std
        loglik = bnn.likelihoods.gaussian(apply, fixed)
    else:
        loglik = bnn.likelihoods.categorical(apply)
    potential = sgrld.potential(loglik, bnn.logprior_fn(prior), len(x_train))
    sampler = sgrld.sgrld(
        potential,
        METRICS[s.metric](**s.metric_params),
        s.learning_rate,
        len(x_train),
        s.temperature,
        s.adapt_until,
        correction=None if s.correction == "none" else s.correction,
        correction_scale=s.correction_scale,
        max_drift_norm=s.max_drift_norm,
    )
    input_shape = (1, *x_train.shape[1:])

    def init_fn(key):
        net = bnn.init_params(model, key, input_shape)
        params = {"net": net, "prior": prior.init(net)}
        if regression and noise_std is None:
            params["likelihood"] = bnn.likelihoods.init_likelihood_params()
        return params

    eval_sets = {"test": (ds.x_test, ds.y_test), "val": (ds.x_val, ds.y_val)}
    if not regression:
        return Experiment(
            sampler=sampler,
            init_fn=init_fn,
            predict_fn=lambda params, x: apply(params["net"], x),
            train=(x_train, y_train),
            eval_sets=eval_sets,
            meta={"config": config.to_dict()},
        )
    shift, scale = ds.target_mean, ds.target_std

    def predict_fn(params, x):  # in the targets' own units
        sigma = fixed if noise_std is not None else jnp.exp(params["likelihood"]["log_noise"])
        return apply(params["net"], x)[:, 0] * scale + shift, sigma * scale

    return Experiment(
        sampler=sampler,
        init_fn=init_fn,
        predict_fn=predict_fn,
        train=(x_train, y_train),
        eval_sets={name: (x, y * scale + shift) for name, (x, y) in eval_sets.items()},
        kind="regression",
        meta={"config": config.to_dict()},
    )


def schedule_of(config: Config) -> Schedule:
    """The :class:`Schedule` of a configuration's ``[data]`` and ``[run]`` sections."""
    r = config.run
    return Schedule(r.epochs, config.data.batch_size, r.burn_in, r.thin, r.chains, r.seed)


def run_config(
    config: Config,
    out: str | Path | None | Literal["config"] = "config",
    *,
    progress: bool = False,
    label: str | None = None,
) -> Result:
    """Build and run the experiment of a configuration.

    Writes the resolved configuration (``config.toml``, ``config.json``) and the files of
    :func:`run` into the results folder.

    Args:
        config: a validated configuration.
        out: the results folder; ``"config"`` uses ``config.out.folder``; ``None`` writes nothing
            (then ``run.save_samples`` must be false).
        progress: show a progress bar.
        label: the progress bar's description (default: the metric's name).

    Returns:
        The :class:`Result` of :func:`run`.
    """
    folder = Path(config.out.folder) if out == "config" else out
    experiment = build_experiment(config)
    if folder is not None:
        write_config(config, folder)
    return run(
        experiment,
        schedule_of(config),
        out=folder,
        save_samples=config.run.save_samples,
        curvature=config.run.curvature,
        progress=progress,
        label=label or config.sampler.metric,
    )


# --------------------------------------------------------------------------------------------
# Tables


def format_value(value: Any, spec: str = ".4f") -> str:
    """``format(value, spec)``, or "—" for a missing or NaN value.

    Example:
        >>> format_value(0.98765), format_value(None)
        ('0.9877', '—')
    """
    return (
        "—"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, spec)
    )


def console() -> Console:
    """A rich console, 200 columns wide when the output is not a terminal (a log, a pipe)."""
    terminal = Console()
    return terminal if terminal.is_terminal else Console(width=200)


def summary_row(result: Result, **first: str) -> dict[str, str]:
    """One table row of a run: its final test (and validation) scores and its timing.

    Args:
        result: the run's :class:`Result`.
        **first: the first columns, e.g. ``metric="Monge"``.

    Returns:
        Column name -> formatted value, in display order.
    """
    final = result.records[-1] if result.records else {}
    if "test_rmse" in final:
        scores = {"test RMSE": final.get("test_rmse"), "test NLL": final.get("test_nll")}
    else:
        scores = {
            "test log p(y|X)": final.get("test_log_likelihood"),
            "test acc.": final.get("test_accuracy"),
            "test ECE": final.get("test_ece"),
            "val log p(y|X)": final.get("val_log_likelihood"),
        }
    return {
        **first,
        **{name: format_value(value) for name, value in scores.items()},
        "samples": str(final.get("samples", 0)),
        "s/epoch sampling": format_value(result.summary["sampler_seconds_per_epoch"], ".2f"),
        "s/epoch scoring": format_value(result.summary["eval_seconds_per_epoch"], ".2f"),
        "compile s": format_value(result.compile_s, ".1f"),
        "status": result.status,
    }


def results_table(title: str, rows: list[dict[str, str]]) -> tuple[Any, str]:
    """A rich table (to print) and the same table in Markdown (to save).

    Args:
        title: the caption.
        rows: formatted rows, all with the keys of the first row (its columns, in order).

    Returns:
        ``(rich.table.Table, markdown)``.

    Example:
        >>> print(results_table("t", [{"a": "1", "b": "2"}])[1])
        **t**
        <BLANKLINE>
        | a | b |
        |---|---|
        | 1 | 2 |
        <BLANKLINE>
    """
    from rich.table import Table

    columns = list(rows[0]) if rows else []
    table = Table(title=title)
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*(row[c] for c in columns))
    cells = lambda values: "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"
    lines = [f"**{title}**", "", cells(columns), "|" + "|".join("---" for _ in columns) + "|"]
    lines += [cells([row[c] for c in columns]) for row in rows]
    return table, "\n".join(lines) + "\n"
