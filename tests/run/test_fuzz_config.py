"""Fuzzing the configuration: every TOML file and ``--set`` override either gives a valid
:class:`~sgrld_app.config.Config` that writes back and reloads equal, or raises
:class:`~sgrld_app.config.ConfigError` naming the file; never another exception.

Files are a damaged copy of a valid ``config.toml`` (:func:`tests.fuzzing.damaged`) or TOML
documents of the real sections and keys holding values of any type (integers past 64 bits,
infinities, nested arrays and tables). Example counts: :data:`tests.fuzzing.FAST` per parser (file,
overrides) in the normal run, :data:`tests.fuzzing.SLOW` under ``-m slow``. The bugs these found
have a regression test each at the end of the file.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from hypothesis import strategies as st

from sgrld_app.config import (
    SECTIONS,
    Config,
    ConfigError,
    SamplerConfig,
    load_config,
    parse_override,
    to_toml,
)
from tests.fuzzing import BUDGETS, damaged, fuzz

KEYS = {name: [f.name for f in dataclasses.fields(cls)] for name, cls in SECTIONS.items()}
PARAMS = ["alpha2", "decay", "eps", "update_every", "examples", "labels", "weight_scale", "df"]
WORDS = ["monge", "fisher_diag", "shampoo", "laplace", "horseshoe", "uci_boston", "digits", "cnn"]
WORDS += ["regression_mlp", "hutchinson", "exact", "empirical", "inverse_sqrt", ""]


def toml_value(value) -> str:
    """``value`` as a TOML literal (an inline table for a dict)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


SCALARS = st.one_of(
    st.booleans(),
    st.integers(-5, 600),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.sampled_from(WORDS),
    st.text(max_size=6),
)
GIANTS = ["1" * 5000, "[" * 3000, "9" * 30, "1e999", "-inf", "nan", "0x7fffffffffffffff"]
"""Literals past what TOML readers hold: thousands of digits, deep arrays, past 64 bits."""

VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(PARAMS) | st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def sections() -> st.SearchStrategy[dict]:
    """``{section: {key: value}}`` over the real sections and keys, and a few made-up ones."""
    section = st.sampled_from([*KEYS, "extra"])
    return st.dictionaries(
        section,
        st.dictionaries(st.sampled_from(sum(KEYS.values(), ["epoks"])), VALUES, max_size=3),
        max_size=3,
    )


def toml_document(tables: dict) -> bytes:
    lines = []
    for name, table in tables.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in table.items()]
    return "\n".join(lines).encode("utf-8", "surrogatepass")


def overrides() -> st.SearchStrategy[list[str]]:
    """``--set`` texts: real dotted keys (and made-up ones) with TOML literals or free text."""
    dotted = [f"{s}.{k}" for s, keys in KEYS.items() for k in keys]
    dotted += [f"sampler.metric_params.{p}" for p in PARAMS] + ["prior.params.weight_scale"]
    key = st.sampled_from(dotted) | st.text(max_size=8)
    value = VALUES.map(toml_value) | st.text(max_size=8) | st.sampled_from(GIANTS)
    text = st.builds("{}={}".format, key, value) | st.text(max_size=12)
    return st.lists(text, max_size=3)


VALID = Config(sampler=SamplerConfig(metric="monge", metric_params={"alpha2": 0.5}))
VALID_TOML = to_toml(VALID).encode()


def assert_written_back(config: Config, path: Path) -> None:
    """``config`` written as TOML to ``path`` reloads equal (``to_toml`` can write every value)."""
    path.write_text(to_toml(config))
    assert load_config(path) == config


@pytest.mark.parametrize("budget", BUDGETS)
def test_fuzz_config_file(budget, tmp_path):
    path = tmp_path / "run.toml"
    giant = st.sampled_from(GIANTS).map(lambda text: f"[run]\nepochs = {text}\n".encode())
    files = damaged(VALID_TOML, sections().map(toml_document), giant)

    @fuzz(budget, st.tuples(files, overrides() | st.just([])))
    def _(case):
        content, sets = case
        path.write_bytes(content)
        try:
            config = load_config(path, sets)
        except ConfigError as err:
            assert str(path) in str(err), str(err)
            return
        assert_written_back(config, tmp_path / "written.toml")


@pytest.mark.parametrize("budget", BUDGETS)
def test_fuzz_set_overrides(budget, tmp_path):
    @fuzz(budget, overrides())
    def _(sets):
        try:
            config = load_config(None, sets)
        except ConfigError:
            return
        assert_written_back(config, tmp_path / "written.toml")


# --------------------------------------------------------------------------- bugs found


def test_config_path_that_is_a_directory_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=f"config file {tmp_path} is a directory"):
        load_config(tmp_path)


def test_config_file_not_utf8_is_a_config_error(tmp_path):
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff")
    with pytest.raises(ConfigError, match="binary.toml: not a TOML text file \\(byte 0 is not"):
        load_config(path)


def test_unreadable_config_file_is_a_config_error(tmp_path, monkeypatch):
    path = tmp_path / "secret.toml"
    path.write_text("[run]\n")

    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", refuse)  # chmod 000 does not stop root
    with pytest.raises(ConfigError, match="secret.toml cannot be read: Permission denied"):
        load_config(path)


def test_bad_key_in_a_config_file_names_the_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[run]\nepochs = 'ten'\n")
    with pytest.raises(ConfigError, match="run.epochs: expected int.*read from .*run.toml"):
        load_config(path)


@pytest.mark.parametrize("text", ["1" * 5000, "[" * 5000])
def test_file_value_of_thousands_of_digits_or_deep_arrays_is_a_config_error(tmp_path, text):
    path = tmp_path / "run.toml"
    path.write_text(f"[run]\nepochs = {text}\n")
    with pytest.raises(ConfigError, match="run.toml: an integer with thousands of digits"):
        load_config(path)


@pytest.mark.parametrize("text", ["1" * 5000, "[" * 5000])
def test_override_of_thousands_of_digits_or_deep_arrays_is_a_config_error(text):
    with pytest.raises(ConfigError, match="run.epochs: cannot read .*thousands of digits"):
        parse_override(f"run.epochs={text}")


def test_integer_beyond_64_bits_is_a_config_error():
    with pytest.raises(ConfigError, match="sampler.learning_rate: an integer of 1326 bits"):
        load_config(None, ["sampler.learning_rate=" + "1" * 400])
    with pytest.raises(ConfigError, match="run.seed: an integer of 71 bits"):
        load_config(None, [f"run.seed={2**70}"])
