"""One run of the UCI regression experiment of Franzese et al. (2021, App. C.1): a method at one
learning rate on one data set and split, on the experiment runner, with its test and validation
RMSE and NLL.

Used by ``sgrld reproduce isgd-uci`` (:mod:`sgrld_reproductions.isgd_uci`, which describes the
experiment). Every method shares the configuration of :func:`config_of` (data, network, prior,
Gaussian likelihood with sampled noise, batch size, seed); the samplers run it as it is
(:func:`sgrld_app.api.run_config`), the baselines of :mod:`sgrld.samplers.baselines`
replace its sampler by theirs in the same :class:`~sgrld_app.api.Experiment`, so every row is
scored by the runner's online ensemble, in the targets' units.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any, NamedTuple

import sgrld
from sgrld import bnn
from sgrld.bnn import dropout
from sgrld.data import load_dataset
from sgrld.samplers import baselines
from sgrld_app import api as app
from sgrld_app.api import PRIORS, Config, build_experiment, load_config, run_config, run_plan_of
from sgrld_reproductions.scaffolding import (
    ISGDMethod,
    data_overrides,
    run_summary,
    sampler_overrides,
)

BATCH_SIZE = 32
DROPOUT_RATE = 0.05
"""MC dropout's p, on the inputs and the hidden layer (Gal & Ghahramani tuned it in {0.005, 0.01,
0.05, 0.1}; one value here, so that only the learning rate is tuned, as for every method)."""


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
    method: ISGDMethod, dataset: str, split: int, lr: float | None, plan: Plan, validation_size: int
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
    method: ISGDMethod, config: Config, lr: float, num_data: int, samples: int
) -> tuple[sgrld.Sampler, app.RunPlan]:
    """The :mod:`sgrld.samplers.baselines` sampler of ``method`` and its runner schedule.

    Every baseline takes SGD steps on the MAP potential of ``config`` (its Gaussian prior is the
    weight decay; the noise level is learnt). SGD keeps its last state; vSGD the states the
    samplers keep (burn-in and thinning of ``config``); SWAG and MC dropout train for all but the
    last ``samples`` steps and draw one network in each of those (SWAG: collecting from half the
    training, about ``samples`` iterates, K = 20).
    """
    s = run_plan_of(config, num_data)
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
    method: ISGDMethod, dataset: str, split: int, lr: float | None, plan: Plan, validation_size: int
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
        result = app.run(dataclasses.replace(experiment, sampler=sampler), schedule)
    return run_summary(result, start, ("test_rmse", "test_nll", "val_rmse", "val_nll"))
