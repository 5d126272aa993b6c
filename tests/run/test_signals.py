"""Ctrl-C at any moment (issue 38, item 1): ``sgrld run`` and ``sgrld sweep`` sent SIGINT at moments
spread over their first 10 s (imports, JAX's start, the data, compilation, sampling, writing) stop
within 5 s with exit 130, one line saying what was kept and no traceback, and never complete.

Before, a signal during the imports gave a ``KeyboardInterrupt`` traceback, one inside JAX's
garbage-collection callback was printed and ignored (the run then completed all its epochs,
exit 0), and one during compilation waited for the compilation to end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import digits_toml

ROOT = Path(__file__).resolve().parents[2]
LONG = digits_toml(
    16,
    16,
    epochs=100000,
    burn_in=1,
    thin=5,
    chains=2,
    save_samples=True,
    checkpoint_every=1,
    checkpoint_seconds=0,
)
RUN_MOMENTS = [(0.5 * i, None) for i in range(1, 18)]
RUN_MOMENTS += [(0.5, "summary.json"), (2.0, "summary.json"), (0.0, "metrics.jsonl")]
SWEEP_MOMENTS = [(1.0, None), (3.0, None), (5.0, None), (7.0, None), (1.0, "summary.json")]
"""Seconds from the start, or from when a file of the results folder has content: ``summary.json``
is written just before the compilation, ``metrics.jsonl``'s first line after the first epoch. On
an idle machine the run starts compiling at about 4 s and samples from about 9 s."""
STOP_S = 5.0
CONCURRENCY = 4
"""Processes at a time: the 2 cores of CI run the 25 within the fast suite's minute."""


def _env(cache: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "JAX_PLATFORMS": "cpu",
        "JAX_COMPILATION_CACHE_DIR": str(cache),  # the sampling case needs one compile done
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "XLA_FLAGS": "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true",
    }


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Until ``path`` holds something: the run folder's files are created empty at its start
    (:func:`sgrld_app.run_folder.start`), so a moment after the first epoch waits for its line."""
    deadline = time.monotonic() + 240
    while not (path.exists() and path.stat().st_size > 0):
        assert proc.poll() is None and time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _interrupt(
    argv: list[str], moment: tuple[float, str | None], folder: Path
) -> tuple[int | None, float, str]:
    """Start ``python -m sgrld *argv`` into ``folder/out``, send SIGINT at ``moment``; return its
    exit code (None: still running ``STOP_S + 10`` s later, then killed), how long it took to stop,
    and its output."""
    folder.mkdir()
    log = folder / "log.txt"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sgrld", *argv, "--out", str(folder / "out")],
            stdout=out,
            stderr=out,
            env=_env(folder.parent / "jax_cache"),
            cwd=folder,
        )
        seconds, after = moment
        if after is not None:
            _wait_for(folder / "out" / after, proc)
        time.sleep(seconds)
        assert proc.poll() is None, f"ended before the signal at {moment}: {log.read_text()}"
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            code = proc.wait(timeout=STOP_S + 10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
    return code, time.monotonic() - sent, log.read_text()


@pytest.mark.long
def test_sigint_at_20_moments_of_run_and_5_of_sweep_stops_cleanly(tmp_path: Path):
    config = tmp_path / "long.toml"
    config.write_text(LONG)
    run = ["run", str(config)]
    sweep = ["sweep", str(config), "--grid", "sampler.learning_rate=[0.05,0.1]"]
    cases = [(run, t, f"run at {t}") for t in RUN_MOMENTS]
    cases += [(sweep, t, f"sweep at {t}") for t in SWEEP_MOMENTS]
    cases.sort(key=lambda case: (case[1][1] is None, -case[1][0]))  # the longest first
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        futures = {
            name: pool.submit(_interrupt, argv, t, tmp_path / f"case{i}")
            for i, (argv, t, name) in enumerate(cases)
        }
    failures = []
    for name, future in futures.items():
        code, took, log = future.result()
        lines = [line for line in log.splitlines() if "interrupted" in line]
        if code != 130 or took > STOP_S or "Traceback" in log or "completed" in log or not lines:
            failures.append(f"{name}: exit {code} after {took:.1f} s\n{log[-2000:]}")
    assert not failures, "\n\n".join(failures)
