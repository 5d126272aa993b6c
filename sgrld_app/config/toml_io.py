"""A configuration in files: read TOML with overrides (:func:`load_config`), write it back.

:func:`to_toml` writes every key that applies, its default included, so the written
``config.toml`` says what a run used; ``sgrld run --help`` shows ``to_toml(Config())``. A key
left unset says what that means (:data:`UNSET`), the schedule's keys say what they count
(:data:`UNITS`), and a ``[model]`` key of another kind of network is left out at its default
(:data:`MODEL_KEYS`).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import tomllib
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sgrld.samples import atomic
from sgrld_app.config.key_checks import UNREADABLE_VALUE, ConfigError, check_type, unknown_key
from sgrld_app.config.registries import SAMPLERS, sampler_keywords
from sgrld_app.config.schema import LEARNING_RATE, SECTIONS, Config
from sgrld_app.config.validation import validate


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Read a TOML configuration, apply ``key=value`` overrides and validate.

    Args:
        path: the TOML file (``None``: all defaults).
        overrides: ``"dotted.key=value"`` strings, applied in order.

    Returns:
        The validated :class:`Config`.

    Raises:
        ConfigError: for a missing, unreadable or malformed file (a directory, binary, not
            UTF-8 or not TOML), or a bad key or value; the message names the file and the key.
    """
    raw = {} if path is None else _read_toml(Path(path))
    try:
        for text in overrides:
            set_dotted(raw, *parse_override(text))
        return from_dict(raw)
    except ConfigError as err:
        if path is None:
            raise
        also = " and the --set overrides" if overrides else ""
        raise ConfigError(f"{err} (configuration read from {path}{also})") from None


def _read_toml(path: Path) -> dict[str, Any]:
    """The tables of the TOML file ``path``; every way it can fail is a :class:`ConfigError`."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a directory, not a TOML file") from None
    except OSError as err:
        raise ConfigError(f"config file {path} cannot be read: {err.strerror or err}") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: not a TOML text file (byte {err.start} is not UTF-8: {err.reason})"
        ) from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except (ValueError, RecursionError) as err:  # an integer of > 4300 digits, deep nesting
        raise ConfigError(f"{path}: {UNREADABLE_VALUE} ({type(err).__name__})") from None


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


UNSET = {
    "data.data_dir": "$SGRLD_DATA_DIR, else ~/.cache/sgrld/data",
    "data.validation_size": "the data set's own (a data file: 10 % of its rows)",
    "data.train_size": "every training example",
    "data.test_size": "the data set's own (a data file: 20 % of its rows)",
    "data.path": "data.name, of the registry; a .npz, .csv or .parquet file in its place",
    "data.inputs": "a data file's key x (.npz), or every column but the target",
    "data.target": "a data file's key y (.npz), or its last column",
    "data.standardize": "the data set's own (a data file: standardised)",
    "model.factory": "model.kind; package.module:function builds a network of one's own",
    "likelihood.noise_std": "sampled with the network (log σ, from the targets' std)",
    "sampler.learning_rate": f"{LEARNING_RATE!r}: chosen in the burn-in (isgd: its λ rule)",
    "run.devices": "one device, no mesh",
}
"""What a key left unset (``None``) means, where the schema's docstrings say it; a ``[sampler]``
key not here takes each sampler's own default (:func:`unset_meaning`)."""
UNITS = {
    "run.epochs": "passes over the training set",
    "run.burn_in": (
        "minibatch steps over the whole run (not epochs) before the first sample; "
        '"auto": 1000, or half a run shorter than 2000'
    ),
    "run.thin": "a sample every thin minibatch steps",
    "data.batch_size": "examples per minibatch step; an epoch is n_train // batch_size steps",
}
"""The comment after each key of the schedule: burn-in and thinning count steps, not epochs."""
MODEL_KEYS = {
    "widths": ("mlp", "cnn", "regression_mlp", "resnet20"),
    "depth": ("resnet20",),
    "conv": ("cnn", "resnet20"),
}
"""The ``model.kind`` values each ``[model]`` key applies to."""


def unset_meaning(section: str, key: str) -> str:
    """What ``section.key = None`` means: :data:`UNSET`, else the samplers' own defaults.

    Example:
        >>> unset_meaning("sampler", "learning_rate"), unset_meaning("sampler", "friction")
        ("'auto': chosen in the burn-in (isgd: its λ rule)", 'sghmc: 0.1')
    """
    if f"{section}.{key}" in UNSET or section != "sampler":
        return UNSET.get(f"{section}.{key}", "its default")
    defaults = [
        f"{kind}: {default!r}"
        for kind in SAMPLERS
        if (default := sampler_keywords(kind).get(key)) not in (None, inspect.Parameter.empty)
    ]
    return "; ".join(defaults) or "each sampler's own default"


def _applies(config: Config, section: str, key: str, value: Any) -> bool:
    """Whether ``to_toml`` writes ``section.key``: not a ``[model]`` key of another kind of
    network left at its default."""
    if section != "model" or config.model.kind in MODEL_KEYS.get(key, (config.model.kind,)):
        return True
    return value != Config().to_dict()["model"][key]


def _line(section: str, key: str, value: Any) -> str:
    if value is None:
        return f"# {key} is not set: {unset_meaning(section, key)}"
    unit = UNITS.get(f"{section}.{key}")
    return f"{key} = {_toml_value(value)}" + (f"  # {unit}" if unit else "")


def to_toml(config: Config) -> str:
    """The configuration as TOML; a ``None`` value becomes a comment (TOML has no null) that
    says what it means.

    Example:
        >>> from sgrld_app.config import SamplerConfig
        >>> c = Config(sampler=SamplerConfig(metric="monge", metric_params={"alpha2": 0.5}))
        >>> from_dict(tomllib.loads(to_toml(c))) == c
        True
        >>> [line for line in to_toml(c).splitlines() if "depth" in line or "burn_in" in line]
        ['burn_in = "auto"  # minibatch steps over the whole run (not epochs) before the first
        sample; "auto": 1000, or half a run shorter than 2000']
    """
    lines: list[str] = []
    for name, section in config.to_dict().items():
        tables = {k: v for k, v in section.items() if isinstance(v, dict)}
        lines.append(f"[{name}]")
        lines += [
            _line(name, k, v)
            for k, v in section.items()
            if k not in tables and _applies(config, name, k, v)
        ]
        for key, table in tables.items():
            lines.append(f"[{name}.{key}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in table.items() if v is not None]
        lines.append("")
    return "\n".join(lines)


def write_config(config: Config, folder: str | Path) -> tuple[Path, Path]:
    """Write the resolved configuration as ``config.toml`` and ``config.json`` into ``folder``
    (each atomically, :mod:`sgrld.samples.atomic`).

    Returns:
        The two paths.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    toml_path, json_path = folder / "config.toml", folder / "config.json"
    atomic.write_text(toml_path, to_toml(config))
    atomic.write_text(json_path, json.dumps(config.to_dict(), indent=2) + "\n")
    return toml_path, json_path


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
        sgrld_app.config.key_checks.ConfigError: run.epochs: expected int, got str 'ten'
    """
    sections = {}
    for name, value in raw.items():
        if name not in SECTIONS:
            raise unknown_key(name, sorted(SECTIONS), "the configuration (sections)")
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
    except (ValueError, RecursionError) as err:  # an integer of > 4300 digits, deep nesting
        raise ConfigError(
            f"{key}: cannot read {value[:20]!r}...: {UNREADABLE_VALUE} ({type(err).__name__})"
        ) from None


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


def with_overrides(config: Config, overrides: Sequence[str]) -> Config:
    """A validated copy of ``config`` with ``key=value`` overrides applied (see
    :func:`parse_override`).

    Example:
        >>> with_overrides(Config(), ["run.epochs=2"]).run.epochs
        2
    """
    raw = config.to_dict()
    for text in overrides:
        set_dotted(raw, *parse_override(text))
    return from_dict(raw)


def _section(name: str, cls: type, raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"[{name}] must be a table, got {raw!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    values = {}
    for key, value in raw.items():
        if key not in fields:
            raise unknown_key(f"{name}.{key}", sorted(fields), f"[{name}]")
        values[key] = check_type(f"{name}.{key}", value, hints[key])
    return cls(**values)
