"""Bayesian logistic regression on australian: the model, its NUTS reference and the error measures.

The model (issue 15's acceptance problem): the 690 rows of LIBSVM's unscaled ``australian``
(``../shared/data/libsvm_australian``, see its PROVENANCE.md), each of the 14 features standardised
to mean 0 and standard deviation 1 over all rows, labels ±1 mapped to y ∈ {0, 1}, 14 weights w and
an intercept b (θ = (w, b): 15 parameters, as with a column of ones appended to x), and::

    z = xᵀw + b,    log p(y|x, θ) = y·z − softplus(z),    θ ~ N(0, 10² I).

The samplers see θ as the parameters ``{"kernel": [14, 1], "bias": [1]}`` of a Flax ``nn.Dense(1)``
(:data:`LAYER`), the layer the Fisher metrics' fast path and QDOP's bias–weight blocks know; NUTS
sees the vector θ. Moments are always of the vector ``(w_1, …, w_14, b)`` (:func:`as_vector`).

Run as a script, this samples the posterior with NumPyro's NUTS (a test-only dependency:
``pip install numpyro``) in float64 and writes its moments to
``tests/data/australian_blr_nuts.npz``::

    .venv/bin/python tests/blr_reference.py [--chains 4] [--draws 20000] [--warmup 2000]

Stored: ``mean`` (15), ``cov`` (15×15), ``num_draws`` (all chains), ``num_chains``,
``feature_mean`` and ``feature_std`` (14, of the raw features), ``sha256`` of the data file,
``max_rhat`` and ``min_ess`` (split R-hat and effective sample size of θ), and the Monte-Carlo
standard errors of the whitened moments: ``mean_mcse`` (15: of L⁻¹(μ̂ − μ), with Σ = LLᵀ) and
``cov_mcse`` (15×15: of the entries of L⁻¹Σ̂L⁻ᵀ), each sd/√ESS of the whitened draws (or of their
products).

The error of moments (μ̂, Σ̂) against the reference (μ, Σ = LLᵀ):

* whitened mean error ``‖L⁻¹(μ̂ − μ)‖₂``,
* whitened covariance error ``‖L⁻¹Σ̂L⁻ᵀ − I‖₂`` (spectral norm).

Both are invariant to an affine change of θ and 0 for exact moments. :func:`run_case` scores a
metric: full-batch SGRLD chains (every step sees all 690 rows) from the NUTS mean, pooled.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

import sgrld
from sgrld.data.libsvm import load_libsvm

DATA_FILE = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "libsvm_australian" / "australian"
)
REFERENCE = Path(__file__).resolve().parent / "data" / "australian_blr_nuts.npz"
NUM_FEATURES = 14
PRIOR_SCALE = 10.0
CHAINS, BURN_IN, STEPS, THIN = 256, 1_000, 16_000, 10
LAYER = nn.Dense(1)


class Problem(NamedTuple):
    """The model's data: standardised features ``x`` [690, 14] and labels ``y`` in {0, 1}."""

    x: np.ndarray
    y: np.ndarray
    feature_mean: np.ndarray
    feature_std: np.ndarray
    sha256: str


def load_problem(path: Path = DATA_FILE) -> Problem:
    """The standardised features and the 0/1 labels (float64)."""
    raw, labels = load_libsvm(path, NUM_FEATURES)
    raw = raw.astype(np.float64)
    mean, std = raw.mean(axis=0), raw.std(axis=0)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return Problem((raw - mean) / std, (labels > 0).astype(np.float64), mean, std, sha)


def loglik_fn(params: dict, batch: tuple[jax.Array, jax.Array]) -> jax.Array:
    """Per-example ``y·z − softplus(z)`` of a batch ``(x, y)``, z the :data:`LAYER`'s logit."""
    x, y = batch
    z = LAYER.apply({"params": params}, x)[:, 0]
    return y * z - jax.nn.softplus(z)


def logprior_fn(params: dict) -> jax.Array:
    """``log N(θ; 0, 10² I)`` up to a constant."""
    return -0.5 * sum(jnp.sum(jnp.square(p)) for p in jax.tree.leaves(params)) / PRIOR_SCALE**2


def as_params(theta: np.ndarray) -> dict:
    """The :data:`LAYER` parameters of the vector ``θ = (w, b)``."""
    theta = jnp.asarray(theta, jnp.float32)
    return {"bias": theta[-1:], "kernel": theta[:-1, None]}


def as_vector(params: dict) -> np.ndarray:
    """``(w, b)`` [..., 15] of (stacked) :data:`LAYER` parameters, leading axes kept."""
    kernel, bias = np.asarray(params["kernel"]), np.asarray(params["bias"])
    return np.concatenate([kernel[..., 0], bias], axis=-1)


def whitened_errors(mean: np.ndarray, cov: np.ndarray, ref_mean, ref_cov) -> tuple[float, float]:
    """``(‖L⁻¹(μ̂ − μ)‖₂, ‖L⁻¹Σ̂L⁻ᵀ − I‖₂)`` with ``Σ = LLᵀ`` the reference covariance."""
    chol = np.linalg.cholesky(np.asarray(ref_cov, np.float64))
    white = lambda a: np.linalg.solve(chol, np.asarray(a, np.float64))
    mean_err = np.linalg.norm(white(np.asarray(mean) - ref_mean))
    s = white(white(cov).T)
    return float(mean_err), float(np.linalg.norm(s - np.eye(len(s)), ord=2))


class Result(NamedTuple):
    """A case's pooled moments, its errors against NUTS and its wall time (with compilation)."""

    mean: np.ndarray
    cov: np.ndarray
    mean_error: float
    cov_error: float
    seconds: float


def run_case(
    metric: sgrld.metrics.Metric,
    learning_rate: float,
    *,
    correction: str = "none",
    adapt_until: int | None = None,
    chains: int = CHAINS,
    burn_in: int = BURN_IN,
    steps: int = STEPS,
    seed: int = 0,
    **options,
) -> Result:
    """Full-batch SGRLD on the problem from the NUTS mean; pooled moments of the kept samples.
    ``options`` go to ``sgrld.sgrld`` (e.g. ``correction_scale``)."""
    problem, ref = load_problem(DATA_FILE), np.load(REFERENCE)
    batch = (jnp.asarray(problem.x, jnp.float32), jnp.asarray(problem.y, jnp.float32))
    num_data = len(problem.y)
    sampler = sgrld.sgrld(
        sgrld.potential(loglik_fn, logprior_fn, num_data),
        metric,
        learning_rate=learning_rate,
        num_data=num_data,
        correction=correction,
        adapt_until=adapt_until,
        **options,
    )
    start = time.perf_counter()
    out = sgrld.sample(
        jax.random.key(seed),
        sampler,
        as_params(ref["mean"]),
        lambda key: batch,
        num_samples=steps // THIN,
        thin=THIN,
        burn_in=burn_in,
        num_chains=chains,
        init="shared",  # every chain at the NUTS mean, as the measured bars were set
    )
    draws = as_vector(out.params).astype(np.float64).reshape(-1, ref["mean"].size)
    seconds = time.perf_counter() - start
    mean, cov = draws.mean(axis=0), np.cov(draws, rowvar=False)
    return Result(mean, cov, *whitened_errors(mean, cov, ref["mean"], ref["cov"]), seconds)


def _mcse(draws: np.ndarray, ess_fn) -> np.ndarray:
    """``sd/√ESS`` of each entry of ``draws`` [chains, draws, ...]."""
    return draws.std(axis=(0, 1)) / np.sqrt(ess_fn(draws))


def nuts(problem: Problem, chains: int, draws: int, warmup: int, seed: int) -> np.ndarray:
    """Posterior draws [chains, draws, 15] from NumPyro's NUTS (dense mass matrix), float64."""
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    x, y = jnp.asarray(problem.x), jnp.asarray(problem.y)

    def model():
        theta = numpyro.sample(
            "theta", dist.Normal(0.0, PRIOR_SCALE).expand([NUM_FEATURES + 1]).to_event(1)
        )
        numpyro.sample("y", dist.Bernoulli(logits=x @ theta[:-1] + theta[-1]), obs=y)

    mcmc = MCMC(
        NUTS(model, dense_mass=True),
        num_warmup=warmup,
        num_samples=draws,
        num_chains=chains,
        chain_method="sequential",
        progress_bar=False,
    )
    mcmc.run(jax.random.key(seed))
    return np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])


def summarise(problem: Problem, draws: np.ndarray) -> dict[str, np.ndarray]:
    """The moments, diagnostics and Monte-Carlo errors stored in :data:`REFERENCE`."""
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    flat = draws.reshape(-1, draws.shape[-1])
    mean, cov = flat.mean(axis=0), np.cov(flat, rowvar=False)
    white = np.linalg.solve(np.linalg.cholesky(cov), (draws - mean)[..., None])[..., 0]
    products = white[..., :, None] * white[..., None, :]
    return {
        "mean": mean,
        "cov": cov,
        "num_draws": np.int64(flat.shape[0]),
        "num_chains": np.int64(draws.shape[0]),
        "feature_mean": problem.feature_mean,
        "feature_std": problem.feature_std,
        "sha256": np.str_(problem.sha256),
        "max_rhat": np.float64(np.max(split_gelman_rubin(draws))),
        "min_ess": np.float64(np.min(effective_sample_size(draws))),
        "mean_mcse": _mcse(white, effective_sample_size),
        "cov_mcse": _mcse(products, effective_sample_size),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=20_000, help="kept draws per chain")
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REFERENCE)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    problem = load_problem()
    start = time.perf_counter()
    draws = nuts(problem, args.chains, args.draws, args.warmup, args.seed)
    ref = summarise(problem, draws)
    print(
        f"NUTS: {args.chains} chains x {args.draws} draws after {args.warmup} warm-up, "
        f"{time.perf_counter() - start:.0f} s; max split R-hat {ref['max_rhat']:.4f}, "
        f"min ESS {ref['min_ess']:.0f}"
    )
    print(
        f"whitened MCSE: mean {np.linalg.norm(ref['mean_mcse']):.4f} (norm), "
        f"cov entries max {ref['cov_mcse'].max():.4f}"
    )
    if ref["max_rhat"] >= 1.01:
        print(f"R-hat {ref['max_rhat']:.4f} >= 1.01: not written", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, **ref)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
