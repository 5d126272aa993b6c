"""Bad inputs to ``sgrld run`` and ``sgrld demo`` found before anything compiles (issue 18, item 7).

Each case must end in the library's one-line error (``sgrld: error: ...`` naming the key, flag or
folder) with exit code 2, never a traceback, and must leave no results behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sgrld_app import cli

TINY = ["--set", "data.name=digits", "--set", "model.widths=[8]", "--set", "run.epochs=1"]


def _error(argv: list[str], capsys) -> str:
    """The one line ``sgrld`` printed for ``argv``, after checking exit code 2."""
    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("sgrld: error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_results_folder_that_is_a_file(tmp_path: Path, capsys):
    (tmp_path / "f").write_text("")
    err = _error(["run", *TINY, "--out", str(tmp_path / "f")], capsys)
    assert f"{tmp_path / 'f'} is a file" in err


def _os_error(argv: list[str], capsys) -> str:
    """The one line ``sgrld`` printed for ``argv``, after checking the OS-error exit code 4."""
    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == cli.EXIT_OS_ERROR, err
    assert err.startswith("sgrld: error: could not write ") and "\n" not in err
    assert "Traceback" not in err and "nothing was written" in err
    return err


def test_results_folder_under_a_file(tmp_path: Path, capsys):
    (tmp_path / "f").write_text("")
    err = _os_error(["run", *TINY, "--out", str(tmp_path / "f" / "sub")], capsys)
    assert "cannot write the results folder" in err and "Not a directory" in err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc")
def test_results_folder_in_proc(capsys):
    err = _os_error(["run", *TINY, "--out", f"/proc/sgrld-{os.getpid()}"], capsys)
    assert "could not write /proc/" in err and "cannot write the results folder" in err


def test_unwritable_results_folder(tmp_path: Path, capsys, monkeypatch):
    # root ignores permission bits, so the refusal of the file system is simulated
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.TemporaryFile", refuse)
    err = _os_error(["run", *TINY, "--out", str(tmp_path / "r")], capsys)
    assert "Permission denied" in err and "choose a folder you may write to" in err


def test_empty_out_is_refused_not_replaced_by_the_default(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = _error(["run", *TINY, "--out", ""], capsys)
    assert "out.folder" in err and not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (["data.batch_size=5000"], ["data.batch_size = 5000", "1258 examples"]),
        (["data.train_size=3"], ["data.batch_size = 100", "(data.train_size = 3)"]),
        (["run.burn_in=5000"], ["run.burn_in = 5000", "keep no sample", "run.epochs = 1"]),
        ([], ['run.burn_in = "auto" (6 steps)', "keep no sample", "12 steps"]),  # half the run
        (["run.burn_in=0", "run.thin=50"], ["run.thin = 50", "after step 50"]),
    ],
)
def test_runs_that_cannot_sample_are_refused_by_key(tmp_path: Path, capsys, overrides, words):
    sets = [arg for o in overrides for arg in ("--set", o)]
    err = _error(["run", *TINY, *sets, "--out", str(tmp_path / "r")], capsys)
    for word in words:
        assert word in err
    assert not (tmp_path / "r" / "summary.json").exists()


def test_exact_correction_on_a_large_network_is_refused_with_its_size(tmp_path: Path, capsys):
    sets = ["model.widths=[400,400]", "sampler.metric=rmsprop", "sampler.correction=exact"]
    sets += ["run.burn_in=0", "run.thin=1"]
    argv = ["run", *TINY, *[a for s in sets for a in ("--set", s)], "--out", str(tmp_path / "r")]
    err = _error(argv, capsys)
    assert "D = 190,416" in err and "135 GiB" in err and '"hutchinson"' in err


def test_demo_epochs_too_few_names_the_flag(tmp_path: Path, capsys):
    err = _error(["demo", "--epochs", "2", "--out", str(tmp_path)], capsys)
    assert err.startswith("sgrld: error: --epochs 2") and "keep no sample" in err
