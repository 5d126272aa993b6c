"""Value checks of a whole configuration, one function per section (types are checked earlier).

A sampler option's range is the one its factory checks (the module's ``BOUNDS``,
:func:`sgrld_app.config.registries.sampler_bounds`), worded for the key.

Example:
    >>> from sgrld_app.config import Config, SamplerConfig
    >>> validate(Config(sampler=SamplerConfig(num_probes=0)))
    Traceback (most recent call last):
    ...
    sgrld_app.config.key_checks.ConfigError: sampler.num_probes: must be >= 1, got 0
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sgrld.data import DATASETS
from sgrld.data.user_files import TASKS
from sgrld.parts.correction import AUTO, MODES
from sgrld.samplers.isgd import NOISE_ESTIMATES as ISGD_NOISE
from sgrld.samplers.sghmc import NOISE_ESTIMATES as SGHMC_NOISE
from sgrld_app.config.key_checks import ConfigError, at_least, check_kwargs, choice
from sgrld_app.config.registries import (
    CONVOLUTIONS,
    METRICS,
    MODEL_KINDS,
    PRIORS,
    SAMPLERS,
    sampler_bounds,
    sampler_keywords,
)

if TYPE_CHECKING:
    from sgrld_app.config.schema import Config


def _validate_data(config: Config) -> None:
    d = config.data
    choice("data.name", d.name, sorted(DATASETS))
    at_least("data.batch_size", d.batch_size, 1)
    at_least("data.validation_size", d.validation_size, 0)
    at_least("data.train_size", d.train_size, 1)
    defaults = type(d)()
    for key in ("inputs", "target", "task"):
        if d.path is None and getattr(d, key) != getattr(defaults, key):
            raise ConfigError(f"data.{key}: a key of a data file (data.path), not of {d.name!r}")
    if d.path is not None:
        _validate_file(config)
    elif DATASETS[d.name].format != "uci" and d.split != 0:
        raise ConfigError(f"data.split: only the UCI data sets have splits, not {d.name!r}")
    at_least("data.split", d.split, 0)
    if d.test_size is not None and not DATASETS[d.name].test_size and d.path is None:
        raise ConfigError(
            f"data.test_size: only a data set without an official test split (australian) or a "
            f"data file (data.path) holds one out, not {d.name!r}"
        )
    at_least("data.test_size", d.test_size, 0)


def _validate_file(config: Config) -> None:
    """``data.path``'s keys; ``data.name`` and the keys of the registry's sets do not apply."""
    d, defaults = config.data, type(config.data)()
    if not d.path:
        raise ConfigError("data.path: names no file")
    for key in ("name", "data_dir", "split", "verify_checksums"):
        if getattr(d, key) != getattr(defaults, key):
            raise ConfigError(f"data.{key}: a key of the registry's data sets, not of data.path")
    choice("data.task", d.task, TASKS)
    if d.inputs is not None and not d.inputs:
        raise ConfigError("data.inputs: names no input; leave it out for the default")


def _validate_model(config: Config) -> None:
    m = config.model
    choice("model.kind", m.kind, MODEL_KINDS)
    if m.kind == "logistic_regression" and m.widths != type(m)().widths:
        raise ConfigError(
            f"model.widths: a logistic_regression has no hidden layers, got {list(m.widths)}"
        )
    if not m.widths:
        raise ConfigError("model.widths: needs at least one width")
    for i, width in enumerate(m.widths):
        at_least(f"model.widths[{i}]", width, 1)
    if m.kind == "regression_mlp" and len(m.widths) != 1:
        raise ConfigError(f"model.widths: regression_mlp has one hidden layer, got {m.widths}")
    if m.kind == "resnet20" and len(m.widths) != 1:
        raise ConfigError(
            f"model.widths: resnet20 takes one width, its first stack's channels (16 in "
            f"Yu et al.), got {list(m.widths)}"
        )
    if m.kind != "resnet20" and m.depth != 20:
        raise ConfigError(f"model.depth: only a resnet20 has a depth, not a {m.kind}")
    if m.depth < 8 or m.depth % 6 != 2:
        raise ConfigError(
            f"model.depth: must be 6n + 2 with n >= 1 (8, 14, 20, ...), got {m.depth}"
        )
    choice("model.conv", m.conv, CONVOLUTIONS)
    if m.kind not in ("cnn", "resnet20") and m.conv != "auto":
        raise ConfigError(f"model.conv: only a cnn or a resnet20 has convolutions, not a {m.kind}")
    if m.factory is not None and ":" not in m.factory:
        raise ConfigError(
            f"model.factory: {m.factory!r} is not of the form 'package.module:function'"
        )
    if config.data.path is None:
        check_model_for_data(config, DATASETS[config.data.name].num_classes)


def check_model_for_data(config: Config, num_classes: int) -> None:
    """Refuse a model kind, or a likelihood option, that does not fit the data's targets.

    The checks of the keys that need the data: a ``cnn``, a ``resnet20`` or a ``regression_mlp``
    on targets of the wrong kind, a ``logistic_regression`` on other than two classes, a
    ``likelihood.noise_std`` on classes. ``validate`` makes them for the registry's sets; a data
    file's targets are known once it is read.

    Args:
        config: the configuration.
        num_classes: the data's classes; 0 for regression.

    Raises:
        ConfigError: naming the key and the data set (``data.name`` or ``data.path``).

    Example:
        >>> from sgrld_app.config import load_config
        >>> check_model_for_data(load_config(None, ["model.kind=regression_mlp",
        ...     "model.widths=[8]", 'data.path="mine.csv"']), 3)
        Traceback (most recent call last):
        ...
        sgrld_app.config.key_checks.ConfigError: model.kind: 'regression_mlp' needs a regression
        data set, and data.path = 'mine.csv' is a classification data set ...
    """
    m, d = config.model, config.data
    what = f"data.name = {d.name!r}" if d.path is None else f"data.path = {d.path!r}"
    regression = num_classes == 0
    if m.factory is None and regression and m.kind in ("cnn", "resnet20"):
        raise ConfigError(
            f"model.kind: {m.kind!r} classifies images, and {what} is a regression "
            "data set; use 'regression_mlp' or 'mlp'"
        )
    if m.factory is None and not regression and m.kind == "regression_mlp":
        raise ConfigError(
            f"model.kind: 'regression_mlp' needs a regression data set, and {what} is a "
            "classification data set (the UCI sets uci_* are regression)"
        )
    if m.factory is None and m.kind == "logistic_regression" and num_classes != 2:
        binary = ", ".join(n for n, info in DATASETS.items() if info.num_classes == 2)
        raise ConfigError(
            f"model.kind: 'logistic_regression' needs a binary data set ({binary}), and "
            f"{what} has {num_classes or 'real-valued'} "
            f"{'classes' if num_classes else 'targets'}"
        )
    if config.likelihood.noise_std is not None and not regression:
        kind = "Bernoulli" if m.kind == "logistic_regression" else "categorical"
        raise ConfigError(
            f"likelihood.noise_std: {what} is a classification data set, whose likelihood "
            f"({kind}) has no noise"
        )


def _validate_likelihood(config: Config) -> None:
    noise_std = config.likelihood.noise_std
    if noise_std is not None:
        at_least("likelihood.noise_std", noise_std, 0, strict=True)


def _validate_prior(config: Config) -> None:
    prior = config.prior
    choice("prior.kind", prior.kind, sorted(PRIORS))
    if prior.params:  # the factory, and with it sgrld.bnn and Flax, only loads to check them
        check_kwargs("prior.params", PRIORS[prior.kind], prior.params)


def _validate_sampler(config: Config) -> None:
    s = config.sampler
    choice("sampler.kind", s.kind, list(SAMPLERS))
    _check_kind_options(s)
    choice("sampler.metric", s.metric, sorted(METRICS))
    check_kwargs("sampler.metric_params", METRICS[s.metric], s.metric_params)
    if isinstance(s.learning_rate, str) and s.learning_rate not in ("rule", "auto"):
        raise ConfigError(
            f"sampler.learning_rate: a number > 0, 'auto' (chosen in the burn-in) or 'rule' "
            f"(isgd), got {s.learning_rate!r}"
        )
    if s.learning_rate == "auto" and s.kind == "isgd":
        raise ConfigError("sampler.learning_rate: 'auto' is not isgd's; give 'rule' or a number")
    choice("sampler.correction", s.correction, (*MODES, AUTO))
    at_least("sampler.adapt_until", None if isinstance(s.adapt_until, str) else s.adapt_until, 0)
    for name, names in (("adapt_until", ["auto", "never"]), ("correction_scale", ["auto"])):
        if isinstance(getattr(s, name), str):  # a number, or one of its names
            choice(f"sampler.{name}", getattr(s, name), names)
    if s.gradient_noise is not None:
        choice("sampler.gradient_noise", s.gradient_noise, NOISE_ESTIMATES[s.kind])
    for name, bound in sampler_bounds(s.kind).items():  # the ranges the factory checks
        value = getattr(s, name)
        rule = None if value is None or isinstance(value, str) else bound.rule(value)
        if rule is not None:
            raise ConfigError(f"sampler.{name}: {rule}, got {value}")
    if s.kind == "sgrld" and s.gamma_kick_limit is not None and s.correction in ("none", AUTO):
        raise ConfigError(
            'sampler.gamma_kick_limit tames Γ\'s kick: it needs sampler.correction = "hutchinson" '
            'or "exact" (given, not "auto")'
        )
    if s.kind == "isgd" and s.learning_rate in ("rule", None) and s.temperature == 0:
        raise ConfigError("sampler.temperature: 0 needs a numeric learning_rate, not 'rule'")


NOISE_ESTIMATES = {"sghmc": SGHMC_NOISE, "isgd": ISGD_NOISE}
"""``sampler.gradient_noise``: the named estimates of each kind that takes it."""


def _options_of(kind: str) -> set[str]:
    """The ``[sampler]`` keys the sampler ``kind`` takes (besides ``kind``)."""
    metric = {"metric", "metric_params"} if kind in ("sgrld", "sghmc") else set()
    return set(sampler_keywords(kind)) | metric


def _check_kind_options(s) -> None:
    """An option that differs from its default must be one the kind's sampler takes."""
    taken, default = _options_of(s.kind), type(s)()
    for f in dataclasses.fields(s):
        if f.name == "kind" or f.name in taken or getattr(s, f.name) == getattr(default, f.name):
            continue
        takers = ", ".join(k for k in SAMPLERS if f.name in _options_of(k))
        raise ConfigError(
            f"sampler.{f.name}: sampler.kind = {s.kind!r} does not take it (only {takers}); "
            f"its options: {', '.join(sorted(taken))}"
        )
    if s.learning_rate == "rule" and s.kind != "isgd":
        raise ConfigError(f"sampler.learning_rate: 'rule' is isgd's λ rule, not {s.kind}'s")


SCHEDULE_KINDS = ("constant", "polynomial", "cyclical")
"""The values of ``schedule.kind``."""


def _validate_schedule(config: Config) -> None:
    c = config.schedule
    choice("schedule.kind", c.kind, SCHEDULE_KINDS)
    at_least("schedule.offset", c.offset, 0, strict=True)
    at_least("schedule.power", c.power, 0)
    at_least("schedule.cycles", c.cycles, 1)
    at_least("schedule.exploration", c.exploration, 0)
    if c.exploration >= 1:
        raise ConfigError(
            f"schedule.exploration: must be < 1 (a cycle must have a sampling phase), "
            f"got {c.exploration}"
        )
    if c.kind != "constant" and config.sampler.kind == "isgd":
        raise ConfigError(
            f'schedule.kind = "{c.kind}" with sampler.kind = "isgd": i-SGD\'s step size is '
            'fixed by its λ, so it takes no schedule; use schedule.kind = "constant"'
        )


MAX_SEED = 2**32 - 1
"""The largest ``run.seed``: ``jax.random.key`` of 0 ... 2**32 - 1 are distinct keys."""


def _validate_run(config: Config) -> None:
    r = config.run
    at_least("run.epochs", r.epochs, 1)
    if isinstance(r.burn_in, str) and r.burn_in != "auto":
        raise ConfigError(f"run.burn_in: a number of steps >= 0 or 'auto', got {r.burn_in!r}")
    at_least("run.burn_in", None if r.burn_in == "auto" else r.burn_in, 0)
    at_least("run.thin", r.thin, 1)
    at_least("run.chains", r.chains, 1)
    if not 0 <= r.seed <= MAX_SEED:
        raise ConfigError(
            f"run.seed: must be in [0, {MAX_SEED}] (2**32 - 1; JAX's key keeps 32 bits, so a seed "
            f"outside would repeat another seed's chains), got {r.seed}"
        )
    at_least("run.checkpoint_every", r.checkpoint_every, 1)
    at_least("run.checkpoint_seconds", r.checkpoint_seconds, 0)
    _validate_devices(config)
    if not config.out.folder:
        raise ConfigError("out.folder: must not be empty")


def _validate_devices(config: Config) -> None:
    """``run.devices`` and ``run.data_parallel`` against the chains and the batch size (the
    number of devices that ``"all"`` stands for is checked when the mesh is made)."""
    r = config.run
    if isinstance(r.devices, str) and r.devices != "all":
        raise ConfigError(f'run.devices: "all" or a number of devices, got {r.devices!r}')
    if isinstance(r.devices, int):
        at_least("run.devices", r.devices, 1)
    at_least("run.data_parallel", r.data_parallel, 1)
    if r.data_parallel > 1 and r.devices is None:
        raise ConfigError(
            f"run.data_parallel = {r.data_parallel} needs a mesh: set run.devices too"
        )
    if config.data.batch_size % r.data_parallel:
        raise ConfigError(
            f"data.batch_size = {config.data.batch_size} cannot be split evenly over "
            f"run.data_parallel = {r.data_parallel} devices; use a multiple of {r.data_parallel}"
        )
    if isinstance(r.devices, int):
        if r.data_parallel > r.devices:
            raise ConfigError(
                f"run.data_parallel = {r.data_parallel} is more than run.devices = {r.devices}"
            )
        if r.devices % r.data_parallel:
            raise ConfigError(
                f"run.data_parallel = {r.data_parallel} does not divide run.devices = {r.devices}"
            )
        groups = r.devices // r.data_parallel
        if r.chains % groups:
            raise ConfigError(
                f"run.chains = {r.chains} cannot be spread evenly over run.devices / "
                f"run.data_parallel = {groups} chain groups; use a multiple of {groups} chains"
            )


SECTION_CHECKS = (
    _validate_data,
    _validate_model,
    _validate_likelihood,
    _validate_prior,
    _validate_sampler,
    _validate_schedule,
    _validate_run,
)
"""The section checks, in the order of the file (the first error is the one reported)."""


def validate(config: Config) -> Config:
    """Check the values of a configuration (types are checked when it is built).

    Args:
        config: the configuration.

    Returns:
        ``config``, unchanged.

    Raises:
        ConfigError: naming the first bad key.

    Example:
        >>> from sgrld_app.config import Config, SamplerConfig
        >>> validate(Config(sampler=SamplerConfig(learning_rate=-0.1)))
        Traceback (most recent call last):
        ...
        sgrld_app.config.key_checks.ConfigError: sampler.learning_rate: must be > 0, got -0.1
    """
    for check in SECTION_CHECKS:
        check(config)
    return config
