"""A configuration in files: read TOML with overrides (:func:`load_config`), write it back.

:func:`to_toml` writes every key, its default included, so the written ``config.toml`` says what
a run used; ``sgrld run --help`` shows ``to_toml(Config())``.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sgrld import atomic
from sgrld.config.checks import UNREADABLE_VALUE, ConfigError
from sgrld.config.schema import Config, from_dict, parse_override, set_dotted


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
        >>> from sgrld.config import SamplerConfig
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
    (each atomically, :mod:`sgrld.atomic`).

    Returns:
        The two paths.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    toml_path, json_path = folder / "config.toml", folder / "config.json"
    atomic.write_text(toml_path, to_toml(config))
    atomic.write_text(json_path, json.dumps(config.to_dict(), indent=2) + "\n")
    return toml_path, json_path
