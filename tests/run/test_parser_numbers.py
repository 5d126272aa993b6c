"""Numeric options checked by the parser (issue 38, item 5): ``diagnose --params -1`` was a
traceback; now it is a usage error (exit 2) naming the option."""

from __future__ import annotations

import pytest

from sgrld_app import cli


@pytest.mark.parametrize("value", ["-1", "0", "x", "1.5"])
def test_diagnose_params_below_one_is_a_usage_error(value, capsys, tmp_path):
    with pytest.raises(SystemExit) as exited:
        cli.main(["diagnose", str(tmp_path), "--params", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --params: must be an integer >= 1" in err and "Traceback" not in err


def _numeric_options():
    """(command, option, type) of every option of run, sweep, export, diagnose and demo whose
    value is a number."""
    from sgrld_app.arguments import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    found = []
    for name in ("run", "sweep", "export", "diagnose", "demo"):
        for action in commands[name]._actions:
            kind = getattr(action.type, "__name__", "")
            if action.type in (int, float) or kind.startswith(("integer", "positive")):
                found.append((name, action.option_strings[-1], action.type))
    return found


def test_every_numeric_option_is_checked_by_the_parser():
    """No numeric option is a bare ``int`` or ``float``: each is range-checked when parsed."""
    options = _numeric_options()
    assert len(options) >= 10
    assert [(c, o) for c, o, kind in options if kind in (int, float)] == []


@pytest.mark.parametrize("command,option", [(c, o) for c, o, _ in _numeric_options()])
@pytest.mark.parametrize("value", ["-1", "x", "99999999999999999999.5"])
def test_a_bad_number_is_a_usage_error_naming_its_option(command, option, value, capsys):
    argv = [command, *(["OUT"] if command in ("export", "diagnose") else []), option, value]
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and "Traceback" not in err
