"""``sgrld reproduce NAME --resume``: a reproduction stopped by SIGTERM continues each run from the
newest checkpoint in its folder and ends with the records of an uninterrupted run; a finished run
is read back, not run again; a run started with other settings is refused, naming them.

Runs made by code (``psgld``, ``natural-langevin``: :func:`sgrld_app.run_folder.resume_point`) and
runs made from a configuration (``mnist-mlp``, one run and a sweep of replicates:
:func:`sgrld_app.run_folder.existing_of`) are checked on tiny MNIST files; ``monge-alpha`` and
``cifar-resnet`` reach the same function as ``mnist-mlp``.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from sgrld_app import checkpoint, cli, run_folder
from sgrld_app.epoch_writer import EpochWriter
from tests.data.test_data import write_mnist
from tests.reproductions.test_natural_langevin import easy_mnist
from tests.reproductions.test_psgld import _stubs

pytestmark = pytest.mark.reproduction

SCORES = ("epoch", "samples", "test_accuracy", "test_log_likelihood")
"""What an uninterrupted run and a resumed one must record alike (wall times differ)."""


def _scores(folder: Path) -> list[dict]:
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    return [{k: json.loads(line).get(k) for k in SCORES} for line in lines]


def _sigterm_after_first_epoch(monkeypatch) -> None:
    """Send SIGTERM once, as the first epoch of the next run is committed: the run stops after
    the epoch in flight, with a checkpoint (:mod:`sgrld.interrupts`)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can only be installed in the main thread")
    real, sent = EpochWriter.__call__, []

    def call(self, index, *args):
        stop = real(self, index, *args)
        if not sent:
            sent.append(index)
            os.kill(os.getpid(), signal.SIGTERM)
        return stop

    monkeypatch.setattr(EpochWriter, "__call__", call)


@pytest.fixture
def mnist(tmp_path: Path) -> Path:
    return write_mnist(tmp_path / "data" / "mnist", easy_mnist(600, 100), gz=True)


def _stop_resume_and_resume_again(
    argv: list[str], tmp_path: Path, folder: Path, monkeypatch, capsys
) -> tuple[Path, Path]:
    """Run ``argv`` into ``whole``; run it into ``out``, stopped by SIGTERM after an epoch, and
    resume it; check that the stopped epochs' records are kept as written and the rest are the
    uninterrupted run's; resume the finished command and check that nothing ran again.

    Returns:
      ``(out, whole)``.
    """
    out, whole = tmp_path / "out", tmp_path / "whole"
    assert cli.main([*argv, "--out", str(whole)]) == 0
    with monkeypatch.context() as patch:
        _sigterm_after_first_epoch(patch)
        assert cli.main([*argv, "--out", str(out)]) == 130
    stopped = checkpoint.latest(out / folder).epoch
    before = (out / folder / "metrics.jsonl").read_text().splitlines()  # wall times included
    assert 1 <= stopped < len(_scores(whole / folder)) and len(before) == stopped

    capsys.readouterr()
    assert cli.main([*argv, "--out", str(out), "--resume"]) == 0
    assert f"each run in {out} goes on from its newest checkpoint" in capsys.readouterr().out
    assert (out / folder / "metrics.jsonl").read_text().splitlines()[:stopped] == before
    assert _scores(out / folder) == _scores(whole / folder)

    finished = (out / folder / "metrics.jsonl").read_text()
    assert cli.main([*argv, "--out", str(out), "--resume"]) == 0
    assert (out / folder / "metrics.jsonl").read_text() == finished  # read back, not rerun
    capsys.readouterr()
    return out, whole


@pytest.mark.long
def test_psgld_network_runs_resume(tmp_path: Path, mnist: Path, monkeypatch, capsys):
    argv = ["reproduce", "psgld", "--parts", "fnn", "--archs", "16-16", "--methods", "psgld"]
    argv += ["--quick", "--noise", "bug", "--epochs", "4", "--train-size", "500"]
    argv += ["--data-dir", str(mnist.parent)]
    folder = Path("fnn") / "16-16-psgld-var1-bug"
    out, whole = _stop_resume_and_resume_again(argv, tmp_path, folder, monkeypatch, capsys)
    rows = [json.loads((o / "psgld.json").read_text())["rows"] for o in (out, whole)]
    assert [r["error"] for r in rows[0]] == [r["error"] for r in rows[1]] != ["—"]

    finished = (out / folder / "metrics.jsonl").read_text()
    other = [a if a != "500" else "400" for a in argv]  # --train-size 400: another config
    assert cli.main([*other, "--out", str(out), "--resume"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"cannot continue the run in {out / folder}" in err
    assert "config.data.train_size (was 500, now 400)" in err
    assert f"or remove {out / folder} to start that run afresh" in err
    assert (out / folder / "metrics.jsonl").read_text() == finished  # left as it was


@pytest.mark.long
@pytest.mark.parametrize("replicates", ["1", "2"])
def test_mnist_mlp_runs_and_sweeps_resume(
    tmp_path: Path, mnist: Path, monkeypatch, capsys, replicates
):
    # one replicate: a run of a configuration (run_config); two: a sweep (run_sweep)
    argv = ["reproduce", "mnist-mlp", "--quick", "--no-verify-checksums", "--train-size", "500"]
    argv += ["--validation-size", "100", "--prior", "gaussian", "--metrics", "identity"]
    argv += ["--replicates", replicates, "--data-dir", str(mnist)]
    folder = Path("gaussian-400") / "identity"
    out, whole = _stop_resume_and_resume_again(argv, tmp_path, folder, monkeypatch, capsys)
    rows = [json.loads((o / "mnist_mlp.json").read_text())["rows"] for o in (out, whole)]
    assert rows[0][0]["log p(y|X)"] == rows[1][0]["log p(y|X)"]
    assert rows[0][0]["status"] == "completed"

    assert cli.main([*argv, "--seed", "7", "--out", str(out), "--resume"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "run.seed (was 0, now 7)" in err and "needs the options it was started with" in err


@pytest.mark.long
def test_natural_langevin_runs_resume(tmp_path: Path, mnist: Path, monkeypatch, capsys):
    # 25 epochs of 5 updates, burn-in 100, thin 25: one sample (step 124), in the last epoch
    argv = ["reproduce", "natural-langevin", "--quick", "--epochs", "25", "--methods"]
    argv += ["euclidean", "--lr", "0.1", "--validation-size", "100", "--train-eval-size", "100"]
    argv += ["--data-dir", str(mnist)]
    folder = Path("euclidean") / "lr-0.1"
    out, whole = _stop_resume_and_resume_again(argv, tmp_path, folder, monkeypatch, capsys)
    rows = [json.loads((o / "natural_langevin.json").read_text())["rows"] for o in (out, whole)]
    for row in rows[0] + rows[1]:  # wall times differ
        for timed in [row] + row["grid"]:
            timed.pop("seconds", None)
    assert rows[0] == rows[1] and _scores(out / folder)[-1]["samples"] == 1
    assert _scores(out / folder)[-1]["test_accuracy"] is not None


def test_a_folder_without_a_run_starts_afresh(tmp_path: Path, monkeypatch, capsys):
    assert run_folder.resume_point(tmp_path, {"a": 1}) is None
    assert run_folder.existing_of(tmp_path / "missing", resume=True) == "overwrite"
    _stubs(monkeypatch)  # a mistyped --out is said before the runs start over
    argv = ["reproduce", "psgld", "--parts", "fnn", "--archs", "16-16", "--resume"]
    assert cli.main([*argv, "--out", str(tmp_path / "typo")]) == 0
    assert f"{tmp_path / 'typo'} does not exist yet" in capsys.readouterr().out


@pytest.mark.parametrize(
    "name", ["psgld", "natural-langevin", "mnist-mlp", "monge-alpha", "cifar-resnet"]
)
def test_reproductions_with_run_folders_take_resume(name: str, capsys):
    with pytest.raises(SystemExit):
        cli.main(["reproduce", name, "--help"])
    assert "--resume" in capsys.readouterr().out
