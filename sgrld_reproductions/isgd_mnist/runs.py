"""One run of ``sgrld reproduce isgd-mnist`` (:mod:`sgrld_reproductions.isgd_mnist`, which
describes the experiment): a method at one learning rate and replicate on MNIST's ConvNet, on the
experiment runner, with its test and validation scores.
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
from sgrld_app.api import (
    PRIORS,
    Config,
    ConfigError,
    build_experiment,
    finite,
    load_config,
    run_plan_of,
)
from sgrld_reproductions.scaffolding import (
    ISGDMethod,
    data_overrides,
    run_summary,
    sampler_overrides,
)

BATCH_SIZE = 100


DROPOUT_RATE = 0.5
"""MC dropout's p on the inputs of every dense layer (Gal & Ghahramani's LeNet setting)."""


class Plan(NamedTuple):
    """What every run does.

    Attributes:
      epochs: passes over the training images.
      samples: the ensemble size S.
      train_size: use the first this many training images (None: all but the validation part).
      validation_size: training images held out to choose the learning rate.
      widths: the ConvNet's dense layers.
      data_dir: the MNIST folder (None: the default).
      seed: replicate r runs with ``seed + r``.
      verify: check the files' SHA-256.
    """

    epochs: int
    samples: int
    train_size: int | None
    validation_size: int
    widths: tuple[int, ...]
    data_dir: str | None
    seed: int
    verify: bool = True


@functools.cache
def _train_rows(data_dir: str | None, validation_size: int, verify: bool) -> int:
    ds = load_dataset(
        "mnist", data_dir, validation_size=validation_size, verify=None if verify else False
    )
    return len(ds.x_train)


def train_size(plan: Plan) -> int:
    """The number of training images a run uses (after the validation part is held out)."""
    rows = _train_rows(plan.data_dir, plan.validation_size, plan.verify)
    return min(rows, plan.train_size or rows)


def config_of(method: ISGDMethod, lr: float | None, plan: Plan, replicate: int) -> Config:
    """The configuration of one run: MNIST, the ConvNet, the Gaussian prior, batches of
    :data:`BATCH_SIZE`, and burn-in and thinning that keep S = ``plan.samples`` states of the
    second half of the run (it reads the training-set size from the files; fewer updates than S
    are refused)."""
    common = [
        "data.name=mnist", f"data.validation_size={plan.validation_size}",
        f"data.batch_size={BATCH_SIZE}", "model.kind=cnn", f"model.widths={list(plan.widths)}",
        "prior.kind=gaussian", f"run.seed={plan.seed + replicate}", f"run.epochs={plan.epochs}",
    ]  # fmt: skip
    common += data_overrides(plan.data_dir, plan.train_size, plan.verify)
    total = plan.epochs * (train_size(plan) // BATCH_SIZE)
    if total < plan.samples:  # the same for every run: refused before the first
        raise ConfigError(
            f"{plan.epochs} epoch(s) of {train_size(plan):,} training images make {total} "
            f"updates of {BATCH_SIZE}, below the ensemble size S = {plan.samples} (--samples): "
            "raise --epochs or --train-size"
        )
    thin = max(total // (2 * plan.samples), 1)
    burn_in = max(total - plan.samples * thin, 0)
    run = [f"run.burn_in={burn_in}", f"run.thin={thin}"]
    return load_config(None, common + run + sampler_overrides(method, lr, burn_in))


def baseline(
    method: ISGDMethod, config: Config, lr: float, num_data: int, samples: int
) -> tuple[Any, app.RunPlan]:
    """``(potential, N) -> sampler`` of the :mod:`sgrld.samplers.baselines` method (SGD steps on the
    MAP potential of ``config``, its Gaussian prior as weight decay) and its runner schedule.

    SGD keeps its last state, vSGD the states the samplers keep; SWAG and MC dropout train for all
    but the last ``samples`` steps and draw one network in each of those (SWAG collecting from
    half the training, about ``samples`` iterates, K = min(20, collections)).
    """
    s = run_plan_of(config, num_data)
    total = s.epochs * (num_data // s.batch_size)
    train = total - samples
    draws = dataclasses.replace(s, burn_in=train, thin=1)
    if method.kind == "dropout":
        logprior = bnn.logprior_fn(PRIORS[config.prior.kind](**config.prior.params))
        model = dropout.DropoutCNN(dense_features=tuple(config.model.widths), rate=DROPOUT_RATE)

        def mc_dropout(potential, n):
            make_loss = lambda apply: sgrld.potential(
                bnn.likelihoods.categorical(apply), logprior, n
            )
            loss = dropout.dropout_loss(make_loss, model)
            return dropout.mc_dropout(
                loss, lr, train_steps=train, rate=DROPOUT_RATE, drop_inputs=True
            )

        return mc_dropout, draws
    if method.kind == "swag":
        start = train // 2
        every = max((train - start) // samples, 1)
        rank = min(20, (train - start) // every)
        if rank < 2:
            raise ValueError(
                f"isgd-mnist: SWAG collects {rank} iterate(s) in its {train} training steps (the "
                f"run's {total} less S = {samples}) and needs 2: raise --epochs or --train-size, "
                "or lower --samples"
            )
        return lambda potential, n: baselines.swag(
            potential, lr, train_steps=train, swa_start=start, collect_every=every, rank=rank
        ), draws
    if method.kind == "vsgd":
        return lambda potential, n: baselines.vsgd(potential, lr), s
    return lambda potential, n: baselines.sgd(potential, lr), dataclasses.replace(
        s, burn_in=0, thin=total
    )


def run(method: ISGDMethod, lr: float | None, plan: Plan, replicate: int) -> dict[str, Any]:
    """Run ``method`` at ``lr`` (replicate ``replicate``) and score its ensemble.

    Returns:
      A JSON-ready dict: ``status`` (``"completed"``, ``"diverged"`` or ``"interrupted"``),
      ``message``, ``seconds`` (compilation included), ``samples``, ``test_images``, and the
      ensemble's ``test_accuracy``, ``test_log_likelihood`` (mean), ``test_ece``,
      ``val_accuracy`` and ``val_log_likelihood`` (None where missing).
    """
    start = time.perf_counter()
    config = config_of(method, lr, plan, replicate)
    schedule, build = run_plan_of(config, train_size(plan)), None
    if method.kind != "sampler":
        build, schedule = baseline(method, config, lr, train_size(plan), plan.samples)
    experiment = build_experiment(config, sampler=build)
    result = app.run(experiment, schedule)
    final = result.records[-1] if result.records else {}
    # select() minimises its score: the validation NLL
    val_nll = finite(-final.get("val_log_likelihood", math.nan))
    keys = ("test_accuracy", "test_log_likelihood", "test_ece", "val_accuracy")
    test_images = len(experiment.eval_sets["test"][1])
    return run_summary(result, start, keys, test_images=test_images) | {"val_nll": val_nll}
