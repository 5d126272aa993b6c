"""Issue 36's BLR bar measured through the library: whitened errors against NUTS of the new default
and the adaptive share, beside the old defaults, for DOP, QDOP, RMSprop and Monge at decay 0.9,
0.99 and 1/√t, full-batch.

The problem, reference and errors are ``tests/blr_reference.py``'s (australian, 15 parameters,
NUTS). Every row runs ``--chains`` chains from the NUTS mean through ``sgrld.sample`` with
``--burn-in`` steps, then ``--steps`` kept every 10th. The variants:

* ``default``: ``sgrld.sgrld``'s defaults, ``adapt_until="auto"`` (adapt in the first half of the
  burn-in, freeze at the window average of the statistic), no Γ;
* ``share``: adapting throughout with Hutchinson's Γ scaled by the online share
  (``correction_scale="auto"``);
* ``full Γ``: adapting throughout with Hutchinson's Γ (the old corrected setting);
* ``none``: adapting throughout without Γ (the old default).

    python benchmarks/right_by_default/library_blr.py [--chains 64] [--steps 8000] [--burn-in 2000]
        [--decays 0.9 0.99 inverse_sqrt] [--only fisher_diag ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the tests package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # timing.py

from timing import environment, table  # noqa: E402

import sgrld  # noqa: E402
from tests.blr_reference import (  # noqa: E402
    DATA_FILE,
    REFERENCE,
    THIN,
    as_params,
    as_vector,
    load_problem,
    loglik_fn,
    logprior_fn,
    whitened_errors,
)

M = sgrld.metrics
METRICS = {
    "fisher_diag": (lambda d: M.fisher_diag(decay=d), 0.02),
    "fisher_qdiag": (lambda d: M.fisher_qdiag(decay=d), 0.02),
    "rmsprop": (lambda d: M.rmsprop(decay=d), 0.01),
    "monge": (lambda d: M.monge(alpha2=100.0, decay=d), 0.02),
}
"""Metric -> (factory of the decay, learning rate h·N); Monge's α² = 100 makes the full-batch metric
differ from the identity (at α² = 1 it is the identity to 1 %)."""
VARIANTS = {
    "default": {},
    "share": {"adapt_until": None, "correction": "hutchinson", "correction_scale": "auto"},
    "full Γ": {"adapt_until": None, "correction": "hutchinson"},
    "none": {"adapt_until": None},
}


def run(metric, lr: float, options: dict, chains: int, burn_in: int, steps: int):
    problem, ref = load_problem(DATA_FILE), np.load(REFERENCE)
    batch = (jnp.asarray(problem.x, jnp.float32), jnp.asarray(problem.y, jnp.float32))
    n = len(problem.y)
    potential = sgrld.potential(loglik_fn, logprior_fn, n)
    sampler = sgrld.sgrld(potential, metric, learning_rate=lr, num_data=n, **options)
    start = time.perf_counter()
    out = sgrld.sample(
        jax.random.key(0),
        sampler,
        as_params(ref["mean"]),
        lambda key: batch,
        num_samples=steps // THIN,
        thin=THIN,
        burn_in=burn_in,
        num_chains=chains,
    )
    draws = as_vector(out.params).astype(np.float64).reshape(-1, ref["mean"].size)
    mean, cov = draws.mean(axis=0), np.cov(draws, rowvar=False)
    errors = whitened_errors(mean, cov, ref["mean"], ref["cov"])
    return errors, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=64)
    parser.add_argument("--steps", type=int, default=8_000, help="steps after the burn-in")
    parser.add_argument("--burn-in", type=int, default=2_000)
    parser.add_argument("--decays", nargs="+", default=["0.9", "0.99", "inverse_sqrt"])
    parser.add_argument("--only", nargs="+", choices=sorted(METRICS), help="metrics to run")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args()
    print(environment())
    print(f"{args.chains} chains x {args.steps} steps after {args.burn_in}, thinned by {THIN}")
    rows = []
    for name in args.only or METRICS:
        make, lr = METRICS[name]
        for text in args.decays:
            decay = text if text == "inverse_sqrt" else float(text)
            cells = []
            for variant in args.variants:
                (mean_err, cov_err), seconds = run(
                    make(decay), lr, VARIANTS[variant], args.chains, args.burn_in, args.steps
                )
                cells.append(f"{mean_err:.3f} / {cov_err:.3f}")
                print(f"  {name} {text} {variant}: {cells[-1]} ({seconds:.0f} s)", flush=True)
            rows.append([name, text, *cells])
    print(table(["metric", "decay", *(f"{v} (mean / cov)" for v in args.variants)], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
