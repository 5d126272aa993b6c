"""Yu et al.'s Fig. 3 bands, Fig. 4 (``sgrld reproduce monge-alpha``) and Table 6 (``mnist-mlp
--equal-time``): per-replicate records of a sweep, the α² reproduction end to end on small IDX
files, the equal-time cut, and bad options."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import numpy as np
import pytest

import sgrld_app
from sgrld_app import cli, report
from sgrld_app.config import ConfigError
from sgrld_app.sweep import parse_grid, run_sweep
from sgrld_reproductions import mnist_mlp
from sgrld_reproductions.scaffolding import yu_mnist
from tests.data.test_data import write_mnist
from tests.reproductions.test_natural_langevin import easy_mnist

pytestmark = pytest.mark.reproduction

TINY = ["data.name=digits", "data.batch_size=64", "model.widths=[8]", "prior.kind=gaussian",
        "run.epochs=2", "run.burn_in=0", "run.thin=5"]  # fmt: skip


def test_sweep_records_score_every_replicate_apart():
    """Each record of a sweep gives every (setting, replicate)'s ensemble so far; the last one's
    are the sweep's final scores."""
    cfg = sgrld_app.config.load_config(None, TINY)
    grid = parse_grid("sampler.learning_rate=[0.05, 0.1]", cfg)
    sweep = run_sweep(cfg, [grid], replicates=2, out=None)
    records = sweep.result.records
    assert [len(r["groups"]["test_log_likelihood"]) for r in records] == [4, 4]
    assert records[0]["groups"]["samples"] == [3, 3, 3, 3]
    last = records[-1]["groups"]
    for i, scores in enumerate(sweep.scores):
        for key in ("test_log_likelihood", "test_accuracy", "val_log_likelihood"):
            np.testing.assert_allclose(last[key][2 * i : 2 * i + 2], scores[key], rtol=1e-6)
    single = sgrld_app.config.load_config(None, [*TINY, "sampler.learning_rate=0.05"])
    assert "groups" not in sgrld_app.launch.run_config(single, out=None).records[0]


def _run(metric_time: dict[str, float], val: dict[tuple[str, float], float], epochs: int = 4):
    """A stub of ``run_config``: ``epochs`` records, ``metric_time[metric]`` seconds of sampling
    each, test log p(y|X) ``-1/epoch``, validation log p ``val[(metric, lr)]``."""

    def run(cfg, **kwargs):
        metric, lr = cfg.sampler.metric, cfg.sampler.learning_rate
        records = [
            {"epoch": e, "samples": 5 * e, "test_log_likelihood": -1 / e, "test_accuracy": 0.9,
             "test_ece": 0.01, "test_confidence": 0.95, "val_log_likelihood": val[(metric, lr)],
             "sample_s": metric_time[metric]}
            for e in range(1, epochs + 1)
        ]  # fmt: skip
        summary = {"sampler_seconds_per_epoch": metric_time[metric], "eval_seconds_per_epoch": 0.5}
        return SimpleNamespace(
            status="completed", message="", records=records, summary=summary, out=None
        )

    return run


def _reproduce(tmp_path, monkeypatch, stub, *argv):
    monkeypatch.setattr(yu_mnist, "run_config", stub)
    parser = argparse.ArgumentParser()
    mnist_mlp.REPRODUCTION.add_arguments(parser)
    code = mnist_mlp.REPRODUCTION.run(parser.parse_args([*argv, "--out", str(tmp_path)]))
    return code, json.loads((tmp_path / "mnist_mlp.json").read_text())["rows"]


def test_equal_time_cuts_at_the_fastest_total_and_rechooses_on_validation(tmp_path, monkeypatch):
    """Identity (1 s/epoch) keeps its 4 epochs, Monge (1.5 s) and RMSprop (2 s) the 2 within 4 s;
    RMSprop's re-chosen rate (App. A.6: 0.00075) is run too and kept for its higher validation
    log p."""
    val = {("identity", 0.25): -0.1, ("rmsprop", 0.0005): -0.09, ("rmsprop", 0.00075): -0.08}
    stub = _run({"identity": 1.0, "rmsprop": 2.0, "monge": 1.5}, val | {("monge", 0.25): -0.1})
    argv = ["--metrics", "identity", "rmsprop", "monge", "--equal-time", "--epochs", "4"]
    code, rows = _reproduce(tmp_path, monkeypatch, stub, *argv)
    assert code == 0
    six = {r["metric"]: r for r in rows if r["table"] == "6"}
    assert [r["table"] for r in rows] == ["1-2"] * 3 + ["6"] * 3
    assert six["Identity"]["epochs"] == "4" and six["Identity"]["log p(y|X)"] == "-0.2500 ▼"
    assert six["RMSprop"]["epochs"] == "2" and six["RMSprop"]["log p(y|X)"] == "-0.5000 ▼"
    assert six["RMSprop"]["lr"] == "0.00075 (val. over 0.0005)"
    assert six["RMSprop"]["paper log p"] == "-0.0680 ± 0.0013"
    assert six["Monge"]["epochs"] == "2" and six["Monge"]["paper log p"] == "-0.0650 ± 0.0006"


def test_equal_time_bad_input(tmp_path, monkeypatch, capsys):
    """--equal-time with one metric, or runs without sampling times, and --replicates 0: clear
    errors (exit code 2 from the command line)."""
    argv = ["reproduce", "mnist-mlp", "--equal-time", "--metrics", "identity"]
    assert cli.main([*argv, "--out", str(tmp_path)]) == 2
    assert "give two metrics or more" in capsys.readouterr().err
    stub = _run({"identity": 1.0, "wenzel": 1.0}, {("identity", 0.25): 0, ("wenzel", 0.75): 0})
    untimed = lambda cfg, **kw: SimpleNamespace(
        **{**vars(stub(cfg)), "records": [{"epoch": 1, "test_log_likelihood": -0.1}]}
    )
    with pytest.raises(ConfigError, match="sample_s"):
        _reproduce(
            tmp_path, monkeypatch, untimed, "--metrics", "identity", "wenzel", "--equal-time"
        )
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "mnist-mlp", "--replicates", "0"])
    assert "must be a positive integer, got 0" in capsys.readouterr().err


def test_curves_of_replicates_have_bands(tmp_path):
    """Records with per-replicate scores are drawn as their mean with a ±1.96 std band."""
    records = [
        {"epoch": e, "groups": {"test_log_likelihood": [-1 / e, -1.1 / e],
                                "test_accuracy": [0.9, 0.92]}}
        for e in (1, 2, 3)
    ]  # fmt: skip
    epochs, mean, band = report.curve(records, "test_log_likelihood")
    assert epochs == [1, 2, 3] and mean[0] == pytest.approx(-1.05)
    assert band[0] == pytest.approx(1.96 * np.std([-1, -1.1], ddof=1))
    path = report.plot_curves({"Identity": records}, tmp_path / "c.png")
    assert path.stat().st_size > 0


@pytest.mark.long
def test_mnist_mlp_equal_time_with_replicates_end_to_end(tmp_path):
    """`mnist-mlp --quick --replicates 2 --equal-time` on 600 easy images (500 to train, 100 to
    validate; 4 epochs of 5 steps, burn-in 2 epochs, a sample every step; the Gaussian prior,
    as the horseshoe's rates diverge at N = 500): each replicate scored every epoch, Table 6
    rows cut within the run, the curves drawn with bands."""
    data = write_mnist(tmp_path / "mnist", easy_mnist(600, 50))
    out = tmp_path / "out"
    argv = ["reproduce", "mnist-mlp", "--quick", "--no-verify-checksums", "--train-size", "500"]
    argv += ["--validation-size", "100", "--prior", "gaussian", "--replicates", "2"]
    argv += ["--metrics", "identity", "wenzel", "--equal-time"]
    assert cli.main([*argv, "--data-dir", str(data), "--out", str(out)]) == 0
    rows = json.loads((out / "mnist_mlp.json").read_text())["rows"]
    assert [(r["table"], r["metric"]) for r in rows] == [
        ("1-2", "Identity"), ("1-2", "Wenzel"), ("6", "Identity"), ("6", "Wenzel")]  # fmt: skip
    assert all(r["status"] == "completed" for r in rows)
    assert all(" ± " in r["log p(y|X)"] for r in rows[:2]) and rows[2]["paper log p"] == (
        "-0.1311 ± 0.0004"
    )
    # The faster sampler keeps its 4 epochs; the other as many as fit in that time (on these
    # tiny runs the timings are noisy: with fewer than 3 it has no sample yet, and no score).
    fastest = max(rows[2:], key=lambda r: int(r["epochs"]))
    assert fastest["epochs"] == "4" and " ± " in fastest["log p(y|X)"]
    lines = (out / "gaussian-400" / "wenzel" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["groups"]["samples"] == [10, 10]
    assert (out / "curves_gaussian-400.png").stat().st_size > 0


@pytest.mark.long
def test_monge_alpha_end_to_end(tmp_path):
    """`reproduce monge-alpha --quick` on 600 easy images with α² ∈ {0, 0.5, 2} (one sweep at the
    Gaussian prior's 0.05) and Identity, 2 replicates: α² = 0 is the Identity metric, so its
    chains are Identity's (same seeds), every replicate is in the JSON, the paper's points sit
    beside ours, one α² is marked best, and the figure is drawn."""
    data = write_mnist(tmp_path / "mnist", easy_mnist(600, 50))
    out = tmp_path / "out"
    argv = ["reproduce", "monge-alpha", "--quick", "--no-verify-checksums", "--train-size", "500"]
    argv += ["--validation-size", "100", "--prior", "gaussian", "--alpha2", "0", "2", "0.5"]
    argv += ["--metrics", "identity", "--replicates", "2", "--data-dir", str(data)]
    assert cli.main([*argv, "--out", str(out)]) == 0
    payload = json.loads((out / "monge_alpha.json").read_text())
    rows = payload["rows"]
    assert [(r["metric"], r["α²"], r["lr"]) for r in rows] == [
        ("Monge", "0", "0.05"), ("Monge", "0.5", "0.05"), ("Monge", "2", "0.05"),
        ("Identity", "—", "0.05")]  # fmt: skip
    assert all(r["status"] == "completed" and r["epochs"] == "4" for r in rows)
    identity, monge0 = rows[3]["replicates"], rows[0]["replicates"]
    for key in ("test_log_likelihood", "val_log_likelihood"):
        np.testing.assert_allclose(monge0[key], identity[key], rtol=1e-4)
    assert len(monge0["test_accuracy"]) == 2
    assert rows[1]["paper log p"] == "-0.1317 ± 0.0004" and rows[2]["paper log p"] == "—"
    assert sum(r["best"] == "◀ best" for r in rows) == 1
    assert payload["config"]["alpha2"] == [0.0, 2.0, 0.5]
    assert (out / "monge_alpha.png").stat().st_size > 0
    assert (out / "gaussian-400" / "monge" / "lr0.05" / "sweep.md").exists()


def test_monge_alpha_bad_input(tmp_path, capsys):
    """A negative, non-finite or repeated α², and --replicates 0, are refused, naming them."""
    base = ["reproduce", "monge-alpha", "--out", str(tmp_path), "--alpha2"]
    for bad in ("-0.5", "nan", "inf"):
        with pytest.raises(SystemExit):
            cli.main([*base, bad])
        assert f"α² must be a finite number >= 0, got {bad}" in capsys.readouterr().err
    assert cli.main([*base, "0.5", "1", "0.5"]) == 2
    assert "--alpha2: a value is repeated" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "monge-alpha", "--replicates", "0"])
    assert "must be a positive integer, got 0" in capsys.readouterr().err


def test_lr_grid_chooses_on_validation_at_the_end_and_at_the_cut(tmp_path, monkeypatch):
    """--lr-grid: each metric one sweep of 5 rates x 2 replicates; the validation log p peaks at
    the ladder's 4th rate in epochs 1-2 and at Table 4's (the 3rd) after, so Tables 1-2 keep
    Table 4's rates and Table 6 RMSprop's (2 s/epoch: cut after 2 epochs) the 4th."""
    calls = []

    def fake_sweep(config, grids, replicates, **kwargs):
        (grid,) = grids
        rates, metric = grid.values, config.sampler.metric
        calls.append((metric, rates, replicates))
        seconds = {"identity": 1.0, "rmsprop": 2.0}[metric]

        def val(i, epoch):
            return -abs(i - (3 if epoch <= 2 else 2)) / 10

        records = [
            {"epoch": e, "sample_s": seconds, "divergences": 0, "groups": {
                "val_log_likelihood": [val(i, e) for i in range(5) for _ in range(2)],
                "test_log_likelihood": [-1 / e - i / 100 for i in range(5) for _ in range(2)],
                "test_accuracy": [0.9] * 10, "test_ece": [0.01] * 10,
                "test_confidence": [0.9] * 10}}
            for e in range(1, 5)
        ]  # fmt: skip
        last = records[-1]["groups"]
        scores = [
            {k: np.array(v[2 * i : 2 * i + 2]) for k, v in last.items()} | {"diverged": 0}
            for i in range(5)
        ]
        summary = {"sampler_seconds_per_epoch": seconds, "eval_seconds_per_epoch": 0.5}
        result = SimpleNamespace(status="completed", message="", records=records, summary=summary)
        return SimpleNamespace(result=result, scores=scores)

    monkeypatch.setattr(yu_mnist, "run_sweep", fake_sweep)
    parser = argparse.ArgumentParser()
    mnist_mlp.REPRODUCTION.add_arguments(parser)
    argv = ["--metrics", "identity", "rmsprop", "--lr-grid", "--equal-time", "--replicates", "2"]
    assert mnist_mlp.REPRODUCTION.run(parser.parse_args([*argv, "--out", str(tmp_path)])) == 0
    assert calls == [
        ("identity", (0.075, 0.1, 0.25, 0.5, 0.75), 2),
        ("rmsprop", (0.0001, 0.00025, 0.0005, 0.00075, 0.001), 2),
    ]  # no extra run at App. A.6's rate: the grid holds it
    rows = {(r["table"], r["metric"]): r for r in json.loads(
        (tmp_path / "mnist_mlp.json").read_text())["rows"]}  # fmt: skip
    assert rows[("1-2", "Identity")]["lr"] == "0.25 (val. of 0.075, 0.1, 0.25, 0.5, 0.75)"
    assert rows[("1-2", "Identity")]["log p(y|X)"] == "-0.2700 ± 0.0000 ▼"
    assert rows[("1-2", "RMSprop")]["lr"].startswith("0.0005 (val. of")
    assert rows[("6", "Identity")]["lr"].startswith("0.25 ") and rows[("6", "Identity")][
        "epochs"] == "4"  # fmt: skip
    six = rows[("6", "RMSprop")]
    assert six["epochs"] == "2" and six["lr"].startswith("0.00075 (val. of")
    assert six["log p(y|X)"] == "-0.5300 ± 0.0000 ▼"


def test_monge_alpha_lr_grid_chooses_each_alpha2_s_rate(tmp_path, monkeypatch):
    """--lr-grid: one sweep of the authors' Monge rates x α² (rate slowest); per α² the rate of
    best validation log p without a diverged chain: here 0.5 for α² = 2 (0.75 diverged), the
    Table 4 rate 0.25 for α² = 0.5."""
    from sgrld_reproductions import monge_alpha

    calls = []

    def fake_sweep(config, grids, replicates, **kwargs):
        rates, alphas = (g.values for g in grids)
        calls.append((config.sampler.learning_rate, rates, alphas, replicates))
        best = {0.5: 0.25, 2.0: 0.75}
        scores = [
            {"val_log_likelihood": np.array([-abs(lr - best[a])]), "diverged": int(lr > 0.6),
             "test_log_likelihood": np.array([-0.07 - lr / 100]),
             "test_accuracy": np.array([0.98])}
            for lr in rates for a in alphas
        ]  # fmt: skip
        result = SimpleNamespace(status="completed", message="", records=[{"epoch": 1}])
        return SimpleNamespace(result=result, scores=scores)

    monkeypatch.setattr(monge_alpha, "run_sweep", fake_sweep)
    parser = argparse.ArgumentParser()
    monge_alpha.REPRODUCTION.add_arguments(parser)
    argv = ["--alpha2", "2", "0.5", "--lr-grid", "--metrics", "--out", str(tmp_path)]
    assert monge_alpha.REPRODUCTION.run(parser.parse_args(argv)) == 0
    assert calls == [(0.25, (0.075, 0.1, 0.25, 0.5, 0.75), (0.5, 2.0), 1)]
    rows = json.loads((tmp_path / "monge_alpha.json").read_text())["rows"]
    assert [(r["α²"], r["lr"].split()[0], r["diverged"]) for r in rows] == [
        ("0.5", "0.25", "0"), ("2", "0.5", "0")]  # fmt: skip
    assert rows[1]["log p(y|X)"] == "-0.0750 ▼" and rows[1]["paper log p"] == "-0.0681 ± 0.0012"
    assert rows[0]["best"] == "◀ best"
