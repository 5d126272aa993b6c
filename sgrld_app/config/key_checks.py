"""The checks every configuration key goes through, each raising a :class:`ConfigError` naming it.

Types are checked against the dataclass annotations of :mod:`sgrld_app.config.schema`
(:func:`check_type`), names against a fixed list (:func:`choice`, with the closest match
suggested), numbers against a bound (:func:`at_least`) and keyword arguments against the
factory they go to (:func:`check_kwargs`).

Example:
    >>> check_type("run.epochs", 3, int), check_type("sampler.temperature", 1, float)
    (3, 1.0)
    >>> try:
    ...     choice("model.kind", "mpl", ["mlp", "cnn"])
    ... except ConfigError as err:
    ...     print(err)
    model.kind: unknown value 'mpl' (did you mean 'mlp'?); choose one of mlp, cnn
"""

from __future__ import annotations

import difflib
import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any


class ConfigError(ValueError):
    """An invalid configuration; the message names the key."""


def _suggest(name: str, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_key(key: str, valid: Sequence[str], where: str) -> ConfigError:
    """The error for an unknown ``key``, listing the ``valid`` keys of ``where``.

    Example:
        >>> print(unknown_key("run.epoks", ["epochs", "thin"], "[run]"))
        unknown key 'run.epoks' (did you mean 'epochs'?); valid keys in [run]: epochs, thin
    """
    name = key.rsplit(".", 1)[-1]
    listing = ", ".join(sorted(valid)) if valid else "none"
    return ConfigError(
        f"unknown key {key!r}{_suggest(name, valid)}; valid keys in {where}: {listing}"
    )


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", str(annotation))


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

UNREADABLE_VALUE = "an integer with thousands of digits or arrays nested too deep to read"
"""Why :mod:`tomllib` failed with a ``ValueError`` or ``RecursionError`` (not a syntax error)."""


def _check_scalar(key: str, value: Any, annotation: type) -> Any:
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
    if isinstance(value, int) and not _INT64_MIN <= value <= _INT64_MAX:
        raise ConfigError(
            f"{key}: an integer of {value.bit_length()} bits; TOML's integers are 64-bit"
        )
    if annotation is float:
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{key}: must be finite, got {value}")
    return value


def check_type(key: str, value: Any, annotation: Any) -> Any:
    """``value`` converted to ``annotation`` (an int to float, a list to tuple), or an error.

    Args:
        key: the dotted key, for the message.
        value: the value read from TOML.
        annotation: ``bool``, ``int``, ``float``, ``str``, ``X | None``, ``tuple[X, ...]`` or
            ``dict[str, Any]``.

    Returns:
        The converted value.

    Raises:
        ConfigError: naming ``key``, the expected type and the value.
    """
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        errors = []
        for option in options:
            try:
                return check_type(key, value, option)
            except ConfigError as err:
                errors.append(err)
        value_errors = [e for e in errors if not str(e).startswith(f"{key}: expected")]
        if len(errors) == 1 or value_errors:  # the type matched and the value did not
            raise (value_errors or errors)[0]
        expected = " or ".join(_type_name(option) for option in options)
        raise ConfigError(f"{key}: expected {expected}, got {type(value).__name__} {value!r}")
    if value is None:
        raise ConfigError(f"{key}: a value is required (TOML has no null; leave the key out)")
    if origin is tuple:
        (item,) = {a for a in typing.get_args(annotation) if a is not Ellipsis}
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key}: expected a list of {_type_name(item)}, got {value!r}")
        return tuple(check_type(f"{key}[{i}]", v, item) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a table of keyword arguments, got {value!r}")
        return dict(value)
    return _check_scalar(key, value, annotation)


_SCALARS = (bool, int, float, str)


def declared_type(factory: Callable[..., Any], name: str, default: Any) -> Any:
    """What keyword ``name`` of ``factory`` is checked against: its annotation where that is a
    scalar or a union of scalars (``float | str``: either), else the type of its default (None:
    unchecked here, the factory checks it)."""
    try:
        hint = typing.get_type_hints(factory).get(name)
    except (NameError, TypeError):  # an annotation that does not resolve at run time
        hint = None
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    options = typing.get_args(hint) if union else (hint,)
    if hint is not None and all(o in _SCALARS or o is type(None) for o in options):
        return hint
    if default is inspect.Parameter.empty or default is None:
        return None
    return type(default)


def check_kwargs(key: str, factory: Callable[..., Any], params: Mapping[str, Any]) -> None:
    """Check ``params`` against the factory's signature (names and types), then build it once.

    Example:
        >>> def gaussian(scale=1.0):
        ...     return scale
        >>> check_kwargs("prior.params", gaussian, {"scael": 2.0})
        Traceback (most recent call last):
        ...
        sgrld_app.config.key_checks.ConfigError: unknown key 'prior.params.scael' (did you mean
        'scale'?)...
    """
    signature = inspect.signature(factory)
    valid = [p.name for p in signature.parameters.values()]
    for name, value in params.items():
        if name not in signature.parameters:
            raise unknown_key(f"{key}.{name}", valid, f"[{key}] of {factory.__name__}()")
        expected = declared_type(factory, name, signature.parameters[name].default)
        if expected is not None:
            check_type(f"{key}.{name}", value, expected)
    try:
        factory(**params)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{key}: {err}") from err


def choice(key: str, value: str, choices: Sequence[str]) -> None:
    """Check that ``value`` is one of ``choices`` (the closest one suggested if not)."""
    if value not in choices:
        raise ConfigError(
            f"{key}: unknown value {value!r}{_suggest(value, choices)}; choose one of "
            + ", ".join(choices)
        )


def at_least(key: str, value: float | None, low: float, *, strict: bool = False) -> None:
    """Check ``value >= low`` (``> low`` if ``strict``); ``None`` (not set) passes.

    Example:
        >>> at_least("run.thin", 0, 1)
        Traceback (most recent call last):
        ...
        sgrld_app.config.key_checks.ConfigError: run.thin: must be >= 1, got 0
    """
    if value is not None and (value <= low if strict else value < low):
        raise ConfigError(f"{key}: must be {'>' if strict else '>='} {low}, got {value}")
