"""A run whose write fails mid-run (a checkpoint folder made read-only, a full disk) marks its
``summary.json`` ``"failed"``, naming the error, the epochs completed and what ``--resume`` does,
where the folder still takes that file; the command's one-line error and exit code 4 stay.

Before, ``summary.json`` stayed ``"running"`` (with ``epochs_completed`` 0) for good. Also: what
:class:`sgrld_app.run_end.Summary` lets the signal watcher write, and what
:func:`sgrld_app.run_end.kept` says of a folder.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path

import pytest

from sgrld.samples import atomic, results
from sgrld_app import cli, records, run_end
from sgrld_app.config import load_config
from sgrld_app.launch import run_config
from tests.run.test_faults import TINY  # 3 epochs, a checkpoint each


def _fail(monkeypatch, parts: dict[str, int]) -> None:
    """Make the ``n``-th write of a path containing each key of ``parts`` (``n`` its value) and
    every later one fail with ``EPERM``, as the atomic writer reports it (as after ``chattr +i``
    on the folder)."""
    seen: dict[str, int] = {}

    def failing(real):
        def write(path, *args):
            for part, nth in parts.items():
                if part in str(path):
                    seen[part] = seen.get(part, 0) + 1
                    if seen[part] >= nth:
                        code = errno.EPERM
                        raise atomic.WriteError(code, os.strerror(code), str(path))
            return real(path, *args)

        return write

    monkeypatch.setattr(atomic, "replacing", failing(atomic.replacing))
    monkeypatch.setattr(atomic, "appending", failing(atomic.appending))


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("config") / "tiny.toml"
    path.write_text(TINY)
    return path


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_a_failed_checkpoint_write_marks_the_summary_failed(monkeypatch, capsys, config, tmp_path):
    out = tmp_path / "out"
    _fail(monkeypatch, {"checkpoints/epoch_0002.npz": 1})
    code = cli.main(["run", str(config), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_OS_ERROR == 4, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"sgrld: error: could not write {out}/checkpoints/epoch_0002.npz")
    summary = _summary(out)
    assert summary["status"] == "failed", summary
    assert summary["epochs_completed"] == 2 and summary["final"]["epoch"] == 2
    assert summary["message"] == (
        f"failed after 2 epoch(s): could not write {out}/checkpoints/epoch_0002.npz (Operation "
        "not permitted); --resume continues it from its newest checkpoint, of epoch 1"
    )
    monkeypatch.undo()
    assert cli.main(["run", "--resume", str(out)]) == 0, capsys.readouterr().err
    assert _summary(out)["status"] == "completed"


def test_a_summary_that_cannot_be_written_stays_running_and_the_line_says_so(
    monkeypatch, capsys, config, tmp_path
):
    out = tmp_path / "out"
    _fail(monkeypatch, {"checkpoints/epoch_0002.npz": 1, "summary.json": 2})  # after the start
    assert cli.main(["run", str(config), "--out", str(out)]) == 4
    err = capsys.readouterr().err
    assert "epoch_0002.npz (Operation not permitted)" in err and "summary.json not updated" in err
    assert _summary(out)["status"] == "running"


def test_another_error_mid_run_marks_the_summary_failed_and_is_raised(
    monkeypatch, config, tmp_path
):
    real, calls = records.record, []

    def second_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("a bug in epoch 2")
        return real(*args, **kwargs)

    monkeypatch.setattr(records, "record", second_fails)
    with pytest.raises(RuntimeError, match="a bug in epoch 2"):
        run_config(load_config(config, []), out=tmp_path / "out")
    summary = _summary(tmp_path / "out")
    assert summary["status"] == "failed" and summary["epochs_completed"] == 1, summary
    assert "RuntimeError: a bug in epoch 2" in summary["message"]


def test_the_watchers_last_word_never_replaces_the_runs_own(tmp_path, monkeypatch):
    monkeypatch.setattr(run_end.Summary, "LOCK_S", 0.1)
    interim = {"status": "interrupted", "epochs_completed": 0}
    own = run_end.Summary(tmp_path)
    own.write({"status": "completed", "epochs_completed": 3})
    assert own.last_word(lambda: interim) is None  # the run's own summary stands
    assert _summary(tmp_path)["status"] == "completed"
    watcher = run_end.Summary(tmp_path)
    assert watcher.last_word(lambda: interim) is None
    assert _summary(tmp_path) == interim
    # It keeps the lock: nothing written after it, and a second last word does not wait long.
    later = threading.Thread(target=watcher.write, args=({"status": "completed"},), daemon=True)
    later.start()
    later.join(0.3)
    assert later.is_alive() and _summary(tmp_path) == interim
    assert watcher.last_word(lambda: interim) == "it was being written as the process ended"


def test_kept_says_what_is_on_disk(tmp_path):
    out = tmp_path / "out"
    assert "(no summary.json yet)" in run_end.kept(out, "run")
    out.mkdir()
    (out / "summary.json").write_text("{")  # torn by hand: the run writes it atomically
    assert "(its summary.json unreadable)" in run_end.kept(out, "run")
    results.write_json(out / "summary.json", {"status": "running", "epochs_completed": 0})
    assert run_end.kept(out, "sweep", why="the disk is full") == (
        f"what the sweep wrote so far is in {out} (its summary.json not updated: the disk is "
        f"full); it has no checkpoint, so there is nothing to resume from: `sgrld sweep --resume "
        f"{out}` starts it again from epoch 0"
    )
    (out / "checkpoints").mkdir()
    for name in ("epoch_0004.npz", "epoch_0005.npz", ".epoch_0006.npz.1234abcd.tmp"):
        (out / "checkpoints" / name).write_bytes(b"")
    results.write_json(out / "summary.json", {"status": "failed", "epochs_completed": 6})
    assert run_end.kept(out) == (
        f'what the run wrote so far is in {out} (its summary.json says "failed" after 6 '
        "epoch(s)); --resume continues it from its newest checkpoint, of epoch 5"
    )
