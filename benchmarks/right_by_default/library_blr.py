"""Issue 36's BLR bar measured through the library: whitened errors against NUTS of the new default
and the adaptive share, beside the old defaults, for DOP, QDOP, RMSprop and Monge at decay 0.9,
0.99 and 1/√t, full-batch.

The problem, reference and errors are ``tests/blr_reference.py``'s (australian, 15 parameters,
NUTS). Every row runs ``--chains`` chains from the NUTS mean through ``sgrld.sample`` with
``--burn-in`` steps, then ``--steps`` kept every 10th. The variants:

* ``default``: ``sgrld.sgrld``'s defaults, ``adapt_until="auto"`` (adapt until 3/4 of the
  burn-in, freeze at the statistic's average over its [5/8, 3/4)), no Γ;
* ``share``: adapting throughout with Hutchinson's Γ scaled by the online share
  (``correction_scale="auto"``);
* ``full Γ``: adapting throughout with Hutchinson's full Γ, ``correction_scale=1`` (the share's
  old default);
* ``none``: adapting throughout without Γ (the old default).

    python benchmarks/right_by_default/library_blr.py [--chains 64] [--steps 8000] [--burn-in 2000]
        [--decays 0.9 0.99 inverse_sqrt] [--only fisher_diag ...] [--seeds 0 1 ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the tests package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # timing.py

from timing import environment, table  # noqa: E402

import sgrld  # noqa: E402
from tests.blr_reference import THIN, run_case  # noqa: E402

M = sgrld.metrics
METRICS = {
    "fisher_diag": (lambda d: M.fisher_diag(decay=d), 0.02),
    "fisher_qdiag": (lambda d: M.fisher_qdiag(decay=d), 0.02),
    "rmsprop": (lambda d: M.rmsprop(decay=d), 0.01),
    "monge": (lambda d: M.monge(alpha2=100.0, decay=d), 0.5),
}
"""Metric -> (factory of the decay, learning rate h·N): the research prototype's (FINDINGS b).
Monge's α² = 100 makes the full-batch metric differ from the identity (at α² = 1 it is the
identity to 1 %)."""
VARIANTS = {
    "default": {"adapt_until": "auto"},
    "share": {"adapt_until": None, "correction": "hutchinson", "correction_scale": "auto"},
    "full Γ": {"adapt_until": None, "correction": "hutchinson", "correction_scale": 1.0},
    "none": {"adapt_until": None},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=64)
    parser.add_argument("--steps", type=int, default=8_000, help="steps after the burn-in")
    parser.add_argument("--burn-in", type=int, default=2_000)
    parser.add_argument("--decays", nargs="+", default=["0.9", "0.99", "inverse_sqrt"])
    parser.add_argument("--only", nargs="+", choices=sorted(METRICS), help="metrics to run")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="a row per seed")
    args = parser.parse_args()
    print(environment())
    print(f"{args.chains} chains x {args.steps} steps after {args.burn_in}, thinned by {THIN}")
    rows = []
    for name in args.only or METRICS:
        make, lr = METRICS[name]
        for text in args.decays:
            decay = text if text == "inverse_sqrt" else float(text)
            for seed in args.seeds:
                cells = []
                for variant in args.variants:
                    result = run_case(
                        make(decay),
                        lr,
                        chains=args.chains,
                        burn_in=args.burn_in,
                        steps=args.steps,
                        seed=seed,
                        **VARIANTS[variant],
                    )
                    mean_err, cov_err = result.mean_error, result.cov_error
                    cells.append(f"{mean_err:.3f} / {cov_err:.3f}")
                    print(
                        f"  {name} {text} seed {seed} {variant}: {cells[-1]} "
                        f"({result.seconds:.0f} s)",
                        flush=True,
                    )
                rows.append([name, text, str(seed), *cells])
    head = ["metric", "decay", "seed", *(f"{v} (mean / cov)" for v in args.variants)]
    print(table(head, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
