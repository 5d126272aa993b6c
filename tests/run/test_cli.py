"""The ``sgrld`` command: help, ``run`` on a tiny digits configuration, data and config errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sgrld_app import arguments, cli
from sgrld_app.arguments import reproductions
from tests.helpers import digits_toml

TINY = digits_toml(epochs=2, burn_in=10, thin=5)


def test_help_lists_commands_and_examples(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for word in ("run", "demo", "reproduce", "examples:", "sgrld reproduce mnist-mlp --quick"):
        assert word in text


@pytest.mark.parametrize(
    "argv, words",
    [
        (["run", "--help"], ["--set KEY=VALUE", "[sampler.metric_params]", "burn_in = \"auto\""]),
        (["demo", "--help"], ["--epochs", "--out"]),
        (["reproduce", "mnist-mlp", "--help"], ["--quick", "--data-dir", "--prior", "--metrics"]),
        (["reproduce", "funnel", "--help"], ["--quick"]),
    ],
)
def test_subcommand_help(argv, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for word in words:
        assert word in text


def test_every_reproduction_is_found_through_its_entry_point():
    found = reproductions()
    assert {"funnel", "mnist-mlp", "natural-langevin", "stationary-1d"} <= set(found)
    assert all(r.summary and callable(r.add_arguments) and callable(r.run) for r in found.values())


def test_run_writes_every_file(tmp_path: Path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "out dir"
    code = cli.main(["run", str(config), "--set", "run.seed=1", "--out", str(out)])
    assert code == 0
    for name in ("config.toml", "config.json", "metrics.jsonl", "summary.json", "curves.png"):
        assert (out / name).stat().st_size > 0, name
    resolved = json.loads((out / "config.json").read_text())
    assert resolved["run"]["seed"] == 1 and resolved["out"]["folder"] == str(out)
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2]
    # 1258 // 64 = 19 steps per epoch: samples at steps 14, 19, ..., 34 -> 1 + 4
    assert json.loads(lines[-1])["samples"] == 5
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert "completed 2 epochs" in capsys.readouterr().out


def test_config_error_exit_code_2(tmp_path: Path, capsys):
    config = tmp_path / "bad.toml"
    config.write_text("[sampler]\nlearning_rat = 0.1\n")
    assert cli.main(["run", str(config)]) == 2
    err = capsys.readouterr().err
    assert "sampler.learning_rat" in err and "did you mean 'learning_rate'" in err


def test_missing_mnist_exit_code_2_with_checksum_and_url(tmp_path: Path, capsys):
    code = cli.main(["reproduce", "mnist-mlp", "--quick", "--data-dir", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "train-images-idx3-ubyte" in err and str(tmp_path) in err
    assert "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db" in err
    assert "http" in err and "Traceback" not in err


def test_reproduce_without_installed_reproductions_says_how_to_install(monkeypatch, capsys):
    # a checkout on PYTHONPATH that pip never installed: no entry points, so argparse's own
    # "invalid choice: 'mnist-mlp' (choose from )" was all a user got
    monkeypatch.setattr(arguments, "reproductions", dict)
    assert cli.main(["reproduce", "mnist-mlp", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "no reproductions are installed" in err and "pip install -e ." in err


def test_help_examples_keep_their_line_continuations():
    # a "\" not doubled in the help's source joins two lines with a run of spaces
    for line in arguments.EPILOG.splitlines():
        assert not re.search(r"\S {3,}--", line), line
        if line.lstrip().startswith("sgrld ") and "\\" in line:
            assert line.endswith(" \\"), line


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_data_dir_option_reaches_the_configuration(command, tmp_path: Path, capsys):
    # the help's epilogue promised --data-dir; only reproduce and demo had it
    argv = [command, "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "out")]
    assert cli.main([*argv, "--set", "data.name=mnist"]) == 2
    err = capsys.readouterr().err
    assert f"not found in {tmp_path / 'data' / 'mnist'}" in err and "--data-dir" in err
