"""Issue 36's default measured through the library, side by side with the old default.

1. Rensmeyer & Niggemann's N(0, 1) with exact gradients, pSGLD (``rmsprop(decay=0.99)``), lr 5e-3,
   ``--chains`` chains from θ = 1, a burn-in of 4,000 steps, then 200 draws thinned by 20: TV to
   N(0, 1) on 40 bins of 0.2 over [−4, 4] plus the outside, for ``adapt_until="auto"`` (the new
   default), ``None`` (the old: adapting throughout, uncorrected) and, for the record of the
   window's choice, the freeze at half the burn-in with the second quarter averaged.
2. The README quickstart's Bayesian linear regression (N = 100, minibatches of 20, Monge with
   Hutchinson's Γ, lr 0.02), 4 chains from w = 0 (40 posterior sd from the mode), burn-in 500,
   1,000 draws thinned by 20: split R-hat and bulk ESS of w, for the same settings.

    python benchmarks/right_by_default/library_default.py [--chains 512] [--seeds 0 1]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # timing.py
from timing import environment, table  # noqa: E402

import sgrld  # noqa: E402
from sgrld.samples.diagnostics import convergence  # noqa: E402

EDGES = np.linspace(-4.0, 4.0, 41)


def tv_to_normal(draws: np.ndarray) -> float:
    """Total variation between the draws' histogram and N(0, 1) on :data:`EDGES` and outside."""
    from scipy.stats import norm

    counts = np.histogram(draws, EDGES)[0] / draws.size
    probs = np.diff(norm.cdf(EDGES))
    outside = 1.0 - counts.sum(), 1.0 - probs.sum()
    return 0.5 * (np.abs(counts - probs).sum() + abs(outside[0] - outside[1]))


SETTINGS = {
    '"auto" (new default)': ({}, None),
    "None (old default)": ({"adapt_until": None}, None),
    '"auto" at B/2, window [B/4, B/2)': ({}, lambda b: (b // 2, b // 4)),
}
"""Name -> (options of ``sgrld.sgrld``, the ``"auto"`` window as ``burn_in -> (adapt_until,
average_from)``; ``None``: the library's). The last is the research prototype's window."""


@contextlib.contextmanager
def window(rule):
    """``adapt_until="auto"`` resolved by ``rule`` instead of the library's window."""
    if rule is None:
        yield
        return
    from sgrld.samplers import sampler as module

    saved = module.auto_freeze
    module.auto_freeze = lambda metric, burn_in, start=0: tuple(start + v for v in rule(burn_in))
    try:
        yield
    finally:
        module.auto_freeze = saved


def one_d(chains: int, seed: int, burn: int = 4000) -> dict[str, float]:
    t = sgrld.samples.targets.standard_normal()
    out = {}
    for name, (extra, rule) in SETTINGS.items():
        sampler = sgrld.sgrld(
            t.potential,
            sgrld.metrics.rmsprop(decay=0.99, eps=1e-8),
            learning_rate=5e-3,
            num_data=1,
            **extra,
        )
        with window(rule):
            samples = sgrld.sample(
                jax.random.key(seed),
                sampler,
                jnp.ones(()),
                t.batch_fn,
                num_samples=200,
                thin=20,
                burn_in=burn,
                num_chains=chains,
            )
        out[name] = tv_to_normal(np.asarray(samples.params).ravel())
    return out


def quickstart(seed: int) -> dict[str, tuple[float, float]]:
    x = jax.random.normal(jax.random.key(0), (100,))
    y = 2.0 * x + 0.5 * jax.random.normal(jax.random.key(1), (100,))
    loglik = lambda w, batch: -0.5 * ((batch[1] - w * batch[0]) / 0.5) ** 2
    potential = sgrld.potential(loglik, lambda w: -0.5 * w**2, num_data=100)
    batches = sgrld.minibatch_fn((x, y), batch_size=20)
    out = {}
    for name, (extra, rule) in SETTINGS.items():
        sampler = sgrld.sgrld(
            potential,
            sgrld.metrics.monge(alpha2=1.0),
            learning_rate=0.02,
            num_data=100,
            correction="hutchinson",
            **extra,
        )
        with window(rule):
            samples = sgrld.sample(
                jax.random.key(seed),
                sampler,
                jnp.zeros(()),
                batches,
                num_samples=1000,
                thin=20,
                burn_in=500,
                num_chains=4,
            )
        row = convergence({"w": np.asarray(samples.params)})[0]
        out[name] = (row["r_hat"], row["ess_bulk"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=512)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args()
    print(environment())
    names = list(SETTINGS)
    tv = {s: one_d(args.chains, s) for s in args.seeds}
    print(table(["1-D TV to N(0, 1)", *(f"seed {s}" for s in args.seeds)], [
        [n, *(f"{tv[s][n]:.3f}" for s in args.seeds)] for n in names
    ]))  # fmt: skip
    qs = {s: quickstart(s + 2) for s in args.seeds}
    print(table(["quickstart: R-hat / ESS of w", *(f"seed {s + 2}" for s in args.seeds)], [
        [n, *(f"{qs[s][n][0]:.3f} / {qs[s][n][1]:.0f}" for s in args.seeds)] for n in names
    ]))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
