"""Experiments from a configuration: the data, model, prior, potential and sampler of a
:class:`sgrld_app.config.Config` (:func:`build_experiment`), its run plan (:func:`run_plan_of`)
and the checks of its schedule; :func:`sgrld_app.launch.run_config` runs one (``sgrld run``,
``sgrld demo`` and ``sgrld reproduce mnist-mlp`` use it).

Example:
    >>> from sgrld_app.config import load_config
    >>> cfg = load_config(None, ["data.name=digits", "data.batch_size=32",
    ...     "model.widths=[16]", "prior.kind=gaussian", "sampler.learning_rate=0.05"])
    >>> experiment = build_experiment(cfg)
    >>> len(experiment.train[0]), sorted(experiment.eval_sets), experiment.kind
    (1258, ['test', 'val'], 'classification')
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sgrld import bnn
from sgrld.data import DATASETS, DataError
from sgrld.numerics.potential import Potential
from sgrld.numerics.potential import potential as make_potential
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.guarantee import (
    warn_if_adapting_on_minibatches,
    warn_if_minibatch_noise_dominates,
)
from sgrld.samplers.sampler import Sampler
from sgrld.samples.results import leaf_paths
from sgrld_app import data_and_model
from sgrld_app.config import (
    PRIORS,
    Config,
    ConfigError,
    load_config,
)
from sgrld_app.experiment import Experiment, RunPlan, first_kept_window, sample_steps
from sgrld_app.sampler_from_config import (
    check_exact_size,
    configured_sampler,
    cyclical_of,
    guarantee_of,
    searched_option,
)


def build_experiment(
    config: Config, sampler: Callable[[Potential, int], Sampler] | None = None
) -> Experiment:
    """Load the data and build the model, prior, potential and sampler of a configuration.

    The potential is ``−mean log p(y|x, θ) − log p(θ)/N`` (:func:`sgrld.potential`) with ``N``
    the training-set size; parameters are ``{"net": ..., "prior": ...}`` initialised per chain by
    :func:`sgrld.bnn.init_params` (He initialisation) and ``prior.init``.

    Classification uses the categorical likelihood, or with ``model.kind =
    "logistic_regression"`` the Bernoulli likelihood of the one logit ``z``, scored as the two
    classes' logits ``[0, z]`` (the same probabilities: softmax of ``[0, z]`` is ``(1 − σ(z),
    σ(z))``), so accuracy, NLL and ECE are those of any classifier. Regression (the UCI sets)
    uses the Gaussian likelihood on the standardised targets (:func:`sgrld.data.load_dataset`),
    with σ fixed at ``likelihood.noise_std / target_std`` or sampled as
    ``params["likelihood"]["log_noise"]`` (flat prior on ``log σ``, started at σ = 1, the
    targets' std); the predictions are mapped back to the targets' own units, so RMSE and NLL
    are reported in those units, as in the literature.

    Args:
        config: a validated configuration.
        sampler: ``(potential, N) -> sampler`` in place of the configuration's own
            (:func:`sgrld_app.sampler_from_config.sampler_of`), e.g. one with per-chain
            hyperparameters (:mod:`sgrld_app.sweep`); with it, Monge's α² is never searched.

    Returns:
        The :class:`Experiment`, with ``meta = {"config": config.to_dict(), "guarantee": ...}``
            and a data file's ``"data_file"`` (:func:`sgrld_app.data_and_model.data_file_meta`).

    Raises:
        sgrld.data.DataError: if the data set's files are missing or corrupt.
        sgrld_app.config.ConfigError: if ``data.split`` or ``data.validation_size`` is out of the
            range the files allow.
    """
    parts = _posterior(config)
    ds, regression = parts.ds, parts.regression
    x_train, y_train = parts.train
    fixed, potential = parts.fixed, parts.potential
    num_steps = config.num_steps(len(x_train))

    option = None if sampler is not None else searched_option(config.sampler)
    n = len(x_train)
    sampler_at = lambda v: configured_sampler(config, potential, n, {option[0]: v})  # noqa: E731
    init_fn = _init_fn(parts)
    check_exact_size(config, jax.eval_shape(init_fn, jax.random.key(0)))
    meta = {"config": config.to_dict(), "guarantee": guarantee_of(config, n)}
    meta.update(data_and_model.data_file_meta(config, ds))
    if option is not None:  # Monge's α², chosen beside the rate: at its first value until then
        sampler = sampler_at(option[1][0])
    else:
        sampler = (sampler or partial(configured_sampler, config))(potential, n)
    warn_if_adapting_on_minibatches(sampler.adaptation, config.data.batch_size, n)
    warn_if_minibatch_noise_dominates(sampler.adaptation, config.data.batch_size, n)
    keep = None
    if config.schedule.kind == "cyclical" and num_steps >= config.schedule.cycles:
        keep = cyclical_of(config.schedule, num_steps).keep
    common = dict(sampler=sampler, init_fn=init_fn, train=(x_train, y_train), meta=meta, keep=keep)
    if option is not None:
        guarantee_at = lambda v: guarantee_of(config, n, {option[0]: v})  # noqa: E731
        common |= dict(searched_option=option, sampler_at=sampler_at, guarantee_at=guarantee_at)
    return _experiment(ds, parts.net.evaluate, regression, fixed, **common)


class _Posterior(NamedTuple):
    """What :func:`build_experiment` and :func:`log_posterior` share: the data set, the training
    split, the network, the prior, σ (fixed, standardised; ``None``: sampled) and the potential."""

    ds: Any
    train: tuple[np.ndarray, np.ndarray]
    regression: bool
    net: data_and_model.Net
    prior: Any
    noise_std: float | None
    fixed: float | None
    potential: Potential


def _posterior(config: Config) -> _Posterior:
    """Load the data and build the model, prior, likelihood and potential of a configuration."""
    ds = data_and_model.load_data(config)
    x_train, y_train = ds.x_train[: config.data.train_size], ds.y_train[: config.data.train_size]
    regression = ds.num_classes == 0
    net = data_and_model.network(config, ds, x_train)
    apply = net.apply
    prior = PRIORS[config.prior.kind](**config.prior.params)
    noise_std = config.likelihood.noise_std
    fixed = None if noise_std is None else noise_std / ds.target_std
    if regression:
        loglik = bnn.likelihoods.gaussian(apply, fixed)
    elif config.model.kind == "logistic_regression":
        loglik = bnn.likelihoods.bernoulli(apply)
    else:
        loglik = bnn.likelihoods.categorical(apply)
    potential = make_potential(loglik, bnn.logprior_fn(prior), len(x_train))
    train = (x_train, y_train)
    return _Posterior(ds, train, regression, net, prior, noise_std, fixed, potential)


def _init_fn(parts: _Posterior) -> Callable[[jax.Array], PyTree]:
    """``key -> params`` of one chain: the network's, the prior's and a sampled σ's."""

    def init_fn(key: jax.Array) -> PyTree:
        net = parts.net.init(key)
        params = {"net": net, "prior": parts.prior.init(net)}
        if parts.regression and parts.noise_std is None:
            params["likelihood"] = bnn.likelihoods.init_likelihood_params()
        return params

    return init_fn


def log_posterior(config: Config) -> Callable[[PyTree], jax.Array]:
    """The full-batch log posterior ``log p(θ|D)`` of a configuration's run, up to a constant:
    ``params -> −N · potential(θ, (x, y))`` with the potential of :func:`build_experiment` and
    ``(x, y)`` the whole training set (``N`` examples), i.e. ``Σ_i log p(y_i|x_i, θ) + log p(θ)``.

    The ``log_prob`` that :func:`sgrld.samples.stein.ksd` takes (``sgrld diagnose`` uses it): it
    takes the parameters as the run's initialisation builds them, or as the nested dicts of a
    results folder (:func:`sgrld.load_samples`; a factory's Equinox model, say, is rebuilt from
    them). It loads the data set as :func:`build_experiment` does, so it needs the data files
    (``data.data_dir``, ``data.path``).

    Raises:
        sgrld.data.DataError: if the data set's files are missing or corrupt.
    """
    parts = _posterior(config)
    potential, batch = parts.potential, tuple(jnp.asarray(a) for a in parts.train)
    num_data = potential.num_data
    template = jax.eval_shape(_init_fn(parts), jax.random.key(0))
    structure, paths = jax.tree.structure(template), leaf_paths(template)

    def log_prob(params: PyTree) -> jax.Array:
        if jax.tree.structure(params) != structure:  # a results folder's nested dicts
            leaves = dict(zip(leaf_paths(params), jax.tree.leaves(params), strict=True))
            params = jax.tree.unflatten(structure, [leaves[p] for p in paths])
        return -num_data * potential(params, batch)

    return log_prob


def training_targets(config: Config) -> np.ndarray | None:
    """The training targets of a regression configuration, in their own units (not standardised),
    the ``y`` that the run's likelihood saw; ``None`` for a classification data set.

    Loads the data set as :func:`build_experiment` does (the first ``data.train_size`` rows of
    the training split), so it needs the data files (``data.data_dir``).

    Raises:
        sgrld.data.DataError: if the data set's files are missing or corrupt.
    """
    if config.data.path is None and not DATASETS[config.data.name].regression:
        return None  # known without reading the files
    ds = data_and_model.load_data(config)
    if ds.num_classes:
        return None
    y = np.asarray(ds.y_train[: config.data.train_size], np.float64)
    return (y * ds.target_std + ds.target_mean).astype(np.float32)


def check_schedule(config: Config, num_train: int) -> None:
    """Refuse, before anything compiles, a batch larger than the training set and a run that would
    keep no sample, naming the keys.

    Example:
        >>> cfg = load_config(None, ["run.epochs=2", "run.burn_in=500"])
        >>> check_schedule(cfg, num_train=1000)  # 2 epochs of 10 steps
        Traceback (most recent call last):
        ...
        sgrld_app.config.key_checks.ConfigError: run.burn_in = 500, run.thin = ... keep no sample
        ...
    """
    d, r = config.data, config.run
    steps = num_train // d.batch_size
    if steps < 1:
        size = f" (data.train_size = {d.train_size})" if d.train_size is not None else ""
        raise ConfigError(
            f"data.batch_size = {d.batch_size} is larger than the training set: {num_train} "
            f"examples{size}"
        )
    total, burn_in = config.num_steps(num_train), config.burn_in_steps(num_train)
    kept = sample_steps(total, burn_in, r.thin)
    given = f'"auto" ({burn_in} steps)' if r.burn_in == "auto" else burn_in

    if config.schedule.kind == "cyclical" and len(kept):
        kept = kept[np.asarray(cyclical_of(config.schedule, total).keep(jnp.asarray(kept)))]
        if not len(kept):
            raise ConfigError(
                f"run.burn_in = {given}, run.thin = {r.thin}: no sample falls in a sampling "
                f"phase of the schedule.cycles = {config.schedule.cycles} cycles (exploration "
                f"{config.schedule.exploration}) of {total} steps; lower run.thin or "
                "schedule.exploration"
            )
    if not len(kept):
        raise ConfigError(
            f"run.burn_in = {given}, run.thin = {r.thin}: these keep no sample in "
            f"run.epochs = {r.epochs} epochs of {steps} steps ({total} steps; the first sample "
            f"would be the state after step {first_kept_window(burn_in, r.thin) + r.thin}); "
            "lower run.burn_in or run.thin, or raise run.epochs"
        )


def _experiment(ds, apply, regression: bool, fixed: float | None, **common) -> Experiment:
    """The experiment's predictor and evaluation sets: logits, or the Gaussian predictive in the
    targets' own units (σ fixed, or sampled as ``params["likelihood"]["log_noise"]``)."""
    eval_sets = {"test": (ds.x_test, ds.y_test), "val": (ds.x_val, ds.y_val)}
    if not regression:
        predict = lambda params, x: apply(params["net"], x)
        return Experiment(**common, predict_fn=predict, eval_sets=eval_sets)
    shift, scale = ds.target_mean, ds.target_std

    def predict_fn(params, x):
        sigma = fixed if fixed is not None else jnp.exp(params["likelihood"]["log_noise"])
        return apply(params["net"], x)[:, 0] * scale + shift, sigma * scale

    def to_units(y):
        return y * scale + shift

    units = {name: (x, to_units(y)) for name, (x, y) in eval_sets.items()}
    return Experiment(
        **common, predict_fn=predict_fn, eval_sets=units, kind="regression", eval_units=to_units
    )


def run_plan_of(config: Config, num_train: int | None = None) -> RunPlan:
    """The :class:`RunPlan` of a configuration's ``[data]`` and ``[run]`` sections; a
    ``run.burn_in = "auto"`` is resolved for the run on ``num_train`` training rows.

    Raises:
        ValueError: ``run.burn_in = "auto"`` without ``num_train``.
    """
    r, burn_in = config.run, config.burn_in_steps(num_train)
    return RunPlan(r.epochs, config.data.batch_size, burn_in, r.thin, r.chains, r.seed)


def observed_targets(folder: str | Path) -> dict[str, np.ndarray]:
    """``{"y": the training targets}`` of the regression run in ``folder``, rebuilt from its
    ``config.toml`` (:func:`training_targets`); ``{}`` for a classification
    run or a folder with no ``config.toml``, and, with a warning, when the data set cannot be
    loaded."""
    path = Path(folder) / "config.toml"
    if not path.is_file():
        return {}
    try:
        y = training_targets(load_config(path))
    except (ConfigError, DataError) as err:
        warnings.warn(f"observed_data left out: {err}", UserWarning, stacklevel=3)
        return {}
    return {} if y is None else {"y": y}
