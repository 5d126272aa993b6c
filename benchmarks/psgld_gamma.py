"""pSGLD on Li et al.'s 2-D Gaussian with and without the Γ correction, at the paper's settings.

The target, start and step sizes are those of ``sgrld reproduce psgld --parts gaussian``
(:mod:`sgrld_reproductions.psgld.runs`): N(0, diag(0.16, 1)), exact gradients, the RMSprop metric
with α = 0.99 and λ = 1e-5, ``lr = ε/2`` (the paper's Eq. 2, N = 1), chains started at a draw of
the target. For each ε it runs the same keys without Γ and with the Hutchinson Γ, and prints the
covariance error ``‖Σ̂ − Σ‖_F/‖Σ‖_F`` and the two sample variances (targets 0.16 and 1).

    python benchmarks/psgld_gamma.py [--chains 4] [--draws 50000] [--burn-in 1000]
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

import sgrld
from sgrld_reproductions.psgld import runs
from sgrld_reproductions.scaffolding import sample_timed

STEPS = (0.01, 0.03, 0.1, 0.3)
"""The paper's ε (noise variance), the smaller half of ``sgrld reproduce psgld``'s grid."""


def covariance(eps: float, correction: str, args: argparse.Namespace) -> np.ndarray:
    """The pooled sample covariance of pSGLD at step ε with ``correction``."""
    target = sgrld.samples.targets.gaussian([0.0, 0.0], runs.GAUSSIAN_COV)
    chain = sgrld.sgrld(
        target.potential,
        sgrld.metrics.rmsprop(decay=runs.DECAY, eps=runs.LAMBDA),
        learning_rate=eps / 2,
        num_data=1,
        correction=correction,
        correction_scale=1.0,  # the full Γ, as RESULTS measured it
    )
    sample_key, init_key = jax.random.split(jax.random.key(args.seed))
    init = target.sample(init_key, 1)[0]
    out, _ = sample_timed(
        sample_key, chain, init, target.batch_fn, num_samples=args.draws,
        burn_in=args.burn_in, num_chains=args.chains,
    )  # fmt: skip
    return np.cov(np.asarray(out.params, np.float64).reshape(-1, 2).T)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=50_000)
    parser.add_argument("--burn-in", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    truth = np.asarray(runs.GAUSSIAN_COV)
    print("eps    Γ           cov. error  var 1 (0.16)  var 2 (1)")
    for eps in STEPS:
        for correction in ("none", "hutchinson"):
            c = covariance(eps, correction, args)
            error = np.linalg.norm(c - truth) / np.linalg.norm(truth)
            print(f"{eps:<6g} {correction:<11} {error:<11.3f} {c[0, 0]:<13.3f} {c[1, 1]:.3f}")


if __name__ == "__main__":
    main()
