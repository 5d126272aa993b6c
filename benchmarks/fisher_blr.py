"""Whitened errors against NUTS of every metric on full-batch Bayesian logistic regression.

The problem, its NUTS reference (``tests/data/australian_blr_nuts.npz``, made by
``tests/blr_reference.py``) and the two errors are those of issue 15's acceptance test
(``tests/samplers/test_fisher_blr.py``): australian, 690 rows, 15 parameters, prior N(0, 10²I); the
whitened mean error ‖L⁻¹(μ̂ − μ)‖₂ and covariance error ‖L⁻¹Σ̂L⁻ᵀ − I‖₂ with Σ = LLᵀ from NUTS.
Every case runs ``--chains`` full-batch chains from the NUTS mean, ``--burn-in`` steps and then
``--steps`` kept every 10th, and pools them. "frozen" adapts during the burn-in only
(``adapt_until``), so Γ = 0
afterwards: with the identity it shows the floor of the step size and Monte Carlo. ``--scale``
multiplies every learning rate (run it at 0.5 and 2 to see the discretisation bias); ``--decay``
is the Fisher metrics' (``inverse_sqrt``, the paper's γ_t = 1/√t, or a constant such as 0.9). The
wall time includes compilation.

    python benchmarks/fisher_blr.py [--chains 256] [--steps 16000] [--burn-in 1000] [--scale 1]
        [--decay inverse_sqrt] [--only fisher_diag ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from timing import environment, table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package

import sgrld  # noqa: E402
from tests.blr_reference import run_case  # noqa: E402

M = sgrld.metrics
LEARNING_RATES = {"identity": 0.5, "rmsprop": 0.01}
"""lr = h·N per metric; the Fisher metrics take 0.02 (their preconditioned spectrum is O(1))."""
CASES = [
    ("identity", M.identity, "none"),
    ("rmsprop", M.rmsprop, "none"),
    ("rmsprop", M.rmsprop, "hutchinson"),
    ("fisher_diag", M.fisher_diag, "none"),
    ("fisher_diag", M.fisher_diag, "hutchinson"),
    ("fisher_diag", M.fisher_diag, "frozen"),
    ("fisher_qdiag", M.fisher_qdiag, "none"),
    ("fisher_qdiag", M.fisher_qdiag, "hutchinson"),
    ("fisher_qdiag", M.fisher_qdiag, "frozen"),
    ("fisher_full", M.fisher_full, "hutchinson"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=256)
    parser.add_argument("--steps", type=int, default=16_000, help="steps after the burn-in")
    parser.add_argument("--burn-in", type=int, default=1_000)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every lr")
    parser.add_argument("--decay", default="inverse_sqrt", help="the Fisher metrics' decay")
    parser.add_argument("--only", nargs="+", help="metric names to run (default: all)")
    args = parser.parse_args()
    try:
        decay = args.decay if args.decay == "inverse_sqrt" else float(args.decay)
    except ValueError:
        parser.error(f"--decay must be inverse_sqrt or a number, got {args.decay!r}")
    if min(args.chains, args.steps, args.burn_in, args.scale) <= 0:
        parser.error("--chains, --steps, --burn-in and --scale must be > 0")
    print(environment())
    print(
        f"{args.chains} chains x {args.steps} steps after {args.burn_in}, thinned by 10; "
        f"Fisher decay {decay}"
    )
    rows = []
    for name, make, mode in CASES:
        if args.only and name not in args.only:
            continue
        lr = LEARNING_RATES.get(name, 0.02) * args.scale
        frozen = mode == "frozen"
        result = run_case(
            make(decay=decay) if name.startswith("fisher") else make(),
            lr,
            correction="none" if frozen else mode,
            correction_scale=1.0,  # the full Γ (RESULTS §16); the default share ĉ: §29
            adapt_until=args.burn_in if frozen else None,
            chains=args.chains,
            steps=args.steps,
            burn_in=args.burn_in,
        )
        errors = [f"{result.mean_error:.3f}", f"{result.cov_error:.3f}"]
        rows.append([name, mode, f"{lr:g}", *errors, f"{result.seconds:.1f}"])
        print(f"  {' '.join(rows[-1])}", flush=True)
    head = ["metric", "correction", "lr", "mean err", "cov err", "wall s"]
    print(table(head, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
