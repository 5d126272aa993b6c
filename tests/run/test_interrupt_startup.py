"""A signal that the ``sgrld`` command cannot wait for: its watcher ends the process after the
grace (:mod:`sgrld.interrupts`), here while the main thread is stuck compiling, and while it is
stuck writing the second checkpoint. ``summary.json`` then says ``"interrupted"`` with the epochs
completed so far, and the one line says truthfully whether there is a checkpoint to resume from.

Before, the watcher left ``summary.json`` at ``"running"`` for good and the line said "its
summary.json not updated; `sgrld run --resume OUT` continues from the newest checkpoint" when
there was none (a resume then started from epoch 0).

The main thread is held by a patched ``compile_epoch`` or ``checkpoint.save`` that sleeps, as XLA
holds it during a long compilation (a signal handler runs only between bytecodes), and the grace is
cut from 3 s to 0.5 s, so each case takes the command's start-up and a second.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sgrld import interrupts
from sgrld_app import cli
from tests.helpers import digits_toml

ROOT = Path(__file__).resolve().parents[2]
TINY = digits_toml(epochs=5, burn_in=1, thin=4, chains=2, checkpoint_every=1, checkpoint_seconds=0)
DRIVER = r"""
import sys, time
from pathlib import Path

mode, marker, *argv = sys.argv[1:]
sys.argv = ["sgrld", *argv]
import sgrld  # this process is the sgrld command: the guard is installed

from sgrld import interrupts
from sgrld_app import checkpoint, cli, epoch_writer

interrupts.GRACE_S = 0.5


def stall(*args, **kwargs):
    Path(marker).write_text(mode)
    time.sleep(120)  # the main thread held, as by a long XLA compilation


if mode == "compile":
    epoch_writer.compile_epoch = stall
else:  # the second checkpoint's write stalls; the first is written
    save, calls = checkpoint.save, []

    def second_stalls(*args, **kwargs):
        calls.append(1)
        return stall() if len(calls) == 2 else save(*args, **kwargs)

    checkpoint.save = second_stalls
sys.exit(cli.main())
"""
CASES = {
    "compile-SIGINT": ("compile", signal.SIGINT),
    "compile-SIGTERM": ("compile", signal.SIGTERM),
    "checkpoint-SIGINT": ("checkpoint", signal.SIGINT),
}


def _stop(folder: Path, mode: str, signum: int) -> tuple[int | None, float, str, Path]:
    """Run ``sgrld run`` in ``folder`` with the main thread held at ``mode``, send ``signum``
    there; its exit code (None: not ended 20 s later, then killed), the seconds it took to end,
    its standard error and its results folder."""
    folder.mkdir()
    (folder / "tiny.toml").write_text(TINY)
    marker, out = folder / "stalled", folder / "out"
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    # A cache of its own: a process ended by os._exit can leave a cache entry cut short, which
    # the next reader of a shared cache reports ("sgrld: warning: Error reading persistent
    # compilation cache entry ...") before it recompiles.
    cache = str(folder / "jax-cache")
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "JAX_PLATFORMS": "cpu",
        "JAX_COMPILATION_CACHE_DIR": cache,
    }
    argv = [sys.executable, "-c", DRIVER, mode, str(marker), "run", "tiny.toml", "--out", "out"]
    with (folder / "stderr.txt").open("w") as err:
        proc = subprocess.Popen(argv, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert proc.poll() is None, (folder / "stderr.txt").read_text()
            assert time.monotonic() < deadline, "the main thread never got to the stall"
            time.sleep(0.02)
        proc.send_signal(signum)
        sent = time.monotonic()
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
    return code, time.monotonic() - sent, (folder / "stderr.txt").read_text(), out


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> dict[str, tuple[int | None, float, str, Path]]:
    """All :data:`CASES` at once (each is mostly the command's start-up)."""
    root = tmp_path_factory.mktemp("stopped")
    with ThreadPoolExecutor(len(CASES)) as pool:
        futures = {
            name: pool.submit(_stop, root / name, mode, signum)
            for name, (mode, signum) in CASES.items()
        }
    return {name: future.result() for name, future in futures.items()}


def _line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("sgrld:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.long
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_signal_during_compilation_marks_the_summary_interrupted(stopped, signame):
    code, took, err, out = stopped[f"compile-{signame}"]
    assert code == interrupts.EXIT_INTERRUPTED == 130, err
    assert took < 0.5 + interrupts.LAST_WORD_S + 5, took  # the grace, the last word, slack
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["epochs_completed"] == 0, summary
    assert f"interrupted by {signame} while it compiled, before epoch 1" in summary["message"]
    assert "nothing to resume from" in summary["message"]
    assert not list(out.glob("checkpoints/*.npz"))
    assert _line(err) == (
        f"sgrld: interrupted by {signame}; what the run wrote so far is in out (its summary.json "
        'says "interrupted" after 0 epoch(s)); it has no checkpoint, so there is nothing to '
        "resume from: --resume starts it again from epoch 0"
    )


@pytest.mark.long
def test_a_signal_while_a_checkpoint_stalls_names_the_one_written(stopped, capsys):
    code, _, err, out = stopped["checkpoint-SIGINT"]
    assert code == 130, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["epochs_completed"] == 2, summary
    assert summary["final"]["epoch"] == 2
    assert "after epoch 2, before the run could stop cleanly" in summary["message"]
    assert [p.name for p in out.glob("checkpoints/*.npz")] == ["epoch_0001.npz"]
    line = _line(err)
    assert 'its summary.json says "interrupted" after 2 epoch(s)' in line, line
    assert "--resume continues it from its newest checkpoint, of epoch 1" in line, line
    assert cli.main(["run", "--resume", str(out)]) == 0, capsys.readouterr().err
    assert json.loads((out / "summary.json").read_text())["status"] == "completed"
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 5


def test_the_last_word_is_not_waited_for_beyond_its_time(monkeypatch):
    """A hook that hangs (a stalled disk) or fails leaves the command's own ``kept()``."""
    monkeypatch.setattr(interrupts, "LAST_WORD_S", 0.2)
    guard = interrupts.Guard()
    assert guard._last_word() is None  # no hook
    release = threading.Event()
    guard.last_words.append(lambda: "never said" if release.wait(10) else None)
    start = time.monotonic()
    assert guard._last_word() is None
    assert time.monotonic() - start < 2
    release.set()
    guard.last_words.append(lambda: 1 / 0)
    assert guard._last_word() is None
    guard.last_words.append(lambda: "said")
    assert guard._last_word() == "said"


def test_last_word_registers_only_while_the_block_runs(monkeypatch):
    guard = interrupts.Guard()
    monkeypatch.setattr(interrupts, "GUARD", guard)
    say = lambda: "kept"  # noqa: E731
    with interrupts.last_word(say):
        assert guard.last_words == [say]
    assert guard.last_words == []
    monkeypatch.setattr(interrupts, "GUARD", None)
    with interrupts.last_word(say):  # not the sgrld command: nothing to register with
        pass
