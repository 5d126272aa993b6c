"""Wenzel on ``stationary-nd``'s 10-D Gaussian with more chains: how much bias is there to remove?

Issue 3 asks that the corrected samplers' covariance error be at least 5× smaller than the
uncorrected ones' on each n-D Gaussian. Wenzel's bias on ``gaussian-10d`` is small, so the ratio
shows only when the Monte-Carlo floor is well below it. This runs the problem and samplers of
:mod:`sgrld.experiments.stationary_nd` with ``--chains`` chains (and, to measure other settings,
``--lr`` and ``--burn``; default the problem's): SGLD (the floor), Wenzel without Γ, with the
Hutchinson Γ (one probe) and with the exact Γ, and prints the covariance error
``‖Ĉ − Σ‖_F/‖Σ‖_F`` of each. ``stationary-nd`` had lr 0.002, burn-in 10,000 and 128 chains (ratio
2.1) until this script showed the budget that resolves the bias.

    python benchmarks/wenzel_10d_budget.py [--chains 1024] [--lr LR] [--burn STEPS] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax

try:
    from sgrld.experiments import stationary_nd
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from sgrld.experiments import stationary_nd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=1024, help="chains per sampler")
    parser.add_argument("--lr", type=float, default=None, help="step size (default: the problem's)")
    parser.add_argument(
        "--burn", type=int, default=None, help="burn-in steps (default: the problem's)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.chains < 2:
        parser.error("--chains must be >= 2")
    if args.lr is not None and not args.lr > 0:
        parser.error("--lr must be > 0")
    if args.burn is not None and args.burn < 0:
        parser.error("--burn must be >= 0")
    print(f"command: {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    problem = next(p for p in stationary_nd.problems() if p.key == "gaussian-10d")
    problem = problem._replace(
        learning_rate=problem.learning_rate if args.lr is None else args.lr,
        burn=problem.burn if args.burn is None else args.burn,
    )
    specs = {s.name: s for s in stationary_nd.metric_specs()}
    samples = problem.span // problem.thin
    print(
        f"{problem.title}; lr {problem.learning_rate:g}, burn-in {problem.burn}, "
        f"{args.chains} chains x {samples} samples"
    )
    key = jax.random.key(args.seed)
    rows = [("Identity", None), ("Wenzel", None), ("Wenzel", "hutchinson"), ("Wenzel", "exact")]
    for i, (name, mode) in enumerate(rows):
        sampler = specs[name].make(problem.target.potential, problem.learning_rate, mode)
        start = time.perf_counter()
        result = stationary_nd.run_sampler(
            jax.random.fold_in(key, i), problem, sampler, args.chains, problem.span
        )
        label = f"{name}, Γ {mode or 'dropped'}" if name != "Identity" else "Identity (SGLD floor)"
        print(
            f"  {label:24s} error {result.error:.4f}  ({result.samples:,} samples, "
            f"{result.diverged} diverged, {time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
