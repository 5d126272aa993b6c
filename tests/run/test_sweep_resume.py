"""``sgrld sweep --resume``: a sweep killed after its first checkpoint and resumed writes the table
of an uninterrupted sweep; a resume with another grid or replicates is refused, naming them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

import sgrld
from sgrld_app import checkpoint, cli
from tests.helpers import cpu_env
from tests.run.test_checkpoint import TIMING
from tests.run.test_sweep import LRS, TINY

pytestmark = pytest.mark.long  # its tests share a module fixture: scheduled together, first

SWEEP = [
    "sweep",
    "--grid",
    f"sampler.learning_rate={LRS}",
    "--replicates",
    "2",
    *(
        arg
        for t in [*TINY, "run.save_samples=true", "run.chains=2", "run.checkpoint_seconds=0"]
        for arg in ("--set", t)
    ),
]
"""2 learning rates x 2 replicates x 2 chains, 2 epochs, a checkpoint after each
(run.checkpoint_every = 1, run.checkpoint_seconds = 0)."""


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The results folder of :data:`SWEEP`, uninterrupted, on the suite's one device."""
    ref = tmp_path_factory.mktemp("sweep") / "ref"
    assert cli.main([*SWEEP, "--out", str(ref)]) == 0
    return ref


def _records(out: Path) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


def _killed_after_the_first_checkpoint(out: Path, log: Path) -> int:
    """``sgrld sweep`` in a subprocess, SIGKILLed once epoch 1's checkpoint is written.

    Every checkpoint write pauses 5 s before its rename (:data:`sgrld_app.checkpoint.PAUSE_ENV`), so
    the process is still in epoch 2 (or writing its checkpoint) for at least 5 s after epoch 1's
    appears: time for the poller to see it on a loaded machine.
    """
    env = {**os.environ, "JAX_PLATFORMS": "cpu", checkpoint.PAUSE_ENV: "5"}
    with log.open("w") as f:
        cmd = [sys.executable, "-m", "sgrld", *SWEEP, "--out", str(out)]
        proc = subprocess.Popen(cmd, stdout=f, stderr=f, env=env)
    first = checkpoint.path_of(out, 1)
    deadline = time.monotonic() + 240
    while not first.exists():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the first checkpoint was never written"
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    return proc.wait(timeout=60)


def test_killed_sweep_resumes_to_the_table_of_an_uninterrupted_one(reference, tmp_path, capsys):
    ref, out = reference, tmp_path / "out"
    assert _killed_after_the_first_checkpoint(out, tmp_path / "log.txt") == -signal.SIGKILL
    assert json.loads((out / "summary.json").read_text())["status"] == "running"
    assert not (out / "sweep.json").exists()
    capsys.readouterr()

    # Another grid or number of replicates is refused, naming it; the folder is left as it was.
    resume = ["sweep", "--resume", str(out)]
    assert cli.main([*resume, "--grid", "sampler.learning_rate=[0.05, 0.1]"]) == 2
    err = capsys.readouterr().err
    assert "--grid sampler.learning_rate (was [0.05, 0.2], now [0.05, 0.1])" in err, err
    assert cli.main([*resume, "--replicates", "3"]) == 2
    assert "--replicates (was 2, now 3)" in capsys.readouterr().err

    # Resumed with its own grid and replicates (read from the folder).
    assert cli.main(resume) == 0
    assert json.loads((out / "summary.json").read_text())["status"] == "completed"
    assert (out / "sweep.json").read_text() == (ref / "sweep.json").read_text()
    assert (out / "sweep.md").read_text() == (ref / "sweep.md").read_text()
    assert _records(out) == _records(ref)
    got, want = sgrld.load_samples(out), sgrld.load_samples(ref)
    for a, b in zip(jax.tree.leaves(got[:7]), jax.tree.leaves(want[:7]), strict=True):
        assert np.array_equal(a, b)


def test_resume_of_a_run_that_is_not_a_sweep_is_refused(tmp_path, capsys):
    (tmp_path / "config.toml").write_text("")
    (tmp_path / "summary.json").write_text(json.dumps({"status": "running", "meta": {}}))
    assert cli.main(["sweep", "--resume", str(tmp_path)]) == 2
    assert "is not a sweep (sgrld run --resume continues it)" in capsys.readouterr().err


def test_resume_with_overwrite_or_another_folder_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["sweep", "--resume", str(tmp_path), "--overwrite"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert cli.main(["sweep", "--resume", str(tmp_path), "--out", str(tmp_path / "b")]) == 2
    assert "name different folders" in capsys.readouterr().err


@pytest.mark.slow
def test_sweep_sharded_over_eight_devices_gives_the_unsharded_table(reference, tmp_path):
    """``sgrld sweep --devices 8`` in a process with eight CPU devices (as
    tests/chains/test_devices.py runs them): 2 learning rates x 2 replicates x 2 chains, one chain a
    device (the mesh divides the sweep's 8 chains, not run.chains = 2). Its table is the unsharded
    sweep's, its samples agree to 1e-6 (the tolerance test_devices.py states for sharded chains
    against one unsharded
    run: XLA's CPU code for a vmapped gradient depends on how many chains it batches, so the two
    agree to rounding only; measured 8.9e-8) and its scores to 1e-5 relative (measured
    1.8e-7)."""
    ref, out = reference, tmp_path / "out"
    cmd = [sys.executable, "-m", "sgrld", *SWEEP, "--out", str(out), "--devices", "8"]
    proc = subprocess.run(cmd, env=cpu_env(8), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["devices"]["devices"] == 8
    got, want = (json.loads((o / "sweep.json").read_text()) for o in (out, ref))
    assert got["rows"] == want["rows"] and got["best"] == want["best"]
    for a, b in zip(got["scores"], want["scores"], strict=True):
        for name in a:
            np.testing.assert_allclose(a[name], b[name], rtol=1e-5)
    sharded, whole = sgrld.load_samples(out), sgrld.load_samples(ref)
    for a, b in zip(jax.tree.leaves(sharded.params), jax.tree.leaves(whole.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--devices", "2"], "--devices 2, --data-parallel 1, 8 chains (settings x replicates"),
        (["--devices", "most"], 'devices must be "all" or an integer >= 1'),
        (["--data-parallel", "2"], "--data-parallel 2 needs a mesh: give --devices too"),
    ],
)
def test_a_mesh_that_does_not_fit_the_sweep_is_refused(tmp_path, capsys, flags, message):
    """The suite's process has one device."""
    assert cli.main([*SWEEP, "--out", str(tmp_path / "x"), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
