"""Issue 15's acceptance: adaptive Fisher metrics with the Γ correction on Bayesian logistic
regression, against NUTS.

The problem is :mod:`tests.blr_reference` (australian, 690 rows, 15 parameters, prior N(0, 10²I));
its NUTS moments (μ, Σ = LLᵀ) are stored in ``tests/data/australian_blr_nuts.npz``. A sampler's
pooled moments (μ̂, Σ̂) are scored by

* the whitened mean error ``‖L⁻¹(μ̂ − μ)‖₂``,
* the whitened covariance error ``‖L⁻¹Σ̂L⁻ᵀ − I‖₂`` (spectral norm),

both 0 for exact moments and in units of posterior standard deviations. Each case runs full-batch
SGRLD (every step sees all 690 rows, so the only errors are the discretisation's, the metric's and
Monte Carlo's) with chains started at the NUTS mean (:func:`tests.blr_reference.run_case`).

Resolution and failure budget (seeds fixed): 256 chains × 16,000 steps after 1,000 of burn-in, at
lr = 0.02 for the Fisher metrics (about 2 minutes a case on 2 shared cores, hence ``slow``). Floors
measured (``benchmarks/fisher_blr.py``): a Fisher metric frozen after the burn-in (a constant
preconditioner, Γ = 0) scores ≈ 0.03 (mean) and ≈ 0.06 (covariance) at 8,000 steps; the
discretisation part of that, from the discrete Lyapunov equation of the Laplace approximation, is
0.02 at lr = 0.02; Monte Carlo (slowest whitened direction, ESS ≈ 10⁴; ≈ 2√(15/ESS) for the
covariance) and the reference's own error (≈ 0.01 / 0.02) make the rest. A sampler with those
errors passes the 0.1 bound with a margin of ≈ 0.04; one whose bias is 0.1 fails.

The metrics adapt throughout, with a constant decay 0.9 and with the paper's γ_t = 1/√t. The
correction adds the Γ of the limiting metric F(s(θ)) (:mod:`sgrld.parts.correction`) scaled by the
library's default share ``correction_scale="auto"``: ĉ, estimated online, the share of Γ the
dynamics need when the average follows θ only in part (:mod:`sgrld.parts.share`). Measured
(8,000 steps): QDOP with decay 0 (full batch: G = F(s(θ_t))) scores 0.035 / 0.060 with the full
Γ, the frozen floor, and 0.247 / 0.244 uncorrected. Under γ_t = 1/√t the average remembers ≈ √t
steps, about the chains' correlation time along w₁₄ (the weight of the heavy-tailed 14th
feature), so the full Γ (``correction_scale=1``), twelve times DOP's along w₁₄, overcorrects
QDOP: 0.112 / 0.279 at 16,000 steps (RESULTS §16). That case was an expected failure of this
test until the default share became ĉ (issue 36; RESULTS §29 has the two side by side).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sgrld
from tests.blr_reference import DATA_FILE, REFERENCE, load_problem, run_case, whitened_errors

DATA_DIR = Path(__file__).parents[3] / "shared" / "data"
BOUND = 0.1
FISHER_LR, RMSPROP_LR = 0.02, 0.01

pytestmark = pytest.mark.skipif(
    not DATA_DIR.is_dir(), reason=f"the shared data directory {DATA_DIR} is absent"
)


def test_reference_matches_the_data_and_converged():
    ref, problem = np.load(REFERENCE), load_problem(DATA_FILE)
    assert str(ref["sha256"]) == problem.sha256
    np.testing.assert_allclose(ref["feature_mean"], problem.feature_mean, rtol=1e-12)
    np.testing.assert_allclose(ref["feature_std"], problem.feature_std, rtol=1e-12)
    assert ref["max_rhat"] < 1.01 and ref["num_draws"] >= 80_000
    # the reference's own Monte-Carlo error is far below what the bound resolves
    assert np.linalg.norm(ref["mean_mcse"]) < 0.02 and ref["cov_mcse"].max() < 0.01


def test_whitened_errors_are_in_posterior_standard_deviations():
    ref = np.load(REFERENCE)
    chol = np.linalg.cholesky(ref["cov"])
    assert whitened_errors(ref["mean"], ref["cov"], ref["mean"], ref["cov"]) == pytest.approx(
        (0.0, 0.0), abs=1e-9
    )
    shifted = ref["mean"] + chol @ np.full(15, 0.3 / np.sqrt(15))
    stretched = chol @ np.diag([1.2] + [0.9] * 14) @ chol.T
    errors = whitened_errors(shifted, stretched, ref["mean"], ref["cov"])
    assert errors == pytest.approx((0.3, 0.2))


@pytest.mark.slow
@pytest.mark.statistical(seed=0)
@pytest.mark.parametrize(
    ("name", "decay"),
    [
        ("fisher_diag", 0.9),
        ("fisher_qdiag", 0.9),
        ("fisher_diag", "inverse_sqrt"),
        ("fisher_qdiag", "inverse_sqrt"),
    ],
)
def test_adaptive_fisher_with_gamma_matches_nuts(name, decay, stat_seed):
    """False-failure probability: ≤ 1e-3 (not derived: the errors measured at seed 0 sit ≈ 0.04
    under the bound 0.1, and the seed sweep has not been run for this slow test)."""
    metric = getattr(sgrld.metrics, name)(decay=decay)  # labels="empirical", adaptive
    result = run_case(metric, FISHER_LR, correction="hutchinson", seed=stat_seed)
    print(f"{name}, decay {decay}, hutchinson: {result.mean_error:.3f} {result.cov_error:.3f}")
    assert result.mean_error <= BOUND and result.cov_error <= BOUND


@pytest.mark.slow
def test_corrected_rmsprop_is_reported(record_property):
    result = run_case(sgrld.metrics.rmsprop(), RMSPROP_LR, correction="hutchinson")
    print(f"rmsprop, hutchinson: {result.mean_error:.3f} {result.cov_error:.3f}")
    record_property("rmsprop_hutchinson_errors", (result.mean_error, result.cov_error))
    assert np.isfinite([result.mean_error, result.cov_error]).all()
