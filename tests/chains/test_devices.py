"""Chains and minibatches over devices, and runs over processes (:mod:`sgrld.chains.devices`).

The suite's own process has one CPU device, so every run on a mesh goes to a subprocess
(:mod:`tests.devices_run`): with ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` for eight
devices, or as two processes joined by ``jax.distributed`` on localhost (one device each).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import jax
import pytest

import sgrld
from sgrld.chains.devices import DistributedError, initialize
from sgrld_app import cli
from sgrld_app.config import ConfigError, load_config
from sgrld_app.launch import mesh_of
from tests.helpers import cpu_env

pytestmark = pytest.mark.long  # its tests share a module fixture: scheduled together, first

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 300


def _start(*args: str, devices: int | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.devices_run", *args],
        cwd=ROOT,
        env=cpu_env(devices),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out, err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def eight() -> dict:
    """What :func:`tests.devices_run.mesh_case` found on eight CPU devices."""
    code, out, err = _finish(_start("mesh", "-", devices=8))
    assert code == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_chains_sharded_give_the_same_samples_bit_for_bit(eight):
    """16 chains over 8 devices (2 a device). A target without data: the unsharded run's
    samples exactly. A tiny MLP on minibatches: exactly the samples of unsharded runs of each
    device's 2 chains with their keys (the mesh adds no arithmetic); against one unsharded run of
    all 16 chains they agree to rounding only, because XLA's CPU code for a vmapped gradient
    depends on the number of chains it batches (without any mesh, one step's gradient of a chain
    differs by ~1e-8 between 8 and 64 chains on one device)."""
    assert eight["gaussian_identical"]
    assert eight["gaussian_sharding"] == "P('chains',)"
    assert eight["mlp_identical_per_device"]
    assert eight["mlp_vs_whole"] <= 1e-6


def test_data_parallel_agrees_to_float_tolerance(eight):
    """data_parallel = 2 (mesh 4 x 2) against the same chains on 4 devices with whole
    minibatches: 20 SGLD steps of the tiny MLP, parameters of size <= 1. The minibatch mean of
    32 per-example terms becomes two partial sums of 16 added across devices: a different
    summation order, a few float32 ulps (1.2e-7 relative) per gradient, carried through 20
    contracting steps. Tolerance 1e-6 absolute (about 8 ulps at 1); measured 6e-8."""
    assert eight["data_parallel_scale"] <= 1.0
    assert eight["data_parallel_max_abs"] <= 1e-6


def test_full_batch_epochs_on_a_mesh_agree_with_one_device(eight):
    """The full-batch source (every chain all the data, no permutation): 10 epochs of 16 chains
    of the tiny MLP on 8 devices (chains sharded), and on 4 x 2 (each full batch of 256 split
    over two devices), against one device. Same tolerance as above: float rounding only."""
    assert eight["full_batch_scale"] <= 1.0
    assert eight["full_batch_chains_max_abs"] <= 1e-6
    assert eight["full_batch_data_parallel_max_abs"] <= 1e-6


def test_mesh_bad_inputs(eight):
    assert "data_parallel = 16 is more than the 8 device(s)" in eight["too_many"]
    assert "devices = 9, but there are 8 cpu device(s)" in eight["too_many_devices"]
    assert "12 chain(s) cannot be spread evenly over the mesh's 8 chain groups" in eight["chains"]
    assert "a minibatch of 31 examples cannot be split evenly" in eight["batch"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["run.devices=2", "run.data_parallel=4"], "run.data_parallel = 4 is more than"),
        (["run.devices=8", "run.chains=12"], "run.chains = 12 cannot be spread evenly"),
        (["run.devices=2", "run.data_parallel=2", "data.batch_size=33"], "data.batch_size = 33"),
        (["run.data_parallel=2"], "needs a mesh: set run.devices"),
        (['run.devices="most"'], 'run.devices: "all" or a number'),
    ],
)
def test_config_refuses_a_mesh_that_does_not_fit(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_more_devices_than_there_are_is_a_config_error():
    config = load_config(None, ['run.devices="all"', "run.data_parallel=2", "run.chains=2"])
    with pytest.raises(ConfigError, match="run.data_parallel = 2.*more than the 1 device"):
        mesh_of(config)
    assert mesh_of(load_config(None, [])) is None


def test_two_processes_give_the_one_process_results(tmp_path):
    """``sgrld run`` as two processes (jax.distributed on localhost, one CPU device each, the
    chains sharded over both, each process holding half the training rows) writes the samples
    and scores of the one-process run, bit for bit; process 1 writes nothing."""
    port = str(_free_port())
    one = _start("run", str(tmp_path / "one"))
    procs = [
        _start("run", str(tmp_path / name), pid, "2", port)
        for pid, name in (("0", "two"), ("1", "other"))
    ]
    for proc in (one, *procs):
        code, _, err = _finish(proc)
        assert code == 0, err[-3000:]
    assert not (tmp_path / "other").exists()
    a, b = (sgrld.load_samples(tmp_path / name) for name in ("one", "two"))
    assert (a.step == b.step).all()
    for x, y in zip(*(jax.tree.leaves(s.params) for s in (a, b)), strict=True):
        assert (x == y).all()
    records = [
        [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        for name in ("one", "two")
    ]
    for r1, r2 in zip(*records, strict=True):
        assert r1["test_log_likelihood"] == r2["test_log_likelihood"]
        assert r1["test_accuracy"] == r2["test_accuracy"]
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["devices"]["processes"] == 2 and summary["devices"]["devices"] == 2
    assert summary["devices"]["chunk_bytes_per_chain"] > 0


@pytest.mark.slow
def test_a_process_that_dies_stops_the_others(tmp_path):
    """Process 1 exits after epoch 1 of 2: process 0 stops with exit code 3 and a message, and
    its results folder is not marked completed. Slow: two more processes (about 25 s of CPU)."""
    port = str(_free_port())
    procs = [
        _start("run", str(tmp_path / "run"), "0", "2", port),
        _start("run", str(tmp_path / "run"), "1", "2", port, "1"),
    ]
    (code, _, err), (dead, _, _) = (_finish(p) for p in procs)
    assert dead == 3
    assert code == cli.EXIT_PROCESS_FAILED, err[-3000:]
    assert "the multi-process run failed" in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] != "completed"


def test_unreachable_coordinator_times_out_naming_it(capsys):
    """A process other than 0 waits for the coordinator's port, then says which address it
    could not reach (JAX itself would abort the process)."""
    port = _free_port()
    with pytest.raises(DistributedError, match=f"coordinator at localhost:{port} within 1 s"):
        initialize(f"localhost:{port}", 2, 1, timeout_s=1)
    flags = ["--coordinator", f"localhost:{port}", "--num-processes", "2", "--process-id", "1"]
    assert cli.main(["run", *flags, "--init-timeout", "1"]) == 2
    assert f"could not reach the coordinator at localhost:{port}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("localhost:1", 2, None), "give all of coordinator"),
        (("localhost", 2, 1), "expected HOST:PORT"),
        (("localhost:1", 2, 2), "process_id = 2 is not one of 0 .. 1"),
    ],
)
def test_inconsistent_distributed_arguments(args, message):
    with pytest.raises(DistributedError, match=message):
        initialize(*args, timeout_s=1)
