"""Tests of the funnel reproduction (Yu et al. 2023, Fig. 2): scores, divergence handling, CLI."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path

import jax
import numpy as np
import pytest
from scipy.stats import kstest, norm

import sgrld
from sgrld.samples import distances as scores
from sgrld_app import cli
from sgrld_reproductions import funnel
from sgrld_reproductions.funnel import runs as funnel_runs

pytestmark = pytest.mark.reproduction

SIGMA = math.sqrt(80.0)


def w1_by_quadrature(x: np.ndarray, scale: float) -> float:
    """∫|F_n − Φ_σ| by the trapezoid rule on a fine grid (the slow reference)."""
    grid = np.linspace(min(x.min(), -12 * scale), max(x.max(), 12 * scale), 400_001)
    f_n = np.searchsorted(np.sort(x), grid, side="right") / x.size
    return float(np.trapezoid(np.abs(f_n - norm.cdf(grid, scale=scale)), grid))


@pytest.mark.parametrize("shift", [0.0, 3.0, -20.0])
def test_w1_and_ks_match_references(shift):
    x = np.random.default_rng(0).normal(shift, 5.0, 200)
    assert scores.w1_to_normal(x, SIGMA) == pytest.approx(w1_by_quadrature(x, SIGMA), abs=1e-3)
    reference = kstest(x, norm(scale=SIGMA).cdf).statistic
    assert scores.ks_to_normal(x, SIGMA) == pytest.approx(reference)


@pytest.mark.statistical(seed=1)
def test_w1_of_exact_and_shifted_samples(stat_seed):
    """10^5 exact draws of v ~ N(0, σ²): W1 ≈ 0.01 ± 0.003 (bound 0.1), the neck's mass has standard
    error 6.5e-5 (bound 0.01), the sample sd's relative standard error is 1/√(2n) = 0.0022 (bound
    0.01, 4.47 of them).

    False-failure probability: ≤ 7.8e-6 (the sd at 4.47σ; the other bounds are over 30σ away).
    """
    v = np.random.default_rng(stat_seed).normal(0.0, SIGMA, 100_000)
    assert scores.w1_to_normal(v, SIGMA) < 0.1  # O(σ/√n)
    assert scores.w1_to_normal(v + 2.0, SIGMA) == pytest.approx(2.0, abs=0.1)
    assert math.isnan(scores.w1_to_normal(np.zeros(0), SIGMA))
    v_scores = funnel_runs.score_v(v.astype(np.float32))
    assert v_scores.neck == pytest.approx(norm.cdf(-10.0, scale=SIGMA), abs=0.01)
    assert v_scores.std == pytest.approx(SIGMA, rel=0.01)


@pytest.fixture(scope="module")
def tiny():
    """The four metrics on 4,000 samples in 2 chains."""
    return funnel.reproduce(4_000, 2, seed=0, correction=None)


def test_reproduce_scores_every_metric(tiny):
    assert tiny["config"]["true_v_std"] == pytest.approx(SIGMA)
    assert tiny["config"]["num_samples"] == 4_000
    results = tiny["metrics"]
    assert list(results) == ["Identity", "RMSprop", "Monge", "Shampoo"]
    for name, r in results.items():
        assert r.status() == "ok", name
        assert r.samples.shape == (4_000, 2) and r.samples.dtype == np.float32
        assert math.isfinite(r.scores.w1) and 0 < r.scores.w1 < 20, name
        assert 0 < r.scores.ks <= 1 and 0 <= r.scores.neck <= 1
        assert (r.drift_fallback is not None) == (name == "Monge")
        assert r.steps == 4_000 and r.wall_s > 0


def test_divergence_is_reported_with_samples_before_it():
    setting = funnel_runs.Setting("Identity", 1e4, partial(sgrld.metrics.identity))
    r = funnel_runs.run_metric(jax.random.key(0), setting, 50, 3, None)
    d = r.diverged_at
    assert np.any(d >= 0) and r.status().startswith("diverged at step")
    assert r.samples.shape[0] == int(np.sum(np.where(d >= 0, d, 50)))
    assert np.all(np.isfinite(r.samples))
    rows = funnel.table_rows({"config": {}, "metrics": {"Identity": r}})
    json.dumps(rows, allow_nan=False)


@pytest.mark.filterwarnings("error")
def test_outputs_survive_empty_and_runaway_samples(tmp_path: Path):
    def result(setting, samples, diverged_at):
        samples = np.asarray(samples, np.float32).reshape(-1, 2)
        return funnel_runs.MetricResult(
            setting,
            samples,
            10,
            np.asarray(diverged_at),
            None,
            0,
            1.0,
            funnel_runs.score_v(samples[:, -1]),
        )

    identity, monge = funnel_runs.SETTINGS[0], funnel_runs.SETTINGS[2]
    results = {
        "config": {"num_samples": 10, "chains": 2, "correction": "none", "seed": 0},
        "metrics": {
            "Identity": result(identity, np.zeros((0, 2)), [0, 0]),
            "Monge": result(monge, np.full((10, 2), 1e6), [-1, -1]),
        },
    }
    md, js = funnel.REPRODUCTION.write_tables(results, tmp_path)
    funnel.plot(results, tmp_path)
    rows = json.loads(js.read_text())["metrics"]
    assert rows[0]["w1_v"] is None and rows[0]["status"] == "diverged at step 0 (2/2 chains)"
    assert rows[1]["w1_v"] == pytest.approx(1e6)
    assert "| Identity |" in md.read_text() and (tmp_path / "funnel.png").is_file()


def test_arguments():
    parser = cli.build_parser()
    args = parser.parse_args(["reproduce", "funnel", "--samples", "2e6", "--chains", "16"])
    assert (args.samples, args.chains, args.correction) == (2_000_000, 16, "none")
    assert not args.quick
    with pytest.raises(SystemExit):
        parser.parse_args(["reproduce", "funnel", "--chains", "0"])
    with pytest.raises(SystemExit):
        parser.parse_args(["reproduce", "funnel", "--correction", "exact"])


def test_cli_quick_writes_figure_and_tables(tmp_path: Path, capsys):
    assert cli.main(["reproduce", "funnel", "--quick", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "funnel.png").stat().st_size > 10_000
    table = json.loads((tmp_path / "funnel.json").read_text())
    assert table["config"]["true_v_std"] == pytest.approx(SIGMA)
    rows = table["metrics"]
    assert [row["metric"] for row in rows] == ["Identity", "RMSprop", "Monge", "Shampoo"]
    assert all(row["samples"] == 20_000 and math.isfinite(row["w1_v"]) for row in rows)
    assert "| Monge |" in (tmp_path / "funnel.md").read_text()
    assert "funnel.png" in capsys.readouterr().out
