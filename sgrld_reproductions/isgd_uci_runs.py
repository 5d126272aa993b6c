"""One run of the UCI regression experiment of Franzese et al. (2021, App. C.1): a method at one
learning rate on one data set and split, on the experiment runner, with its test and validation
RMSE and NLL.

Used by ``sgrld reproduce isgd-uci`` (:mod:`sgrld_reproductions.isgd_uci`, which describes the
experiment). Every method shares the configuration of :func:`config_of` (data, network, prior,
Gaussian likelihood with sampled noise, batch size, seed); the samplers run it as it is
(:func:`sgrld.run.from_config.run_config`), the baselines of :mod:`sgrld.samplers.baselines` replace its sampler
by theirs in the same :class:`~sgrld.run.runner.Experiment`, so every row is scored by the runner's
online ensemble, in the targets' units.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import sgrld
from sgrld import bnn
from sgrld.bnn import dropout
from sgrld.data import load_dataset
from sgrld.run import runner
from sgrld.run.config import PRIORS, Config, load_config
from sgrld.run.from_config import build_experiment, run_config, schedule_of
from sgrld.run.report import finite
from sgrld.samplers import baselines
from sgrld_reproductions.reproduction import data_overrides

BATCH_SIZE = 32
DROPOUT_RATE = 0.05
"""MC dropout's p, on the inputs and the hidden layer (Gal & Ghahramani tuned it in {0.005, 0.01,
0.05, 0.1}; one value here, so that only the learning rate is tuned, as for every method)."""


class Method(NamedTuple):
    """A row of the table.

    Attributes:
      key: its name on the command line.
      label: its name in the table.
      paper: its row in Franzese et al.'s tables (None: not there).
      kind: ``"sampler"`` (a configuration's ``[sampler]``), ``"sgd"``, ``"vsgd"``, ``"swag"`` or
        ``"dropout"`` (:mod:`sgrld.samplers.baselines`).
      sampler: the ``--set`` overrides of ``[sampler]`` (samplers only).
      grid: the learning rates tried (none: i-SGD's λ rule, which has no learning rate).
    """

    key: str
    label: str
    paper: str | None
    kind: str
    sampler: tuple[str, ...] = ()
    grid: tuple[float, ...] = (0.003, 0.01, 0.03)

    @property
    def tuned(self) -> bool:
        """Whether a learning rate is chosen (on validation data)."""
        return bool(self.grid)


SMALL = (0.001, 0.003, 0.01)
"""The grid of SGHMC (friction 0.1: steps about 10x SGLD's) and pSGLD (G⁻¹ = 1/(√V + eps) > 1)."""
METHODS = (
    Method("sgld", "SGLD", "sgld", "sampler", ("sampler.kind=sgrld", "sampler.metric=identity")),
    Method(
        "isgd", "i-SGD", "i-sgd", "sampler", ("sampler.kind=isgd", "sampler.learning_rate=rule"), ()
    ),
    Method("sghmc", "SGHMC", "sghmc", "sampler", ("sampler.kind=sghmc",), SMALL),
    Method("vsgd", "vSGD", "vsgd", "vsgd"),
    Method("dropout", "MC dropout", "drop", "dropout"),
    Method("swag", "SWAG", None, "swag"),
    Method("sgd", "SGD", "Baseline", "sgd"),
    Method(
        "rmsprop", "RMSprop", None, "sampler",
        ("sampler.kind=sgrld", "sampler.metric=rmsprop", "sampler.metric_params.eps=1e-4"),
        SMALL,
    ),
    Method(
        "rmsprop-gamma", "RMSprop + Γ", None, "sampler",
        (
            "sampler.kind=sgrld", "sampler.metric=rmsprop", "sampler.metric_params.eps=1e-4",
            "sampler.correction=hutchinson",
        ),
        SMALL,
    ),
)  # fmt: skip
"""The methods, in the table's order: the paper's and our Γ-corrected RMSprop (pSGLD + Γ)."""


class Plan(NamedTuple):
    """How long every run lasts and what it keeps.

    Attributes:
      steps: updates per run (at least; runs last whole epochs).
      samples: the ensemble size S: the samplers and vSGD keep every ``steps/(2S)``-th state of the
        second half, SWAG and MC dropout draw S networks after ``steps − S`` updates.
      data_dir: the data folder.
      seed: the base seed (split k runs with ``seed + k``).
      verify: check the files' SHA-256 (False: for files of one's own in the published layout).
    """

    steps: int
    samples: int
    data_dir: str | None
    seed: int
    verify: bool = True


def width(dataset: str) -> int:
    """The hidden layer's width: 100 for protein, 50 for the others (the paper's App. C.1)."""
    return 100 if dataset == "uci_protein" else 50


def config_of(
    method: Method, dataset: str, split: int, lr: float | None, plan: Plan, validation_size: int
) -> Config:
    """The configuration of one run: the data set's split (``validation_size`` training rows held
    out), one hidden layer, the Gaussian prior, sampled noise, batches of :data:`BATCH_SIZE`, and
    ``run.epochs`` so that the run makes at least ``plan.steps`` updates; burn-in and thinning keep
    S = ``plan.samples`` states of the second half (the samplers' and vSGD's ensemble)."""
    common = [
        f"data.name={dataset}", f"data.split={split}", f"data.validation_size={validation_size}",
        f"data.batch_size={BATCH_SIZE}", "model.kind=regression_mlp",
        f"model.widths=[{width(dataset)}]", "prior.kind=gaussian", f"run.seed={plan.seed + split}",
    ]  # fmt: skip
    common += data_overrides(plan.data_dir, verify=plan.verify)
    per_epoch = max(train_size(dataset, split, plan) - validation_size, 0) // BATCH_SIZE
    epochs = math.ceil(plan.steps / max(per_epoch, 1))
    total = epochs * per_epoch
    thin = max(total // (2 * plan.samples), 1)
    burn_in = total - plan.samples * thin
    run = [f"run.epochs={epochs}", f"run.burn_in={burn_in}", f"run.thin={thin}"]
    return load_config(None, common + run + sampler_overrides(method, lr, burn_in))


ISGD_NOISE_WINDOW = 1000
"""i-SGD's ``noise_window`` in the reproductions: λ from the gradient noise of about the last
1,000 steps of a warm-up through the burn-in."""


def sampler_overrides(method: Method, lr: float | None, burn_in: int) -> list[str]:
    """The ``[sampler]`` overrides of a run: the method's, its learning rate, and for i-SGD a
    warm-up through the ``burn_in`` with a noise window of :data:`ISGD_NOISE_WINDOW`, so that its
    λ is that of the gradient noise where the chain samples (:mod:`sgrld.samplers.isgd`: λ fixed after
    the first 100 steps clipped 15% of kin8nm's coordinates, this 0.4%).

    Example:
      >>> isgd = next(m for m in METHODS if m.key == "isgd")
      >>> sampler_overrides(isgd, None, 5000)[2:]
      ['sampler.warmup=5000', 'sampler.noise_window=1000']
    """
    sampler = list(method.sampler)
    if lr is not None:
        sampler.append(f"sampler.learning_rate={lr}")
    if "sampler.kind=isgd" in method.sampler:
        sampler += [
            f"sampler.warmup={max(burn_in, 1)}",
            f"sampler.noise_window={ISGD_NOISE_WINDOW}",
        ]
    return sampler


def train_size(dataset: str, split: int, plan: Plan) -> int:
    """The number of rows of a split's training part."""
    return _train_rows(dataset, split, plan.data_dir, plan.verify)


@functools.cache
def _train_rows(dataset: str, split: int, data_dir: str | None, verify: bool) -> int:
    ds = load_dataset(
        dataset, data_dir, split=split, validation_size=0, verify=None if verify else False
    )
    return len(ds.x_train)


def baseline(
    method: Method, config: Config, lr: float, num_data: int, samples: int
) -> tuple[sgrld.Sampler, runner.RunPlan]:
    """The :mod:`sgrld.samplers.baselines` sampler of ``method`` and its runner schedule.

    Every baseline takes SGD steps on the MAP potential of ``config`` (its Gaussian prior is the
    weight decay; the noise level is learnt). SGD keeps its last state; vSGD the states the
    samplers keep (burn-in and thinning of ``config``); SWAG and MC dropout train for all but the
    last ``samples`` steps and draw one network in each of those (SWAG: collecting from half the
    training, about ``samples`` iterates, K = 20).
    """
    s = schedule_of(config)
    total = s.epochs * (num_data // s.batch_size)
    train = total - samples
    widths = tuple(config.model.widths)
    logprior = bnn.logprior_fn(PRIORS[config.prior.kind](**config.prior.params))
    make_loss = lambda apply: sgrld.potential(bnn.likelihoods.gaussian(apply), logprior, num_data)
    draws = dataclasses.replace(s, burn_in=train, thin=1)
    if method.kind == "dropout":
        model = dropout.DropoutMLP(widths, 1, DROPOUT_RATE, drop_inputs=True)
        loss = dropout.dropout_loss(make_loss, model)
        sampler = dropout.mc_dropout(
            loss, lr, train_steps=train, rate=DROPOUT_RATE, drop_inputs=True
        )
        return sampler, draws
    loss = make_loss(bnn.apply_fn(bnn.MLP(widths, 1)))
    if method.kind == "swag":
        start = train // 2
        every = max((train - start) // samples, 1)
        sampler = baselines.swag(loss, lr, train_steps=train, swa_start=start, collect_every=every)
        return sampler, draws
    if method.kind == "vsgd":
        return baselines.vsgd(loss, lr), s
    return baselines.sgd(loss, lr), dataclasses.replace(s, burn_in=0, thin=total)


def run(
    method: Method, dataset: str, split: int, lr: float | None, plan: Plan, validation_size: int
) -> dict[str, Any]:
    """Run ``method`` at ``lr`` on a split (``validation_size`` training rows held out).

    Returns:
      A JSON-ready dict: ``status`` (``"completed"``, ``"diverged"`` or ``"interrupted"``),
      ``message``, ``seconds`` (wall time, compilation included), ``samples`` (the ensemble's
      size) and the ensemble's ``test_rmse``, ``test_nll``, ``val_rmse`` and ``val_nll`` (in the
      targets' units; None where missing).
    """
    start = time.perf_counter()
    config = config_of(method, dataset, split, lr, plan, validation_size)
    if method.kind == "sampler":
        result = run_config(config, out=None)
    else:
        experiment = build_experiment(config)
        sampler, schedule = baseline(method, config, lr, len(experiment.train[0]), plan.samples)
        result = runner.run(dataclasses.replace(experiment, sampler=sampler), schedule)
    return summary(result, start, ("test_rmse", "test_nll", "val_rmse", "val_nll"))


def summary(
    result: runner.Result, start: float, keys: Sequence[str], **extra: Any
) -> dict[str, Any]:
    """The JSON-ready account of a run: ``status``, ``message``, ``seconds`` since ``start`` (a
    :func:`time.perf_counter`), ``samples`` (the ensemble's size), ``**extra``, and the ``keys``
    of its last record (None where missing or not finite).

    Example:
      >>> done = runner.Result("completed", "done", [{"samples": 5, "test_rmse": 0.5}], 0.0,
      ...                      None, None, {})
      >>> s = summary(done, time.perf_counter(), ("test_rmse", "val_rmse"), split=3)
      >>> s["status"], s["samples"], s["split"], s["test_rmse"], s["val_rmse"]
      ('completed', 5, 3, 0.5, None)
    """
    final = result.records[-1] if result.records else {}
    return {
        "status": result.status,
        "message": result.message,
        "seconds": time.perf_counter() - start,
        "samples": final.get("samples", 0),
        **extra,
        **{key: finite(final.get(key, math.nan)) for key in keys},
    }
