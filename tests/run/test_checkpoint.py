"""Checkpoints and resume: a run killed at five points and resumed equals an uninterrupted one;
config mismatches, corrupt checkpoints, re-used folders and SIGTERM."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.samples import results
from sgrld.samples.results import ResultsError
from sgrld_app import checkpoint, cli, epoch_writer, from_config, runner
from sgrld_app.config import load_config, write_config
from tests.helpers import digits_toml
from tests.run.test_runner import SCHEDULE, logistic_experiment

TINY = digits_toml(
    16,
    16,
    epochs=40,
    burn_in=10,
    thin=5,
    chains=2,
    save_samples=True,
    checkpoint_every=2,
    checkpoint_seconds=0,
)
# 40 epochs of ~78 steps: the last kill point (epoch 6) leaves 34 epochs, about a second, for the
# test's poller to see it even on a loaded machine (with 10 epochs a starved poller missed it)
TIMING = ("epoch_s", "sample_s", "eval_s", "epoch_cpu_s")
"""The fields of a record that are wall or CPU times, the only ones allowed to differ."""


def _metrics(out: Path) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


def _lines(out: Path) -> int:
    try:
        return len((out / "metrics.jsonl").read_text().splitlines())
    except FileNotFoundError:
        return 0


def _version(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns


class Sgrld:
    """``python -m sgrld run ...`` subprocesses sharing a JAX compilation cache."""

    def __init__(self, tmp: Path):
        self.tmp, self.count = tmp, 0
        self.env = {
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "JAX_COMPILATION_CACHE_DIR": str(tmp / "jax_cache"),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
        }

    def start(self, *args: str, **env: str) -> subprocess.Popen:
        self.count += 1
        log = (self.tmp / f"log{self.count}.txt").open("w")
        cmd = [sys.executable, "-m", "sgrld", "run", *args]
        return subprocess.Popen(cmd, stdout=log, stderr=log, env={**self.env, **env})

    def log(self) -> str:
        return (self.tmp / f"log{self.count}.txt").read_text()


def _kill_when(proc: subprocess.Popen, ready, sig: int = signal.SIGKILL) -> int:
    """Send ``sig`` to ``proc`` as soon as ``ready()``; return its exit code."""
    deadline = time.monotonic() + 240
    while not ready():
        assert proc.poll() is None, "the run ended before the point it was to be killed at"
        assert time.monotonic() < deadline, "the kill point was never reached"
        time.sleep(0.002)
    proc.send_signal(sig)
    return proc.wait(timeout=120)


def _after_restart(path: Path, condition):
    """``ready()``: ``path`` was replaced since now (by the resumed run) and ``condition()``."""
    before = _version(path)
    return lambda: _version(path) not in (before, None) and condition()


@pytest.mark.slow
def test_killed_five_times_and_resumed_equals_an_uninterrupted_run(tmp_path: Path):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    ref, out = tmp_path / "ref", tmp_path / "out"
    sgrld_ = Sgrld(tmp_path)
    assert sgrld_.start(str(config), "--out", str(ref)).wait(timeout=300) == 0, sgrld_.log()

    # SIGTERM as the run starts (compiling): exit 130 and a line within seconds; a compilation
    # that outlasts the guard's grace is cut (summary.json still "running"), else a clean stop.
    proc = sgrld_.start(str(config), "--out", str(out))
    code = _kill_when(proc, lambda: (out / "summary.json").exists(), signal.SIGTERM)
    assert code == 130 and "Traceback" not in sgrld_.log(), sgrld_.log()
    assert "interrupted by SIGTERM" in sgrld_.log(), sgrld_.log()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] in ("interrupted", "running"), summary

    resume = ("--resume", str(out))
    summary_json, metrics = out / "summary.json", out / "metrics.jsonl"
    points = [
        ({}, _after_restart(summary_json, lambda: True)),  # 1: starting, before any checkpoint
        ({}, _after_restart(metrics, lambda: _lines(out) >= 1)),  # 2: epoch 1, no checkpoint
        (  # 3: in the middle of writing a checkpoint (temporary file written, not renamed)
            {checkpoint.PAUSE_ENV: "300"},
            lambda: any((out / "checkpoints").glob(".*.tmp")),
        ),
        ({}, _after_restart(metrics, lambda: _lines(out) >= 5)),  # 4: between checkpoints
        ({}, _after_restart(metrics, lambda: _lines(out) >= 6)),  # 5: after a corrupt one
    ]
    for i, (env, ready) in enumerate(points):
        if i == 4:  # the newest checkpoint is corrupt: the resumed run falls back to the one before
            newest = sorted((out / "checkpoints").glob("epoch_*.npz"))[-1]
            data = bytearray(newest.read_bytes())
            data[len(data) // 2] ^= 0xFF
            newest.write_bytes(bytes(data))
        assert _kill_when(sgrld_.start(*resume, **env), ready) == -signal.SIGKILL
        if i == 4:
            assert f"{newest.name} cannot be read" in sgrld_.log(), sgrld_.log()
    assert sgrld_.start(*resume).wait(timeout=300) == 0, sgrld_.log()

    assert json.loads(summary_json.read_text())["status"] == "completed"
    assert _metrics(out) == _metrics(ref) and len(_metrics(ref)) == 40
    got, want = sgrld.load_samples(out), sgrld.load_samples(ref)
    assert got.names == want.names and sorted(got.stats) == sorted(want.stats)
    for a, b in zip(jax.tree.leaves(got[:4]), jax.tree.leaves(want[:4]), strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert sorted(p.name for p in (out / "samples").glob("*.npz")) == sorted(
        p.name for p in (ref / "samples").glob("*.npz")
    )


def test_sigterm_stops_after_the_epoch_with_a_summary_and_a_checkpoint(tmp_path, monkeypatch):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can only be installed in the main thread")
    calls, real = {"n": 0}, jax.block_until_ready

    def terminated_in_the_second_epoch(x):
        calls["n"] += 1
        if calls["n"] == 3:  # epoch 2's sampling chunk
            os.kill(os.getpid(), signal.SIGTERM)
        return real(x)

    monkeypatch.setattr(jax, "block_until_ready", terminated_in_the_second_epoch)
    before = signal.getsignal(signal.SIGTERM)
    result = runner.run(logistic_experiment(), SCHEDULE, out=tmp_path, save_samples=True)
    monkeypatch.setattr(jax, "block_until_ready", real)
    assert signal.getsignal(signal.SIGTERM) == before
    assert result.status == "interrupted" and len(result.records) == 2
    assert result.message.startswith("interrupted by SIGTERM after epoch 2")
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "interrupted"
    saved = checkpoint.latest(tmp_path)
    assert saved.epoch == 2 and [r["epoch"] for r in saved.info["records"]] == [1, 2]

    resumed = runner.run(
        logistic_experiment(), SCHEDULE, out=tmp_path, save_samples=True, resume=saved
    )
    whole = runner.run(logistic_experiment(), SCHEDULE, out=tmp_path / "whole", save_samples=True)
    assert resumed.status == "completed" and _metrics(tmp_path) == _metrics(tmp_path / "whole")
    steps = [sgrld.load_samples(o).step.tolist() for o in (tmp_path, tmp_path / "whole")]
    assert steps[0] == steps[1] and whole.status == "completed"


@pytest.mark.parametrize("seconds, written", [(0.0, [1, 2, 3]), (3600.0, [3])])
def test_checkpoint_seconds_skips_due_checkpoints_but_not_the_last(
    tmp_path, monkeypatch, seconds, written
):
    saves, real = [], checkpoint.save
    monkeypatch.setattr(
        checkpoint, "save", lambda out, epoch, *a: saves.append(epoch) or real(out, epoch, *a)
    )
    result = runner.run(logistic_experiment(), SCHEDULE, out=tmp_path, checkpoint_seconds=seconds)
    assert result.status == "completed" and saves == written
    assert checkpoint.latest(tmp_path).epoch == 3


def test_checkpoint_seconds_writes_again_once_that_long_has_passed(tmp_path, monkeypatch):
    """A fake clock that moves 30 s an epoch and a 50 s floor: the checkpoints due after epochs
    1, 3 and 5 fall within 50 s of the last, those after 2 and 4 do not; 5 is the run's last."""
    now, saves, real = [0.0], [], checkpoint.save
    clock = types.SimpleNamespace(
        monotonic=lambda: now[0], perf_counter=time.perf_counter, process_time=time.process_time
    )
    monkeypatch.setattr(epoch_writer, "time", clock)
    append = results.append_record
    monkeypatch.setattr(
        results, "append_record", lambda *a: now.__setitem__(0, now[0] + 30.0) or append(*a)
    )
    monkeypatch.setattr(
        checkpoint, "save", lambda out, epoch, *a: saves.append(epoch) or real(out, epoch, *a)
    )
    five = dataclasses.replace(SCHEDULE, epochs=5)
    result = runner.run(logistic_experiment(), five, out=tmp_path, checkpoint_seconds=50.0)
    assert result.status == "completed" and saves == [2, 4, 5]


def test_a_used_folder_is_refused_or_overwritten_without_stale_samples(tmp_path: Path):
    runner.run(logistic_experiment(), SCHEDULE, out=tmp_path, save_samples=True)
    assert len(list((tmp_path / "samples").glob("epoch_*.npz"))) == 3
    with pytest.raises(ResultsError, match="--resume .*--overwrite"):
        runner.run(logistic_experiment(), SCHEDULE, out=tmp_path, existing="refuse")
    one = dataclasses.replace(SCHEDULE, epochs=1, burn_in=0)
    runner.run(logistic_experiment(), one, out=tmp_path, save_samples=True, existing="overwrite")
    assert [p.name for p in (tmp_path / "samples").glob("epoch_*.npz")] == ["epoch_0001.npz"]
    assert sgrld.load_samples(tmp_path).step.tolist() == [3, 7]
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["epoch_0001.npz"]


def test_sgrld_run_refuses_a_folder_that_holds_a_run(tmp_path: Path, capsys):
    write_config(load_config(None, ["data.name=digits"]), tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"epoch": 1}\n')
    assert cli.main(["run", "--set", "data.name=digits", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--resume" in err and "--overwrite" in err
    assert (tmp_path / "metrics.jsonl").read_text() == '{"epoch": 1}\n'


@pytest.mark.parametrize("with_checkpoint", [False, True])
def test_resume_with_another_configuration_names_the_keys(tmp_path, capsys, with_checkpoint):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "out"
    before = load_config(config, [f"out.folder={json.dumps(str(out))}"])
    write_config(before, out)
    if with_checkpoint:
        info = {"meta": {"config": before.to_dict()}, "records": [], "schedule": {}}
        checkpoint.save(out, 1, {"carry": jnp.zeros(2)}, info)
    argv = ["run", str(config), "--resume", str(out), "--set", "run.seed=7"]
    assert cli.main([*argv, "--set", "model.widths=[8]"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "model.widths (was [16], now [8]); run.seed (was 0, now 7)" in err


def test_a_corrupt_or_torn_checkpoint_falls_back_to_the_previous_with_a_warning(tmp_path):
    tree = {"w": jnp.arange(3.0), "keys": jax.random.split(jax.random.key(1), 2)}
    for epoch in (1, 2, 3):
        checkpoint.save(tmp_path, epoch, {"t": tree}, {"records": [{"epoch": epoch}]})
    files = sorted((tmp_path / "checkpoints").iterdir())
    assert [p.name for p in files] == ["epoch_0002.npz", "epoch_0003.npz"]
    data = bytearray(files[1].read_bytes())
    data[len(data) // 2] ^= 1
    files[1].write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="epoch_0003.npz .*; using epoch_0002.npz instead"):
        saved = checkpoint.latest(tmp_path)
    back = checkpoint.restore(saved, "t", tree)
    assert saved.epoch == 2 and saved.info["records"] == [{"epoch": 2}]
    assert np.array_equal(jax.random.key_data(back["keys"]), jax.random.key_data(tree["keys"]))
    files[0].write_bytes(files[0].read_bytes()[:100])  # torn
    with pytest.raises(checkpoint.CheckpointError, match="no checkpoint to resume from"):
        checkpoint.latest(tmp_path)
    with pytest.raises(checkpoint.CheckpointError, match="another structure"):
        checkpoint.restore(checkpoint.load(_fresh(tmp_path / "b", tree)), "t", {"w": tree["w"]})


def _fresh(out: Path, tree) -> Path:
    return checkpoint.save(out, 1, {"t": tree}, {"records": []})


def test_ctrl_c_before_the_run_starts_is_one_line(tmp_path, monkeypatch, capsys):
    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(from_config, "build_experiment", interrupted)
    assert cli.main(["run", "--set", "data.name=digits", "--out", str(tmp_path / "o")]) == 130
    assert capsys.readouterr().err == "sgrld: interrupted\n"
