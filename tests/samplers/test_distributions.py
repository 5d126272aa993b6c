"""Distribution tests: with a frozen metric every sampler is exact up to a computable O(h) bias.

After ``adapt_until`` steps the metric is a constant preconditioner M (per chain). For a Gaussian
target N(μ, A⁻¹) with gradient noise ε ~ N(0, σ²I), the chain
``θ' = θ − hM(A(θ − μ) + ε) + √(2h) M^{1/2} ξ`` has mean μ and the stationary covariance C solving
the discrete Lyapunov equation ``C = B C Bᵀ + 2hM + h²σ²M Mᵀ`` with ``B = I − hMA``: the exact
answer including the discretisation bias. We compare, per chain, the second moment about μ of its
samples with its own C, and take the standard error from the spread over independent chains.

The adaptation phase uses the Γ correction: uncorrected Monge drifts during adaptation to where the
gradient is large (its bias, see ``test_stationary``) and freezes a metric whose slowest direction
mixes a thousand times slower than the others, which no short test can burn in.

Failure budget: every entry of the mean and of the covariance, for 5 metrics × 2 targets (≈ 800
distinct numbers) must lie within 5 standard errors over 256 chains; for normal errors (Student t,
255 degrees of freedom: 1.07e-6 each) that fails with probability < 1e-3 per run, and the seeds
are fixed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.flatten_util import ravel_pytree

import sgrld

GRAD_NOISE = 0.5
CHAINS, ADAPT, BURN, SAMPLES, THIN = 256, 300, 1500, 32, 100

METRICS = {
    "identity": (sgrld.metrics.identity, 0.04),
    "rmsprop": (lambda: sgrld.metrics.rmsprop(decay=0.99, eps=1e-3), 0.02),
    "wenzel": (lambda: sgrld.metrics.wenzel(decay=0.99, eps=1e-3, update_every=100), 0.02),
    "monge": (lambda: sgrld.metrics.monge(alpha2=0.5, decay=0.9), 0.02),
    "shampoo": (
        lambda: sgrld.metrics.shampoo(decay=0.99, eps=1e-3, update_every=100, block_size=4),
        0.02,
    ),
}
TARGETS = {
    "anisotropic-vectors": lambda: sgrld.samples.targets.anisotropic_gaussian(
        dim=8, condition=30.0, shape={"a": (3,), "b": (5,)}, grad_noise=GRAD_NOISE
    ),
    "correlated-matrix": lambda: sgrld.samples.targets.correlated_gaussian(
        dim=14, rho=0.8, condition=10.0, shape={"w": (3, 4), "b": (2,)}, grad_noise=GRAD_NOISE
    ),
}


def frozen_metric_errors(metric_name, target_name, seed=0):
    """z-scores of the covariance and mean errors, the test's power and the frozen metrics."""
    target = TARGETS[target_name]()
    make_metric, lr = METRICS[metric_name]
    metric = make_metric()
    correction = None if metric_name == "identity" else "hutchinson"
    sampler = sgrld.sgrld(
        target.potential,
        metric,
        learning_rate=lr,
        num_data=1,
        adapt_until=ADAPT,
        correction=correction,
    )
    # Chains start at exact draws, so no initial transient has to be burnt in.
    state = jax.vmap(sampler.init)(target.sample(jax.random.key(seed + 1), CHAINS))
    out = sgrld.sample(
        jax.random.key(seed),
        sampler,
        None,
        target.batch_fn,
        num_samples=SAMPLES,
        thin=THIN,
        burn_in=ADAPT + BURN,
        num_chains=CHAINS,
        state=state,
    )
    flat, unravel = ravel_pytree(target.init_params)
    dim = flat.size
    eye = jnp.eye(dim)
    dense = jax.jit(
        jax.vmap(lambda st: jax.vmap(lambda e: ravel_pytree(metric.inv(st, unravel(e)))[0])(eye).T)
    )
    m_all = np.asarray(dense(out.state.metric_state), np.float64)
    precision = np.linalg.inv(target.cov)
    flat_samples = jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(out.params)
    theta = np.asarray(flat_samples, np.float64) - target.mean
    second = np.einsum("csi,csj->cij", theta, theta) / SAMPLES
    expected = np.empty_like(second)
    for c, m in enumerate(m_all):
        b = np.eye(dim) - lr * m @ precision
        assert np.max(np.abs(np.linalg.eigvals(b))) < 1, "unstable step: the test is misconfigured"
        q = 2 * lr * m + lr**2 * GRAD_NOISE**2 * m @ m.T
        expected[c] = scipy.linalg.solve_discrete_lyapunov(b, q)
    err = second - expected
    se = err.std(0, ddof=1) / np.sqrt(CHAINS)
    z_cov = np.abs(err.mean(0)) / se
    means = theta.mean(1)
    z_mean = np.abs(means.mean(0)) / (means.std(0, ddof=1) / np.sqrt(CHAINS))
    power = 5 * se.max() / np.abs(target.cov).max()
    return z_cov, z_mean, power, m_all


@pytest.mark.statistical(seed=0)
@pytest.mark.parametrize("target_name", sorted(TARGETS))
@pytest.mark.parametrize("metric_name", sorted(METRICS))
def test_frozen_metric_samples_gaussian_exactly(metric_name, target_name, stat_seed):
    """False-failure probability: ≤ 1.3e-4 per case (8 means and 36 distinct covariance entries,
    or 14 and 105, at 5 standard errors over 256 chains: Student t, 1.07e-6 each). The power
    check (5 standard errors under 30% of the largest variance) is random too: in its tightest
    case, shampoo on the correlated matrix, it measured 0.188 ± 0.017 over 13 seeds (at most
    0.220), so 0.3 is 6.6 sd away (< 1e-8); at the former bound 0.2 it failed 2 of 10 seeds of the
    flake-budget sweep."""
    z_cov, z_mean, power, m_all = frozen_metric_errors(metric_name, target_name, stat_seed)
    assert z_cov.max() < 5 and z_mean.max() < 5, (z_cov.max(), z_mean.max())
    # The frozen metric really preconditions (not the identity), except for the identity metric.
    if metric_name != "identity":
        assert np.abs(m_all[0] - np.eye(m_all.shape[-1])).max() > 0.05
    # The test has power: its tolerance (5 standard errors) is under 30% of the largest variance,
    # a third or less of the uncorrected adaptive samplers' biases (2x to 10x, i.e. 100% to 900%).
    assert power < 0.3, power
