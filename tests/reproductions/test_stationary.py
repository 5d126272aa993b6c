"""Tests of the stationary-density reproductions: Rensmeyer & Niggemann Fig. 1, and in n-D.

Failure budget. Each statistical test runs with a fixed seed and a stated budget; its tolerance is
set from the Monte-Carlo noise floor of that budget (the expected TV of the histogram from noise
alone, :func:`scores.noise_floor`, about ``2.46/√n_eff`` on these 42 cells; the TV of one
histogram fluctuates around its expectation by roughly a fifth of the floor):

* Monge, 512 chains × 5 time units after a burn-in of 10 (the ``--quick`` budget of the CLI):
  n_eff ≈ 9,000, floor ≈ 0.026. As published: TV to ½(1+θ²)φ is floor + bias (bias ≲ 0.01 in the
  full run) ≈ 0.03, tested < 0.05; TV to φ is 0.24, tested > 0.12. Corrected: TV to φ ≈ 0.03,
  tested < 0.05.
* pSGLD at the stabilised setting (decay 0.5), 512 chains × 1 time unit after 1.5: n_eff ≈ 6,600,
  floor ≈ 0.03, tested < 0.06; as published (TFP), 128 chains × 0.5: TV to φ ≈ 0.28, tested > 0.15.
* Shampoo (1×1 factor), 512 chains × 1 time unit: stabilised corrected (burn-in 1.5) TV to φ ≈ 0.03
  (0.017 in the full run), tested < 0.06 at floor ≈ 0.03. As published (burn-in 3), TV to its
  prediction ≈ 0.06 (floor 0.033 plus the slow mixing through θ ≈ 0, where its metric blows up;
  0.024 in the full run), tested < 0.1, against 0.30 for a sampler at φ; TV to φ ≈ 0.31, tested
  > 0.2.
* Adam-SGLD, 256 chains × 1 time unit after 1.5: floor ≈ 0.04; TV to its prediction tested < 0.07,
  to φ (0.18 in the limit) tested > 0.12.
* gaussian-2d with Monge (the ``--quick`` budget: 51 chains × 20 samples): covariance error about
  11 without Γ and ≲ 0.2 with it; the ratio is tested ≥ 3.

The margins are four or more standard deviations of the noise, so a failure means a regression
(wrong prediction, wrong Γ scale, noise off by a factor), not an unlucky seed.
"""

from __future__ import annotations

import argparse
import json
import math

import jax
import numpy as np
import pytest
from scipy.stats import norm

import sgrld
from sgrld.samples import distances as scores
from sgrld_reproductions import stationary_1d as s1
from sgrld_reproductions import stationary_nd as snd
from sgrld_reproductions.stationary_1d import rows as rows1
from sgrld_reproductions.stationary_nd import runs as snd_runs

pytestmark = [pytest.mark.reproduction, pytest.mark.long]


def _curve(key):
    return next(c for c in rows1.curves() if c.key == key)


def _cli(module, argv):
    parser = argparse.ArgumentParser()
    module.REPRODUCTION.add_arguments(parser)
    return module.REPRODUCTION.run(parser.parse_args(argv))


def test_normalisers_match_the_paper():
    published = [c for c in rows1.curves() if c.variant == rows1.VARIANTS[0]]
    assert [c.family for c in published] == list(rows1.FAMILIES)
    expected = {"pSGLD": 1.25795, "Monge": 0.5, "Shampoo": 1.25331, "Adam-SGLD": 2.04953}
    for c in published:
        z = rows1.normaliser(c.factor)
        assert z == pytest.approx(expected[c.family], abs=1e-4), c.family
        assert z == pytest.approx(rows1.PAPER_NORMALISERS[c.family], abs=1e-3), c.family
    assert rows1.normaliser(_curve("monge-c").factor) == pytest.approx(1.0)


def test_bin_probabilities_are_exact():
    p = scores.bin_probabilities(norm.pdf)
    cdf = norm.cdf(scores.EDGES)
    np.testing.assert_allclose(p[:-1], np.diff(cdf), atol=1e-10)
    assert p[-1] == pytest.approx(2 * norm.sf(2.05), abs=1e-10)
    assert p.sum() == pytest.approx(1.0, abs=1e-10)
    x = np.array([-3.0, -2.0, 0.0, 0.01, 2.06])
    f = scores.frequencies(x)
    assert f[-1] == pytest.approx(0.4)
    assert f[scores.EDGES.searchsorted(0.0) - 1] == pytest.approx(0.4)


def test_predicted_distances_to_the_target():
    """TV(π, p) on the paper's cells: Adam-SGLD's prediction is within 0.2 of N(0, 1)."""
    target = scores.bin_probabilities(scores.normal_pdf)
    expected = {"psgld": 0.279, "monge": 0.241, "shampoo": 0.302, "adam": 0.177}
    for key, tv in expected.items():
        c = _curve(key)
        z = rows1.normaliser(c.factor)
        pred = scores.bin_probabilities(lambda t, c=c, z=z: z * c.factor(t) * scores.normal_pdf(t))
        assert scores.total_variation(pred, target) == pytest.approx(tv, abs=1e-3), key


def test_psgld_tfp_prediction_uses_one_minus_decay():
    c = _curve("psgld")
    assert c.settings["correction_scale"] == pytest.approx(1 - c.settings["decay"])
    x = np.array([0.5, 2.0])
    np.testing.assert_allclose(c.factor(x), (1e-8 + x) ** 0.9)
    np.testing.assert_allclose(_curve("shampoo").factor(x), x)
    np.testing.assert_allclose(_curve("psgld-s").factor(x), 1.0)


@pytest.mark.statistical(seed=0)
@pytest.mark.parametrize("rho", [0.0, 0.9])
def test_noise_floor_is_the_expected_tv_of_noise(rho, stat_seed):
    """The batch-means floor of one run is the mean TV over replicate runs, autocorrelated too.

    The TV of one run fluctuates by about a fifth of its mean, so the mean TV over 128 replicates
    has a relative standard error of 0.017 at ρ = 0.9 (0.011 at ρ = 0); measured over 150 seeds the
    floors' mean is 0.8% under it, so the 10% bound is 5.5σ away (the spread of the floors is 0.03
    of their mean, bound 0.15; n_eff within 0.03 of chains·n, bound 0.15, and 0.63·chains·n at
    ρ = 0.9, bound 0.7). With 16 replicates, as before, the relative standard error was 0.052 and
    the bound 1.8σ away at ρ = 0.9 (3.2σ at ρ = 0).
    False-failure probability: ≤ 1e-6 per ρ (the mean-TV bound at ≥ 5.5σ, normal).
    """
    rng = np.random.default_rng(stat_seed)
    replicates, chains, n = 128, 128, 100
    z = rng.normal(size=(replicates, chains, n))
    x = np.empty_like(z)
    x[..., 0] = z[..., 0]
    for t in range(1, n):  # AR(1) chains with exact N(0, 1) marginals
        x[..., t] = rho * x[..., t - 1] + math.sqrt(1 - rho**2) * z[..., t]
    p = scores.bin_probabilities(scores.normal_pdf)
    tvs = [scores.total_variation(scores.frequencies(r), p) for r in x]
    floors, n_effs = zip(*(scores.noise_floor(r) for r in x), strict=True)
    assert np.mean(floors) == pytest.approx(np.mean(tvs), rel=0.1)
    assert np.std(floors) < 0.15 * np.mean(floors)
    if rho == 0.0:
        assert np.mean(n_effs) == pytest.approx(chains * n, rel=0.15)
    else:
        assert np.mean(n_effs) < 0.7 * chains * n


@pytest.fixture(scope="module")
def one_d_runs(tmp_path_factory):
    """seed ↦ the CLI on the two Monge rows with the quick budget and 512 chains (run once)."""
    runs = {}

    def rows(seed):
        if seed not in runs:
            out = tmp_path_factory.mktemp("stationary-1d")
            argv = ["--quick", "--chains", "512", "--only", "monge", "monge-c"]
            assert _cli(s1, [*argv, "--seed", str(seed), "--out", str(out)]) == 0
            table = json.loads((out / "stationary_1d.json").read_text())["rows"]
            assert (out / "stationary_1d.png").stat().st_size > 0
            assert "Monge (corrected)" in (out / "stationary_1d.md").read_text()
            runs[seed] = {row["key"]: row for row in table}
        return runs[seed]

    return rows


@pytest.fixture
def one_d(one_d_runs, stat_seed):
    return one_d_runs(stat_seed)


@pytest.mark.statistical(seed=0)
def test_monge_as_published_samples_its_prediction(one_d):
    """False-failure probability: ≤ 1e-4 (3 TV and floor bounds 4 or more noise sds away, see
    above)."""
    row = one_d["monge"]
    assert row["noise_floor"] < 0.03 and row["diverged"] == 0
    assert row["tv_prediction"] < 0.05
    assert row["tv_target"] > 0.12
    assert row["paper_normaliser"] == 0.5 and row["normaliser"] == pytest.approx(0.5)
    assert [c["holds"] for c in row["checks"]][1] is True  # TV(π̂, p) ≥ 0.2


@pytest.mark.statistical(seed=0)
def test_corrected_monge_samples_the_target(one_d):
    """False-failure probability: ≤ 3.2e-5 (1 TV bound 4 noise sds away, see above)."""
    row = one_d["monge-c"]
    assert row["tv_target"] < 0.05
    assert row["tv_prediction"] is None and row["requirements"].startswith("TV(π̂,p) ≤ 0.02")


@pytest.mark.slow
@pytest.mark.statistical(seed=3)
def test_stabilised_corrected_psgld_samples_the_target(stat_seed):
    """False-failure probability: ≤ 1e-4 (3 TV bounds 4 or more noise sds away, see above)."""
    key = jax.random.key(stat_seed)
    fixed = rows1.run_curve(key, _curve("psgld-s")._replace(burn=1.5), 512, 1.0)
    assert fixed.floor < 0.04
    assert fixed.tv_target < 0.06
    published = rows1.run_curve(key, _curve("psgld")._replace(burn=1.5), 128, 0.5)
    assert published.tv_target > 0.15
    assert published.tv_prediction < published.tv_target


@pytest.mark.slow
@pytest.mark.statistical(seed=5)
def test_shampoo_as_published_and_stabilised_corrected(stat_seed):
    """Shampoo's 1×1 factor: as published near its prediction and far from φ; with Γ at decay 0.5
    near φ (so a missing, or grossly mis-scaled, Γ through Shampoo's cached roots fails here).

    False-failure probability: ≤ 2e-4 (5 TV and floor bounds 4 or more noise sds away, see above).
    """
    key = jax.random.key(stat_seed)
    fixed = rows1.run_curve(key, _curve("shampoo-s")._replace(burn=1.5), 512, 1.0)
    assert fixed.floor < 0.04
    assert fixed.tv_target < 0.06
    published = rows1.run_curve(key, _curve("shampoo"), 512, 1.0)
    assert published.floor < 0.04
    assert published.tv_prediction < 0.1
    assert published.tv_target > 0.2


@pytest.mark.statistical(seed=4)
def test_adam_sgld_samples_its_prediction(stat_seed):
    """False-failure probability: ≤ 1e-4 (2 TV bounds 4 or more noise sds away, see above)."""
    r = rows1.run_curve(jax.random.key(stat_seed), _curve("adam")._replace(burn=1.5), 256, 1.0)
    assert r.tv_prediction < 0.07
    assert r.tv_target > 0.12


def test_diverging_chains_are_dropped_and_reported():
    boom = _curve("monge")._replace(
        key="boom",
        make=lambda: sgrld.sgrld(
            sgrld.samples.targets.standard_normal().potential,
            sgrld.metrics.identity(),
            learning_rate=1e6,
            num_data=1,
        ),
        burn=1e-5,
        thin=1e-6,
    )
    r = rows1.run_curve(jax.random.key(0), boom, 4, 1e-5)
    assert r.diverged == 4 and r.samples == 0 and math.isnan(r.tv_target)
    row = s1.table_rows({"config": {}, "rows": {"boom": r}})[0]
    assert row["tv_target"] is None and row["all_hold"] is False


@pytest.mark.statistical(seed=0)
def test_covariance_error(stat_seed):
    """200,000 draws of N(0, diag(1, 4)): Ĉ₂₂ has standard error 4·√(2/n) = 0.013, the rest less.
    The first error is ≈ 0.0035 ± 0.002 (bound 0.02, 6.5σ of Ĉ₂₂); the second is (Ĉ₂₂ − 1)/√2 to
    first order, relative standard error 0.0042 (bound 0.02, 4.8σ).

    False-failure probability: ≤ 2e-6 (the second bound at 4.8σ, normal).
    """
    x = np.random.default_rng(stat_seed).normal(size=(200_000, 2)) * [1.0, 2.0]
    assert scores.covariance_error(x, np.diag([1.0, 4.0])) < 0.02
    assert scores.covariance_error(x, np.diag([1.0, 1.0])) == pytest.approx(
        3 / math.sqrt(2), rel=0.02
    )


# The n-D requirement of issue 3 (Γ makes the covariance error ≥ 5× smaller): RMSprop, Wenzel
# and Monge on gaussian-2d at its full budget (512 chains × 200 samples, the run of RESULTS §8),
# Shampoo on gaussian-10d at the quick budget (128 chains, a tenth of the span; on gaussian-2d its
# 1×1 factors leave a lag bias that the quick budget does not resolve; Wenzel's small bias on
# gaussian-10d needs the full budget of 4,096 chains). At the quick budget gaussian-2d's chains
# give about one independent draw each, and the corrected RMSprop's error is Monte-Carlo noise
# large enough to put its ratio below 5 on 2 of 10 seeds (RESULTS §24). A broken Γ for one metric
# (its corrected error back at the uncorrected one, > 1) fails.
N_D_RUNS = {"gaussian-2d": ("RMSprop", "Wenzel", "Monge"), "gaussian-10d": ("Shampoo",)}
N_D_QUICK = {"gaussian-2d": False, "gaussian-10d": True}


@pytest.fixture(scope="module")
def n_d_runs(tmp_path_factory):
    """seed ↦ the n-D CLI's rows of ``N_D_RUNS``, at the budgets of ``N_D_QUICK`` (run once)."""
    runs = {}

    def rows(seed):
        if seed not in runs:
            runs[seed] = []
            for problem, metrics in N_D_RUNS.items():
                out = tmp_path_factory.mktemp(f"stationary-nd-{problem}")
                argv = ["--only", problem, "--metrics", *metrics, "--seed", str(seed)]
                argv += ["--quick"] if N_D_QUICK[problem] else []
                assert _cli(snd, [*argv, "--out", str(out)]) == 0
                assert problem in (out / "stationary_nd.md").read_text()
                runs[seed] += json.loads((out / "stationary_nd.json").read_text())["rows"]
        return runs[seed]

    return rows


@pytest.fixture
def n_d(n_d_runs, stat_seed):
    return n_d_runs(stat_seed)


@pytest.mark.slow
@pytest.mark.statistical(seed=0)
def test_corrected_samplers_fix_the_nd_covariance(n_d):
    """False-failure probability: ≤ 1e-6. Measured on 12 seeds (1000, 1002, 1005–1014): the
    smallest ratios are RMSprop 26.7, Wenzel 16.9, Monge 204 and Shampoo 12.2, against 5. A ratio
    below 5 needs the corrected error above a fifth of the smallest uncorrected one seen (0.32,
    0.47, 2.6 and 0.39), which is ≥ 14.6 across-seed standard deviations above its mean for every
    metric (means 0.023, 0.113, 0.032, 0.143; sds 0.018, 0.022, 0.022, 0.017). For RMSprop, whose
    corrected error is Monte-Carlo noise, its square would be 121 times its mean square: a
    weighted sum of χ²₁ exceeds t times its mean with probability at most P(χ²₁ > t) for
    t ≥ 1.54 (Székely & Bakirov 2003), here < 1e-27. The budget of 1e-6 leaves room for tails
    heavier than these. (At the quick budget for gaussian-2d it failed 2 of 10 seeds.)"""
    ran = {(row["problem"], row["metric"]) for row in n_d}
    assert ran == {(p, m) for p, metrics in N_D_RUNS.items() for m in metrics}
    for row in n_d:
        where = (row["problem"], row["metric"])
        assert row["error_none"] > 1.0, where  # the bias is there to be removed
        assert row["ratio"] >= snd.RATIO and row["holds"], (where, row["ratio"])
        assert row["us_per_step_none"] > 0 and row["us_per_step_gamma"] > 0
        assert row["diverged"] == "0/0", where


def test_nd_rows_cover_every_metric():
    names = [m.name for m in snd_runs.metric_specs()]
    assert names == ["Identity", "RMSprop", "Wenzel", "Monge", "Shampoo", "Adam-SGLD"]
    keys = {p.key: p for p in snd_runs.problems()}
    assert keys["gaussian-2d"].num_leaves == 2 and keys["gaussian-10d"].num_leaves == 2
    assert keys["funnel"].num_leaves == 1 and not keys["funnel"].gaussian
    with pytest.raises(ValueError, match="unknown metrics"):
        snd.reproduce(0, quick=True, metrics=("Adagrad",))


def test_nd_budget_per_metric():
    tenfold = {p.key: p for p in snd_runs.problems()}["gaussian-10d"]
    assert tenfold.chains_for("Wenzel") == tenfold.chains == 4096
    assert tenfold.chains_for("Shampoo") == 128
    config = {
        "seed": 0,
        "quick": False,
        "problems": {
            "gaussian-10d": {
                "learning_rate": 0.01,
                "chains": 4096,
                "fewer_chains": {"Shampoo": 128},
                "span": 20_000,
                "thin": 200,
            }
        },
    }
    caption = snd.caption({"config": config})
    assert "gaussian-10d: lr 0.01, 4,096 chains (Shampoo 128) × 100 samples" in caption
