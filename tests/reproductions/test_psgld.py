"""Tests of ``sgrld reproduce psgld`` (Li et al. 2016): the command end to end on tiny LIBSVM and
IDX files, the noise of the authors' code as T = 1/N, the BLR pieces, the Gaussian's
autocorrelation and ESS, and bad options."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.data import MissingDataError
from sgrld_app import cli
from sgrld_reproductions import psgld
from sgrld_reproductions.psgld import figure, runs
from sgrld_reproductions.scaffolding import RunSpec
from tests.data.test_data import write_mnist
from tests.reproductions.test_natural_langevin import easy_mnist

pytestmark = pytest.mark.reproduction


def _libsvm(path: Path, x: np.ndarray, y: np.ndarray) -> None:
    """Write ``(x, y)`` as LIBSVM text (labels ±1, zero features left out)."""
    lines = [
        f"{'+1' if label > 0 else '-1'} "
        + " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(row) if v != 0)
        for row, label in zip(x, y, strict=True)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _blr_files(base: Path, seed: int = 0) -> None:
    """Small a9a-like (binary, 123 features) and australian-like (14 real features) files whose
    labels follow a logistic model."""
    rng = np.random.default_rng(seed)

    def draw(n, d, binary):
        x = (rng.random((n, d)) < 0.1).astype(float) if binary else rng.normal(size=(n, d))
        w = np.linspace(-2, 2, d)
        y = rng.random(n) < 1 / (1 + np.exp(-(x @ w)))
        return x, np.where(y, 1, -1)

    _libsvm(base / "libsvm_a9a" / "a9a", *draw(300, 123, True))
    _libsvm(base / "libsvm_a9a" / "a9a.t", *draw(200, 123, True))
    _libsvm(base / "libsvm_australian" / "australian", *draw(240, 14, False))


def _tiny_data(tmp_path: Path) -> Path:
    base = tmp_path / "data"
    _blr_files(base)
    write_mnist(base / "mnist", easy_mnist(600, 100), gz=True)
    return base


@pytest.mark.long
def test_command_end_to_end_on_tiny_files(tmp_path: Path, capsys):
    # every part, one sampler and one noise (about 35 s CPU: 5 runs, mostly compilation)
    out = tmp_path / "out"
    argv = ["reproduce", "psgld", "--quick", "--archs", "16-16", "--methods", "psgld"]
    argv += ["--noise", "bug", "--data-dir", str(_tiny_data(tmp_path)), "--out", str(out)]
    assert cli.main(argv) == 0
    payload = json.loads((out / "psgld.json").read_text())
    rows = payload["rows"]
    assert payload["config"]["parts"] == list(psgld.PARTS)
    assert [(r["part"], r["data"]) for r in rows] == [
        ("blr", "a9a"), ("blr", "australian"), ("gaussian", "2-D Gaussian, ε = 0.1"),
        ("gaussian", "2-D Gaussian, ε = 0.3"), ("fnn", "16-16, σ² = 1"), ("cnn", "CNN, σ² = 1"),
    ]  # fmt: skip
    assert all(r["status"] == "completed" and r["method"] == "pSGLD" for r in rows), rows
    for r in rows[:2]:  # bug rows: no paper number beside them
        assert len(r["run"]["errors"]) == psgld.QUICK_BLR["chains"] and r["paper"] == "—"
        assert r["ms"] > 0 and r["ess"] > 0 and r["spread"] > 0
    assert all(r["cov_error"] >= 0 and r["iat"] >= 1 for r in rows[2:4])
    assert all(r["error"] != "—" and r["run"]["samples"] > 0 for r in rows[4:])
    assert (out / "psgld_gaussian.png").stat().st_size > 0
    assert "| blr | a9a | pSGLD | bug | 0.05 |" in (out / "psgld.md").read_text()
    summary = json.loads((out / "cnn" / "CNN-psgld-var1-bug" / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert "smoke test" in capsys.readouterr().out


def test_an_optimiser_row_scores_its_last_iterate_alone(tmp_path: Path):
    # noise "none": RMSprop (pSGLD at T = 0), one kept state, the one after the last step
    base = _tiny_data(tmp_path)
    plan = runs.NetworkPlan(epochs=2, halve_every=1, burn_in=4, thin=2, train_size=500,
                            data_dir=str(base), seed=0)  # fmt: skip
    net = runs.Network("16-16", "mlp", (16, 16))
    spec = RunSpec(tmp_path / "out")
    run = runs.network_run(runs.METHODS[1], net, 1.0, "none", 5e-4, plan, spec)
    assert run["status"] == "completed" and run["samples"] == 1 and 0 <= run["error"] < 50
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["samples"] for line in lines] == [0, 1]


@pytest.mark.slow
def test_quick_runs_every_row_on_tiny_files(tmp_path: Path):
    # the whole --quick command: 21 runs, about 2.5 CPU minutes (compilation)
    out = tmp_path / "out"
    argv = ["reproduce", "psgld", "--quick", "--archs", "16-16", "--data-dir"]
    assert cli.main([*argv, str(_tiny_data(tmp_path)), "--out", str(out)]) in (0, 1)
    rows = json.loads((out / "psgld.json").read_text())["rows"]
    counts = {part: sum(r["part"] == part for r in rows) for part in psgld.PARTS}
    assert counts == {"blr": 8, "gaussian": 4, "fnn": 7, "cnn": 6}
    assert all(r["status"] == "completed" for r in rows if r["part"] != "cnn"), rows


def _stubs(monkeypatch, status: str = "completed") -> None:
    """Replace the runs by stubs that return at once (the CNN's SGLD run with ``status``)."""
    blr = {
        "status": "completed",
        "errors": [15.0, 15.2],
        "log_likelihoods": [-0.3, -0.32],
        "step_seconds": 1e-5,
        "min_ess_per_s": 10.0,
        "posterior_std": 0.1,
        "seconds": 1.0,
    }
    gauss = {"status": "completed", "seconds": 1.0, "step_seconds": 1e-6, "cov_error": 0.1,
             "iat": 5.0, "min_ess_per_s": 1e4}  # fmt: skip

    def network(method, net, prior_var, noise, lr, plan, spec):
        bad = net.kind == "cnn" and method.key == "sgld"
        return {
            "status": status if bad else "completed",
            "message": "",
            "error": 1.5,
            "log_likelihood": -0.05,
            "samples": 3,
            "step_seconds": 0.01,
            "seconds": 2.0,
        }

    monkeypatch.setattr(runs, "load_blr", lambda *a: None)
    monkeypatch.setattr(runs, "blr_run", lambda *a: blr)
    draws = np.random.default_rng(0).normal(size=(2, 700, 2))
    monkeypatch.setattr(runs, "gaussian_run", lambda *a: (gauss, draws))
    monkeypatch.setattr(runs, "network_run", network)


def _run_stubbed(tmp_path: Path, *argv: str) -> tuple[int, list[dict]]:
    parser = argparse.ArgumentParser()
    psgld.REPRODUCTION.add_arguments(parser)
    code = psgld.REPRODUCTION.run(parser.parse_args([*argv, "--out", str(tmp_path)]))
    return code, json.loads((tmp_path / "psgld.json").read_text())["rows"]


def test_table_beside_the_paper_on_stub_runs(tmp_path: Path, monkeypatch):
    _stubs(monkeypatch)
    code, rows = _run_stubbed(tmp_path)
    assert code == 0 and len(rows) == 8 + 10 + 21 + 6
    paper = {(r["data"], r["method"], r["noise"]): r["paper"] for r in rows}
    assert paper["a9a", "SGLD", "correct"] == "14.85" and paper["a9a", "SGLD", "bug"] == "—"
    assert paper["australian", "pSGLD", "correct"] == "—"
    assert paper["1200-1200, σ² = 100", "pSGLD", "correct"] == "1.14"
    assert paper["800-800, σ² = 1", "SGLD", "correct"] == "1.41"
    assert paper["CNN, σ² = 1", "pSGLD", "correct"] == "0.45"
    assert paper["CNN, σ² = 1", "SGLD", "correct"] == "0.71"
    assert ("400-400, σ² = 100", "pSGLD", "bug") not in paper  # bug rows: σ² = 1 only
    assert paper["400-400, σ² = 1", "RMSprop", "none"] == "1.59"  # the optimisers: T = 0
    assert paper["1200-1200, σ² = 1", "SGD", "none"] == "1.47"
    assert paper["CNN, σ² = 1", "SGD", "none"] == "0.82"
    assert not any(noise == "none" for data, _, noise in paper if data in ("a9a", "australian"))
    a9a = next(r for r in rows if r["data"] == "a9a")
    assert a9a["error"] == "15.10 ± 0.10" and a9a["loglik"] == "-0.3100 ± 0.0100"
    assert (tmp_path / "psgld_gaussian.png").is_file()


@pytest.mark.parametrize(("status", "code"), [("diverged", 1), ("interrupted", 130)])
def test_exit_code_of_a_failed_network_run(tmp_path: Path, monkeypatch, status, code):
    _stubs(monkeypatch, status)
    got, rows = _run_stubbed(tmp_path, "--parts", "cnn", "fnn", "--archs", "400-400")
    assert got == code and rows[-1]["status"] == status
    assert len(rows) == (13 if status == "diverged" else 9)  # an interrupted run stops the command


@pytest.mark.statistical(seed=0)
def test_bug_noise_is_temperature_one_over_n(stat_seed):
    """One step from θ = 0 with zero gradient: Var(Δθ) = 2·lr·T/N = 2·lr/N² (bug) or 2·lr/N, and
    no move at all without noise (T = 0).

    False-failure probability: ≤ 0.006 (each sample variance of 20,000 normal draws has a
    relative standard error of 1 %; 3 % is 3 of them, two-sided 0.0027, twice).
    """
    n, lr = 50, 0.1
    u = sgrld.potential(lambda p, b: jnp.zeros(b.shape[0]), None, n)
    moves = {}
    for noise in runs.NOISES:
        s = runs.sampler(runs.METHODS[0], u, lr, noise, n)
        step = jax.vmap(lambda k, s=s: s.step(k, s.init(jnp.zeros(())), jnp.zeros(4))[0].params)
        moves[noise] = step(jax.random.split(jax.random.key(stat_seed), 20_000))
    np.testing.assert_allclose(np.var(moves["correct"]), 2 * lr / n, rtol=0.03)
    np.testing.assert_allclose(np.var(moves["bug"]), 2 * lr / n**2, rtol=0.03)
    assert not np.any(moves["none"])
    with pytest.raises(ValueError, match="noise must be one of"):
        runs.temperature("half", n)


def test_blr_scores_and_loader(tmp_path: Path):
    _blr_files(tmp_path)
    data = runs.load_blr(runs.BLR["australian"], tmp_path, seed=1)
    assert data.train[0].shape == (240 - runs.AUSTRALIAN_TEST, 14)
    np.testing.assert_allclose(data.train[0].mean(axis=0), 0, atol=1e-5)
    assert set(np.unique(data.train[1])) <= {0.0, 1.0}
    y = data.test[1]
    # θ = 0 (twice): p̄ = ½ everywhere, class 0 predicted
    error, loglik = runs.blr_scores({"w": jnp.zeros((2, 14)), "b": jnp.zeros(2)}, data.test)
    assert error == pytest.approx(100 * np.mean(y)) and loglik == pytest.approx(np.log(0.5))
    # intercepts 0 and 4: p̄(y = 1) = (½ + σ(4))/2 everywhere, class 1 predicted
    error, loglik = runs.blr_scores({"w": jnp.zeros((2, 14)), "b": jnp.array([0, 4.0])}, data.test)
    p = (0.5 + 1 / (1 + np.exp(-4))) / 2
    assert error == pytest.approx(100 * (1 - np.mean(y)), abs=1e-4)
    assert loglik == pytest.approx(np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)), abs=1e-5)
    with pytest.raises(MissingDataError, match="libsvm_a9a/a9a"):
        runs.load_blr(runs.BLR["a9a"], tmp_path / "nowhere")


@pytest.mark.statistical(seed=0)
def test_autocorrelation_and_ess_of_an_ar1_series(stat_seed):
    """An AR(1) series with ρ = 0.9: its autocorrelations ρ^k and ESS n(1 − ρ)/(1 + ρ).

    False-failure probability: ≤ 0.001 (40,000 steps: the lag-k autocorrelations have standard
    errors below 0.01, a third of the tolerance; the bulk ESS's relative error is about 5 %, the
    bounds are 25 % below and 33 % above).
    """
    rng = np.random.default_rng(stat_seed)
    rho, x = 0.9, np.zeros(40_000)
    for t in range(1, len(x)):
        x[t] = rho * x[t - 1] + rng.normal()
    acf = figure.autocorrelation(x, 3)
    np.testing.assert_allclose(acf, rho ** np.arange(4), atol=0.03)
    # AR(1): ESS = n(1 − ρ)/(1 + ρ) ≈ 2,105
    assert 1_500 < runs.min_ess(x[None, :, None]) < 2_800


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--parts", "mlp"], "invalid choice: 'mlp'"),
        (["--noise", "half"], "invalid choice: 'half'"),
        (["--archs", "400x400"], "expected hidden widths joined by '-'"),
        (["--epochs", "0"], "must be a positive integer"),
    ],
)
def test_bad_options_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as err:
        cli.main(["reproduce", "psgld", *argv])
    assert err.value.code == 2 and message in capsys.readouterr().err


def test_nothing_to_run_is_refused(tmp_path: Path, capsys):
    argv = ["reproduce", "psgld", "--parts", "blr", "--noise", "none", "--out", str(tmp_path)]
    assert cli.main(argv) == 2
    assert "nothing to run with --parts blr" in capsys.readouterr().err
    assert not (tmp_path / "psgld.json").exists()


def test_missing_libsvm_files_name_the_folder(tmp_path: Path, capsys):
    argv = ["reproduce", "psgld", "--quick", "--parts", "blr", "--data-dir", str(tmp_path)]
    assert cli.main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"'a9a' not found in {tmp_path}/libsvm_a9a" in err and "pass --data-dir" in err
