"""Corrected pSGLD and Shampoo on N(0, 1) at the paper's decay 0.9, with smaller steps.

Issue 3 asks that the corrected pSGLD and Shampoo be within total variation 0.1 of N(0, 1) at the
settings of Rensmeyer & Niggemann's notebooks (``sgrld reproduce stationary-1d``: 0.1001 and
0.1231). Both metrics are singular where the gradient vanishes (D ≈ 1/|θ|), and at decay 0.9 the
moving average lags behind the metric near θ = 0, which Γ of the limiting metric does not account
for. If that is the cause, the excess should shrink with the step. This runs the two corrected rows
of :mod:`sgrld.experiments.stationary_1d` with their learning rate multiplied by each of
``--factors`` (same decay, same time span in units of 1/lr steps, so smaller steps cost more) and
prints TV(π̂, N(0, 1)) and the Monte-Carlo noise floor of each.

    python benchmarks/stationary_1d_step.py [--chains 1024] [--factors 1 0.5 0.25] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax

try:
    from sgrld.experiments import stationary_1d as s1
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from sgrld.experiments import stationary_1d as s1

import sgrld  # noqa: E402

ROWS = {"psgld-c": sgrld.metrics.rmsprop, "shampoo-c": sgrld.metrics.shampoo}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=1024, help="chains per row")
    parser.add_argument("--factors", type=float, nargs="+", default=[1.0, 0.5, 0.25])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.chains < 2:
        parser.error("--chains must be >= 2 (the noise floor needs groups)")
    if not all(f > 0 for f in args.factors):
        parser.error("--factors must be > 0")
    print(f"command: {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    curves = {c.key: c for c in s1.curves()}
    key = jax.random.key(args.seed)
    for i, (row, factory) in enumerate(ROWS.items()):
        curve = curves[row]
        hyper = {k: v for k, v in curve.settings.items() if k not in ("metric", "correction")}
        hyper.pop("correction_scale", None)
        print(f"{curve.label}: {hyper}, {args.chains} chains, span {curve.span:g} time units")
        for j, factor in enumerate(args.factors):
            lr = curve.learning_rate * factor

            def make(lr=lr, factory=factory, hyper=hyper):
                return sgrld.sgrld(
                    sgrld.targets.standard_normal().potential,
                    factory(**hyper),
                    lr,
                    num_data=1,
                    correction="hutchinson",
                )

            result = s1.run_curve(
                jax.random.fold_in(jax.random.fold_in(key, i), j),
                curve._replace(learning_rate=lr, make=make),
                args.chains,
                curve.span,
            )
            print(
                f"  lr {lr:.3g} ({factor:g}x): TV to N(0, 1) {result.tv_target:.4f}, "
                f"floor {result.floor:.4f}, {result.steps:,} steps, {result.diverged} diverged, "
                f"{result.wall_s:.0f} s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
