"""Conjugate Bayesian linear regression: the library's conventions against a closed-form answer.

The model is the BNN stack's own: a linear ``apply`` (kernel [3, 1] and bias [1]), the Gaussian
likelihood with fixed noise σ (:func:`sgrld.bnn.likelihoods.gaussian`), the Gaussian prior
(:func:`sgrld.bnn.priors.gaussian`, std 1 on every parameter), the per-datum potential of
:func:`sgrld.potential` and SGLD (:func:`sgrld.sgrld`, identity metric) on minibatches drawn
with replacement (:func:`sgrld.minibatch_fn`). With ``x̃ = [x, 1]`` the posterior is
``N(μ, A⁻¹)``, ``A = X̃ᵀX̃/σ² + I``, ``μ = A⁻¹X̃ᵀy/σ²``.

The chain is exactly solvable, step size and minibatch noise included. With ``h = lr/N`` it is
``θ' = (I − hA_t)θ + h b_t + √(2hT) ξ`` with ``A_t = (N/B)Σ_k a_{i_k} + I``,
``b_t = (N/B)Σ_k c_{i_k}`` (``a_i = x̃_i x̃_iᵀ/σ²``, ``c_i = x̃_i y_i/σ²``, indices i.i.d. uniform),
independent of θ. So its stationary mean is μ exactly and its second moment S solves the linear
fixed point

    S = E[D S Dᵀ] + h(E[D μ bᵀ] + E[b μᵀ Dᵀ]) + h² E[b bᵀ] + 2hT·I,      D = I − hA_t,

whose expectations over one minibatch are sums of per-datum moments (:func:`exact_moments`). A
sampler that got ``learning_rate = h·N``, the noise ``√(2·lr·T/N)`` or the prior's ``1/N``
wrong would miss this answer by far more than the tolerance (the naive posterior covariance
``A⁻¹`` itself is several standard errors away at this step size; asserted below).

Failure budget: the 4 mean and 10 covariance entries, per temperature, must lie within 5
standard errors (from the spread over 256 independent chains); for normal errors that fails with
probability < 1.5·10⁻⁵ per temperature, and the seeds are fixed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld import bnn

N, B, DIM, NOISE = 100, 10, 3, 0.5
LR = 0.1  # h = lr/N = 1e-3; h·λ_max(A) ≈ 0.6
CHAINS, BURN, SAMPLES, THIN = 256, 200, 200, 5


def data():
    kx, ke = jax.random.split(jax.random.key(42))
    x = np.asarray(jax.random.normal(kx, (N, DIM)), np.float64)
    y = x @ np.array([1.0, -0.5, 0.25]) + 0.3 + NOISE * np.asarray(jax.random.normal(ke, (N,)))
    return x.astype(np.float32), y.astype(np.float32)


def exact_moments(x, y, h, temperature):
    """Stationary mean and covariance of the SGLD chain above (float64)."""
    xt = np.hstack([x, np.ones((N, 1))]).astype(np.float64)
    y = y.astype(np.float64)
    d = xt.shape[1]
    a = np.einsum("ni,nj->nij", xt, xt) / NOISE**2
    c = xt * y[:, None] / NOISE**2
    big_a = a.sum(0) + np.eye(d)
    mu = np.linalg.solve(big_a, c.sum(0))
    da, dc = a - a.mean(0), c - c.mean(0)
    scale = N**2 / B  # Var of (N/B)·Σ_k over B i.i.d. indices = (N²/B)·Var_i
    d_bar = np.eye(d) - h * big_a
    # E[D μ bᵀ] and E[b bᵀ], then S ↦ E[D S Dᵀ] as a d²×d² matrix (row-major vec).
    mean = lambda spec, *ops: np.einsum(spec, *ops) / N  # an average over the data
    cross = np.outer(d_bar @ mu, c.sum(0)) - h * scale * mean("nij,j,nk->ik", da, mu, dc)
    bb = np.outer(c.sum(0), c.sum(0)) + scale * mean("ni,nj->ij", dc, dc)
    const = h * (cross + cross.T) + h**2 * bb + 2 * h * temperature * np.eye(d)
    op = np.kron(d_bar, d_bar) + h**2 * scale * mean("nij,nkl->ikjl", da, da).reshape(d * d, -1)
    second = np.linalg.solve(np.eye(d * d) - op, const.ravel()).reshape(d, d)
    return mu, second - np.outer(mu, mu), np.linalg.inv(big_a)


def potential():
    """The model's per-datum potential Û/N (also SGHMC's and SGNHT's, ``test_sghmc.py``)."""
    apply = lambda net, inputs: inputs @ net["kernel"] + net["bias"]
    prior = bnn.priors.gaussian(weight_scale=np.sqrt(DIM), bias_scale=1.0)  # std 1 everywhere
    return sgrld.potential(
        bnn.likelihoods.gaussian(apply, noise_std=NOISE), bnn.logprior_fn(prior), N
    )


def run_chains(sampler, x, y, seed, chains=CHAINS, burn=BURN, samples=SAMPLES):
    """``sampler``'s chains from 0 on minibatches of (x, y): ``[chains, samples, 4]`` float64."""
    params = {"net": {"kernel": jnp.zeros((DIM, 1)), "bias": jnp.zeros(1)}, "prior": {}}
    out = sgrld.sample(
        jax.random.key(seed), sampler, params,
        sgrld.minibatch_fn((jnp.asarray(x), jnp.asarray(y)), B),
        num_samples=samples, thin=THIN, burn_in=burn, num_chains=chains, init="shared",
    )  # fmt: skip
    net = out.params["net"]
    return np.concatenate([net["kernel"][..., 0], net["bias"]], axis=-1).astype(np.float64)


@pytest.mark.statistical(seed=7)
@pytest.mark.parametrize("temperature", [1.0, 0.3])
def test_sgld_matches_the_exact_stationary_moments(temperature, stat_seed):
    """False-failure probability: ≤ 1.5e-5 per temperature (4 means and 10 covariance entries at
    5 standard errors over 256 chains: Student t with 255 degrees of freedom, 1.07e-6 each)."""
    x, y = data()
    mu, cov, posterior_cov = exact_moments(x, y, LR / N, temperature)
    sampler = sgrld.sgrld(
        potential(), sgrld.metrics.identity(), learning_rate=LR, num_data=N, temperature=temperature
    )
    theta = run_chains(sampler, x, y, stat_seed)  # [chains, samples, 4]
    per_chain_mean = theta.mean(1)
    dev = theta - mu
    per_chain_cov = np.einsum("csi,csj->cij", dev, dev) / SAMPLES
    z_mean = (per_chain_mean.mean(0) - mu) / (per_chain_mean.std(0, ddof=1) / np.sqrt(CHAINS))
    se_cov = per_chain_cov.std(0, ddof=1) / np.sqrt(CHAINS)
    z_cov = (per_chain_cov.mean(0) - cov) / se_cov
    upper = np.triu_indices(4)
    assert np.abs(z_mean).max() < 5, z_mean
    assert np.abs(z_cov[upper]).max() < 5, z_cov
    # Power: the exact answer differs from the naive posterior covariance T·A⁻¹ by many
    # standard errors (the step size and minibatch noise are visible), so the test can tell.
    z_naive = (per_chain_cov.mean(0) - temperature * posterior_cov) / se_cov
    assert np.abs(z_naive[upper]).max() > 10, z_naive
