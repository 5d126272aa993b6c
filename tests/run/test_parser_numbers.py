"""Numeric options checked by the parser (issue 38, item 5): ``diagnose --params -1`` was a
traceback; now it is a usage error (exit 2) naming the option."""

from __future__ import annotations

import pytest

from sgrld.run import cli


@pytest.mark.parametrize("value", ["-1", "0", "x", "1.5"])
def test_diagnose_params_below_one_is_a_usage_error(value, capsys, tmp_path):
    with pytest.raises(SystemExit) as exited:
        cli.main(["diagnose", str(tmp_path), "--params", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --params: must be an integer >= 1" in err and "Traceback" not in err
