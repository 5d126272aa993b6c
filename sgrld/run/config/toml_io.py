"""A configuration in files: read TOML with overrides (:func:`load_config`), write it back.

:func:`to_toml` writes every key, its default included, so the written ``config.toml`` says what
a run used; ``sgrld run --help`` shows ``to_toml(Config())``.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sgrld.run.config.key_checks import UNREADABLE_VALUE, ConfigError, check_type, unknown_key
from sgrld.run.config.schema import SECTIONS, Config
from sgrld.run.config.validation import validate
from sgrld.samples import atomic


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


def to_toml(config: Config) -> str:
    """The configuration as TOML; a ``None`` value becomes a comment (TOML has no null).

    Example:
        >>> from sgrld.run.config import SamplerConfig
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
        sgrld.run.config.key_checks.ConfigError: run.epochs: expected int, got str 'ten'
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
