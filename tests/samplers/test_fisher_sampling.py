"""Sampling with the Fisher metrics: frozen after adaptation, each is exact up to its O(h) bias.

Conjugate Bayesian linear regression through a Flax ``nn.Dense`` (so the per-example statistics
take the fast path): ``y = x·w + b + N(0, σ²)``, prior N(0, I), N = 40 full-batch steps, hence no
gradient noise. The posterior is N(μ, A⁻¹) with ``A = XᵀX/σ² + I``. After ``adapt_until`` steps
(adapted with the Γ correction) the metric is a constant preconditioner M per chain, and the chain
``θ' = θ − hMA(θ − μ) + √(2h) M^{1/2}ξ`` (h = lr/N) has mean μ and the covariance C of the discrete
Lyapunov equation ``C = B C Bᵀ + 2hM``, ``B = I − hMA``, as in ``test_distributions``.

Failure budget: every entry of the mean (4) and covariance (10 distinct) for 3 metrics × 2 label
kinds within 5 standard errors over 256 independent chains; under normal errors a false failure has
probability < 1e-4 per run, and the seeds are fixed.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.flatten_util import ravel_pytree

import sgrld

N, SIGMA, LR = 40, 0.5, 0.05
CHAINS, ADAPT, BURN, SAMPLES, THIN = 256, 300, 1000, 32, 50
LAYER = nn.Dense(1)
METRICS = {
    "fisher_diag": sgrld.metrics.fisher_diag,
    "fisher_qdiag": sgrld.metrics.fisher_qdiag,
    "fisher_full": sgrld.metrics.fisher_full,
}


def problem():
    kx, kw, ky = jax.random.split(jax.random.key(7), 3)
    x = jax.random.normal(kx, (N, 3)) * jnp.array([1.0, 2.0, 0.5]) + 0.3
    y = x @ jax.random.normal(kw, (3,)) + 0.5 + SIGMA * jax.random.normal(ky, (N,))
    apply = lambda net, inputs: LAYER.apply({"params": net}, inputs)
    loglik = sgrld.bnn.likelihoods.gaussian(apply, noise_std=SIGMA)
    logprior = lambda p: -0.5 * sum(jnp.sum(v**2) for v in jax.tree.leaves(p))
    params = {"net": {"bias": jnp.zeros(1), "kernel": jnp.zeros((3, 1))}}
    design = np.concatenate([np.ones((N, 1)), np.asarray(x, np.float64)], axis=1)  # bias first
    precision = design.T @ design / SIGMA**2 + np.eye(4)
    mean = np.linalg.solve(precision, design.T @ np.asarray(y, np.float64) / SIGMA**2)
    return sgrld.potential(loglik, logprior, N), params, (x, y), precision, mean


@pytest.mark.statistical(seed=0)
@pytest.mark.parametrize("labels", ["empirical", "model"])
@pytest.mark.parametrize("name", sorted(METRICS))
def test_frozen_fisher_metric_samples_the_posterior_exactly(name, labels, stat_seed):
    """False-failure probability: ≤ 1.5e-5 per case (4 means and 10 distinct covariance entries at
    5 standard errors over 256 chains: Student t, 1.07e-6 each)."""
    potential, params, data, precision, mean = problem()
    metric = METRICS[name](labels=labels, eps=1e-3)
    sampler = sgrld.sgrld(
        potential, metric, learning_rate=LR, num_data=N, adapt_until=ADAPT, correction="hutchinson"
    )
    flat, unravel = ravel_pytree(params)  # leaf order: bias, kernel (as the design's columns)
    cov = np.linalg.inv(precision)
    starts = np.random.default_rng(stat_seed).multivariate_normal(mean, cov, CHAINS)
    starts = starts.astype(np.float32)
    state = jax.vmap(sampler.init)(jax.vmap(unravel)(jnp.asarray(starts)))
    out = sgrld.sample(
        jax.random.key(stat_seed),
        sampler,
        None,
        lambda key: data,
        num_samples=SAMPLES,
        thin=THIN,
        burn_in=ADAPT + BURN,
        num_chains=CHAINS,
        state=state,
    )
    eye = jnp.eye(flat.size)
    dense = jax.vmap(
        lambda st: jax.vmap(lambda e: ravel_pytree(metric.inv(st, unravel(e)))[0])(eye).T
    )
    m_all = np.asarray(dense(out.state.metric_state), np.float64)
    theta = np.asarray(jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(out.params), np.float64)
    theta -= mean
    second = np.einsum("csi,csj->cij", theta, theta) / SAMPLES
    h = LR / N
    expected = np.empty_like(second)
    for c, m in enumerate(m_all):
        b = np.eye(4) - h * m @ precision
        assert np.max(np.abs(np.linalg.eigvals(b))) < 1, "unstable step: the test is misconfigured"
        expected[c] = scipy.linalg.solve_discrete_lyapunov(b, 2 * h * m)
    err = second - expected
    z_cov = np.abs(err.mean(0)) / (err.std(0, ddof=1) / np.sqrt(CHAINS))
    means = theta.mean(1)
    z_mean = np.abs(means.mean(0)) / (means.std(0, ddof=1) / np.sqrt(CHAINS))
    assert z_cov.max() < 5 and z_mean.max() < 5, (z_cov.max(), z_mean.max())
    # The metric preconditions: far from the identity, and close to the posterior's scale.
    assert np.abs(m_all[0] - np.eye(4)).max() > 0.5
    power = 5 * (err.std(0, ddof=1) / np.sqrt(CHAINS)).max() / np.abs(cov).max()
    assert power < 0.2, power
