"""Typed experiment configuration: TOML files, ``--set key=value`` overrides, validation.

A configuration has seven sections, each a frozen dataclass; every key has a default, so a file
only lists what differs. The defaults are the MNIST setup of Yu et al. (TMLR 2023, Sec. 4.1 and
Table 4): a 784-400-400-10 MLP with the horseshoe prior, Identity metric with learning rate 0.25,
batches of 100, burn-in 1000 minibatches, a sample every 100 minibatches, 400 epochs.

.. code-block:: toml

    [data]                      # sgrld.data.load_dataset
    name = "mnist"              # mnist, fashion_mnist, cifar10, digits, or a UCI regression
                                # set: uci_boston, uci_concrete, uci_energy, uci_kin8nm,
                                # uci_naval, uci_power, uci_protein, uci_wine, uci_yacht
    # data_dir = "..."          # default: $SGRLD_DATA_DIR, else ~/.cache/sgrld/data
    # validation_size = 10000   # default: the data set's (10000 for MNIST, 0 for UCI)
    # train_size = 10000        # use only the first train_size training examples
    # verify_checksums = false  # skip the SHA-256 check of files with a known checksum
    # split = 0                 # the UCI train/test split (0 to 19; 0 to 4 for protein)
    batch_size = 100

    [model]
    kind = "mlp"                # mlp, cnn (widths = its dense layers), regression_mlp (one width)
    widths = [400, 400]

    [likelihood]                # regression only (the Gaussian likelihood)
    # noise_std = 0.5           # fixed noise std, in the targets' units; default: sampled

    [prior]                     # a factory of sgrld.bnn.priors and its keyword arguments
    kind = "horseshoe"          # gaussian, laplace, student_t, horseshoe, horseshoe_per_weight,
                                # conv_correlated
    [prior.params]
    weight_scale = 1.41

    [sampler]                   # sgrld.sgrld(...)
    metric = "monge"            # identity, rmsprop, wenzel, monge, shampoo
    learning_rate = 0.25        # lr = h·N
    temperature = 1.0
    correction = "none"         # none, hutchinson, exact (sgrld.correction.MODES)
    correction_scale = 1.0
    # num_probes = 1            # Rademacher probes per step of "hutchinson"
    # correction_warmup = 30    # metric updates before Γ (default: the metric's warm-up)
    # prior_in_metric = true    # the prior's gradient enters the metric's statistic
    # adapt_until = 5000        # freeze the metric after this many steps (default: never)
    # max_drift_norm = 1000.0   # identity fallback when |G⁻¹g| exceeds it (default: none)
    [sampler.metric_params]     # keyword arguments of the sgrld.metrics factory
    alpha2 = 1.25
    decay = 0.9

    [run]
    epochs = 400
    burn_in = 1000              # minibatches before the first sample
    thin = 100                  # a sample every `thin` minibatches
    chains = 1
    seed = 0
    save_samples = false
    curvature = false

    [out]
    folder = "results/run"

Overrides are dotted keys with values parsed as TOML literals (``run.epochs=3``,
``sampler.metric_params.alpha2=0.5``, ``model.widths=[800, 800]``, ``sampler.metric="monge"``); a
value that is not a TOML literal is taken as a string, so ``sampler.metric=monge`` works too.
TOML has no null: leave a key out for its default (``None`` for the optional ones).

Every error is a :class:`ConfigError` that names the offending key: unknown keys (with the valid
keys and the closest match), wrong types and out-of-range values.

Example:
    >>> cfg = load_config(None, ["sampler.metric=monge", "sampler.metric_params.alpha2=0.5"])
    >>> cfg.sampler.metric, cfg.sampler.metric_params, cfg.run.thin
    ('monge', {'alpha2': 0.5}, 100)
    >>> load_config(None, ["sampler.learnig_rate=0.1"])
    Traceback (most recent call last):
    ...
    sgrld.config.ConfigError: unknown key 'sampler.learnig_rate' (did you mean 'learning_rate'?)...
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import json
import math
import tomllib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgrld import metrics
from sgrld.bnn import priors
from sgrld.correction import MODES as CORRECTIONS
from sgrld.data import DATASETS

MODEL_KINDS = ("mlp", "cnn", "regression_mlp")
METRICS: dict[str, Callable[..., metrics.Metric]] = {
    "identity": metrics.identity,
    "rmsprop": metrics.rmsprop,
    "wenzel": metrics.wenzel,
    "monge": metrics.monge,
    "shampoo": metrics.shampoo,
}
PRIORS: dict[str, Callable[..., priors.Prior]] = {
    "gaussian": priors.gaussian,
    "laplace": priors.laplace,
    "student_t": priors.student_t,
    "horseshoe": priors.horseshoe,
    "horseshoe_per_weight": priors.horseshoe_per_weight,
    "conv_correlated": priors.conv_correlated,
}


class ConfigError(ValueError):
    """An invalid configuration; the message names the key."""


@dataclass(frozen=True)
class DataConfig:
    """``[data]``: which data set, where it is, how it is split and batched.

    Attributes:
        name: a name of ``sgrld.data.DATASETS``.
        data_dir: base data folder (``None``: ``$SGRLD_DATA_DIR``, else ``~/.cache/sgrld/data``).
        validation_size: training examples held out for validation (``None``: the data set's).
        train_size: keep only the first ``train_size`` training examples (``None``: all).
        verify_checksums: check the SHA-256 of every file whose checksum is known (``false``:
            read the files unchecked, e.g. a re-compressed copy of the data).
        batch_size: minibatch size B; an epoch is ``n_train // B`` minibatches.
        split: the published train/test split of a UCI regression set (the other data sets
            have none and accept only 0).
    """

    name: str = "mnist"
    data_dir: str | None = None
    validation_size: int | None = None
    train_size: int | None = None
    verify_checksums: bool = True
    batch_size: int = 100
    split: int = 0


@dataclass(frozen=True)
class ModelConfig:
    """``[model]``: the network.

    Attributes:
        kind: ``"mlp"`` (hidden ``widths``), ``"cnn"`` (Li et al.'s CNN, ``widths`` = its dense
            layers) or ``"regression_mlp"`` (one hidden layer, ``widths = [width]``).
        widths: hidden layer widths.
    """

    kind: str = "mlp"
    widths: tuple[int, ...] = (400, 400)


@dataclass(frozen=True)
class LikelihoodConfig:
    """``[likelihood]``: the Gaussian likelihood of a regression data set.

    A classification data set always has the categorical (softmax) likelihood and no options.

    Attributes:
        noise_std: the noise standard deviation σ, fixed, in the units of the targets in the
            data files; ``None`` samples ``log σ`` with the network (flat prior on ``log σ``,
            started at the targets' standard deviation).
    """

    noise_std: float | None = None


@dataclass(frozen=True)
class PriorConfig:
    """``[prior]``: a factory of :mod:`sgrld.bnn.priors` and its keyword arguments.

    Attributes:
        kind: a name of :data:`PRIORS`.
        params: keyword arguments of the factory (its defaults for those left out).
    """

    kind: str = "horseshoe"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SamplerConfig:
    """``[sampler]``: the metric and every keyword option of :func:`sgrld.sgrld`.

    The fields after ``metric_params`` are exactly the options of :func:`sgrld.sgrld` (all but
    ``num_data``, which is the training-set size), with its defaults except ``learning_rate``
    (Yu et al.'s 0.25); a test keeps the two in step. :meth:`sampler_options` passes them on.

    Attributes:
        metric: a name of :data:`METRICS`.
        metric_params: keyword arguments of the metric factory.
        learning_rate: ``lr = h·N`` (> 0).
        temperature: T ≥ 0.
        adapt_until: freeze the metric after this many steps (``None``: never).
        correction: one of :data:`sgrld.correction.MODES`.
        correction_scale: the share c of Γ.
        num_probes: Rademacher probes per step of the ``"hutchinson"`` correction.
        correction_warmup: metric updates before Γ is applied (``None``: the metric's warm-up).
        prior_in_metric: whether the prior's gradient enters the metric's statistic.
        max_drift_norm: identity fallback threshold on ‖G⁻¹g‖ (``None``: no fallback).
    """

    metric: str = "identity"
    metric_params: dict[str, Any] = field(default_factory=dict)
    learning_rate: float = 0.25
    temperature: float = 1.0
    adapt_until: int | None = None
    correction: str = "none"
    correction_scale: float = 1.0
    num_probes: int = 1
    correction_warmup: int | None = None
    prior_in_metric: bool = True
    max_drift_norm: float | None = None

    def sampler_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`sgrld.sgrld` (all but ``num_data``).

        Example:
            >>> SamplerConfig(correction="hutchinson").sampler_options()["correction"]
            'hutchinson'
        """
        skip = ("metric", "metric_params")
        return {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip
        }


@dataclass(frozen=True)
class RunConfig:
    """``[run]``: the sampling schedule (burn-in and thinning counted in minibatches).

    Attributes:
        epochs: passes over the shuffled training set.
        burn_in: global steps before the first sample.
        thin: step ``s`` is a sample when ``s >= burn_in`` and ``(s + 1) % thin == 0``.
        chains: independent chains run with ``vmap``.
        seed: the random seed of initialisation, shuffling and noise.
        save_samples: write the thinned samples to ``samples/`` (one ``.npz`` per epoch).
        curvature: score the input-space curvature C(x) of every sample (slow).
    """

    epochs: int = 400
    burn_in: int = 1000
    thin: int = 100
    chains: int = 1
    seed: int = 0
    save_samples: bool = False
    curvature: bool = False


@dataclass(frozen=True)
class OutConfig:
    """``[out]``: where results go.

    Attributes:
        folder: the results folder (created).
    """

    folder: str = "results/run"


@dataclass(frozen=True)
class Config:
    """A whole experiment configuration; see the module docstring for the file format."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    likelihood: LikelihoodConfig = field(default_factory=LikelihoodConfig)
    prior: PriorConfig = field(default_factory=PriorConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    run: RunConfig = field(default_factory=RunConfig)
    out: OutConfig = field(default_factory=OutConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The configuration as nested plain dicts (tuples become lists; ``None`` is kept).

        Example:
            >>> Config().to_dict()["run"]["thin"]
            100
        """
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def with_overrides(self, overrides: Sequence[str]) -> Config:
        """A validated copy with ``key=value`` overrides applied (see :func:`parse_override`).

        Example:
            >>> Config().with_overrides(["run.epochs=2"]).run.epochs
            2
        """
        raw = self.to_dict()
        for text in overrides:
            set_dotted(raw, *parse_override(text))
        return from_dict(raw)


def _suggest(name: str, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown(key: str, valid: Sequence[str], where: str) -> ConfigError:
    name = key.rsplit(".", 1)[-1]
    listing = ", ".join(sorted(valid)) if valid else "none"
    return ConfigError(
        f"unknown key {key!r}{_suggest(name, valid)}; valid keys in {where}: {listing}"
    )


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", str(annotation))


def _check_type(key: str, value: Any, annotation: Any) -> Any:
    """``value`` converted to ``annotation``, or a :class:`ConfigError` naming ``key``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value is None:
            return None
        return _check_type(key, value, options[0])
    if value is None:
        raise ConfigError(f"{key}: a value is required (TOML has no null; leave the key out)")
    if origin is tuple:
        (item,) = {a for a in typing.get_args(annotation) if a is not Ellipsis}
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key}: expected a list of {_type_name(item)}, got {value!r}")
        return tuple(_check_type(f"{key}[{i}]", v, item) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a table of keyword arguments, got {value!r}")
        return dict(value)
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, int | float) and not isinstance(value, bool),
        str: isinstance(value, str),
    }[annotation]
    if not ok:
        raise ConfigError(
            f"{key}: expected {_type_name(annotation)}, got {type(value).__name__} {value!r}"
        )
    if annotation is float:
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{key}: must be finite, got {value}")
    return value


def _section(name: str, cls: type, raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"[{name}] must be a table, got {raw!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    values = {}
    for key, value in raw.items():
        if key not in fields:
            raise _unknown(f"{name}.{key}", sorted(fields), f"[{name}]")
        values[key] = _check_type(f"{name}.{key}", value, hints[key])
    return cls(**values)


def _check_kwargs(key: str, factory: Callable[..., Any], params: Mapping[str, Any]) -> None:
    """Check ``params`` against the factory's signature (names and types), then build it once."""
    signature = inspect.signature(factory)
    valid = [p.name for p in signature.parameters.values()]
    for name, value in params.items():
        if name not in signature.parameters:
            raise _unknown(f"{key}.{name}", valid, f"[{key}] of {factory.__name__}()")
        default = signature.parameters[name].default
        if default is not inspect.Parameter.empty and default is not None:
            _check_type(f"{key}.{name}", value, type(default))
    try:
        factory(**params)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{key}: {err}") from err


def _choice(key: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ConfigError(
            f"{key}: unknown value {value!r}{_suggest(value, choices)}; choose one of "
            + ", ".join(choices)
        )


def _at_least(key: str, value: float | None, low: float, *, strict: bool = False) -> None:
    if value is not None and (value <= low if strict else value < low):
        raise ConfigError(f"{key}: must be {'>' if strict else '>='} {low}, got {value}")


def _validate_data(config: Config) -> None:
    d, m = config.data, config.model
    _choice("data.name", d.name, sorted(DATASETS))
    _at_least("data.batch_size", d.batch_size, 1)
    _at_least("data.validation_size", d.validation_size, 0)
    _at_least("data.train_size", d.train_size, 1)
    _choice("model.kind", m.kind, MODEL_KINDS)
    if not m.widths:
        raise ConfigError("model.widths: needs at least one width")
    for i, width in enumerate(m.widths):
        _at_least(f"model.widths[{i}]", width, 1)
    if m.kind == "regression_mlp" and len(m.widths) != 1:
        raise ConfigError(f"model.widths: regression_mlp has one hidden layer, got {m.widths}")
    info = DATASETS[d.name]
    if info.regression and m.kind == "cnn":
        raise ConfigError(
            f"model.kind: 'cnn' classifies images, and data.name = {d.name!r} is a regression "
            "data set; use 'regression_mlp' or 'mlp'"
        )
    if not info.regression and m.kind == "regression_mlp":
        raise ConfigError(
            f"model.kind: 'regression_mlp' needs a regression data set, and data.name = "
            f"{d.name!r} is a classification data set (the UCI sets uci_* are regression)"
        )
    if info.format != "uci" and d.split != 0:
        raise ConfigError(f"data.split: only the UCI data sets have splits, not {d.name!r}")
    _at_least("data.split", d.split, 0)
    if config.likelihood.noise_std is not None:
        if not info.regression:
            raise ConfigError(
                f"likelihood.noise_std: {d.name!r} is a classification data set, whose "
                "likelihood (categorical) has no noise"
            )
        _at_least("likelihood.noise_std", config.likelihood.noise_std, 0, strict=True)


def _validate_sampler(s: SamplerConfig) -> None:
    _choice("sampler.metric", s.metric, sorted(METRICS))
    _check_kwargs("sampler.metric_params", METRICS[s.metric], s.metric_params)
    _at_least("sampler.learning_rate", s.learning_rate, 0, strict=True)
    _at_least("sampler.temperature", s.temperature, 0)
    _choice("sampler.correction", s.correction, CORRECTIONS)
    _at_least("sampler.adapt_until", s.adapt_until, 0)
    _at_least("sampler.num_probes", s.num_probes, 1)
    _at_least("sampler.correction_warmup", s.correction_warmup, 0)
    _at_least("sampler.max_drift_norm", s.max_drift_norm, 0, strict=True)


def validate(config: Config) -> Config:
    """Check the values of a configuration (types are checked when it is built).

    Args:
        config: the configuration.

    Returns:
        ``config``, unchanged.

    Raises:
        ConfigError: naming the first bad key.

    Example:
        >>> validate(Config(sampler=SamplerConfig(learning_rate=-0.1)))
        Traceback (most recent call last):
        ...
        sgrld.config.ConfigError: sampler.learning_rate: must be > 0, got -0.1
    """
    s, r = config.sampler, config.run
    _validate_data(config)
    _choice("prior.kind", config.prior.kind, sorted(PRIORS))
    _check_kwargs("prior.params", PRIORS[config.prior.kind], config.prior.params)
    _validate_sampler(s)
    _at_least("run.epochs", r.epochs, 1)
    _at_least("run.burn_in", r.burn_in, 0)
    _at_least("run.thin", r.thin, 1)
    _at_least("run.chains", r.chains, 1)
    if not config.out.folder:
        raise ConfigError("out.folder: must not be empty")
    return config


SECTIONS: dict[str, type] = typing.get_type_hints(Config)


def from_dict(raw: Mapping[str, Any]) -> Config:
    """Build and validate a :class:`Config` from nested dicts (as :mod:`tomllib` returns).

    Args:
        raw: ``{section: {key: value}}``; missing sections and keys take their defaults.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: naming the first unknown key, wrong type or bad value.

    Example:
        >>> from_dict({"run": {"epochs": "ten"}})
        Traceback (most recent call last):
        ...
        sgrld.config.ConfigError: run.epochs: expected int, got str 'ten'
    """
    sections = {}
    for name, value in raw.items():
        if name not in SECTIONS:
            raise _unknown(name, sorted(SECTIONS), "the configuration (sections)")
        sections[name] = _section(name, SECTIONS[name], value)
    return validate(Config(**sections))


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``"key=value"`` and parse the value as a TOML literal (else keep it as a string).

    Example:
        >>> parse_override("model.widths=[800, 800]")
        ('model.widths', [800, 800])
        >>> parse_override("sampler.metric=monge")
        ('sampler.metric', 'monge')
    """
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key:
        raise ConfigError(f"override {text!r} is not of the form key=value (e.g. run.epochs=3)")
    try:
        return key, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value


def set_dotted(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set ``raw[a][b][c] = value`` for ``key = "a.b.c"``, creating tables on the way.

    Example:
        >>> raw = {}
        >>> set_dotted(raw, "sampler.metric_params.alpha2", 1.25)
        >>> raw
        {'sampler': {'metric_params': {'alpha2': 1.25}}}
    """
    *parents, last = key.split(".")
    node = raw
    for i, part in enumerate(parents):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{'.'.join(parents[: i + 1])} is not a table; cannot set {key}")
    node[last] = value


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Read a TOML configuration, apply ``key=value`` overrides and validate.

    Args:
        path: the TOML file (``None``: all defaults).
        overrides: ``"dotted.key=value"`` strings, applied in order.

    Returns:
        The validated :class:`Config`.

    Raises:
        ConfigError: for a missing or malformed file, or a bad key or value (the message names
            the file or key).
    """
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{path}: not valid TOML: {err}") from None
    for text in overrides:
        set_dotted(raw, *parse_override(text))
    return from_dict(raw)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as a TOML value")


def to_toml(config: Config) -> str:
    """The configuration as TOML; a ``None`` value becomes a comment (TOML has no null).

    Example:
        >>> c = Config(sampler=SamplerConfig(metric="monge", metric_params={"alpha2": 0.5}))
        >>> from_dict(tomllib.loads(to_toml(c))) == c
        True
    """
    lines: list[str] = []
    for name, section in config.to_dict().items():
        tables = {k: v for k, v in section.items() if isinstance(v, dict)}
        lines.append(f"[{name}]")
        lines += [
            f"{k} = {_toml_value(v)}" if v is not None else f"# {k} is not set (its default)"
            for k, v in section.items()
            if k not in tables
        ]
        for key, table in tables.items():
            lines.append(f"[{name}.{key}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in table.items() if v is not None]
        lines.append("")
    return "\n".join(lines)


def write_config(config: Config, folder: str | Path) -> tuple[Path, Path]:
    """Write the resolved configuration as ``config.toml`` and ``config.json`` into ``folder``.

    Returns:
        The two paths.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    toml_path, json_path = folder / "config.toml", folder / "config.json"
    toml_path.write_text(to_toml(config))
    json_path.write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    return toml_path, json_path
