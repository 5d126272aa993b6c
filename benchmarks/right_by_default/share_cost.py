"""What ``correction_scale="auto"`` costs: the step with the online share ĉ against the step with a
fixed share (issue 36's bar: ≤ 1.15×), per adaptive metric, on the 784-400-400-10 MLP of
``step_throughput.py`` (478,410 parameters, batch 100).

Candidates per metric, each ``--chunk`` steps inside one jitted ``lax.scan`` (how ``sgrld.sample``
steps), the metric adapting throughout (``adapt_until=None``): uncorrected; Hutchinson's Γ with
the fixed share 1; Hutchinson's Γ with ``correction_scale="auto"``. They run in ``--rounds``
interleaved rounds, the order rotating (``timing.interleave``); printed are the median steps/s
and the ratios of time per step paired by round (median and range).

    python benchmarks/right_by_default/share_cost.py [--rounds 7] [--chunk 50]
        [--metrics rmsprop monge shampoo fisher_diag fisher_qdiag]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # mlp.py, timing.py

import mlp  # noqa: E402
from timing import environment, fmt_spread, interleave, paired, spread, table  # noqa: E402

import sgrld  # noqa: E402

FISHER = {
    "fisher_diag": lambda: sgrld.metrics.fisher_diag(decay=0.99),
    "fisher_qdiag": lambda: sgrld.metrics.fisher_qdiag(decay=0.99),
}
"""The Fisher metrics (per-example statistics of the batch), beside ``mlp.py``'s metrics."""
LEARNING_RATE = {**mlp.LEARNING_RATE, "fisher_diag": 1e-4, "fisher_qdiag": 1e-4}
VARIANTS = {
    "none": {},
    "c=1": {"correction": "hutchinson", "correction_scale": 1.0},
    "auto": {"correction": "hutchinson", "correction_scale": "auto"},
}


def candidate(name: str, variant: str, params, batch, potential, chunk: int) -> mlp.ScanChain:
    """The scan chain of ``name``'s step in ``variant``, compiled and run once."""
    corrected = variant != "none"
    metric = FISHER[name]() if name in FISHER else mlp.make_metric(name, corrected)
    sampler = sgrld.sgrld(
        potential,
        metric,
        learning_rate=LEARNING_RATE[name],
        num_data=mlp.NUM_DATA,
        adapt_until=None,
        **VARIANTS[variant],
    )
    return mlp.ScanChain(sampler, params, batch, chunk)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--chunk", type=int, default=50, help="steps per candidate per round")
    parser.add_argument(
        "--metrics", nargs="+", default=["rmsprop", "monge", "shampoo", *FISHER],
        choices=[*mlp.ADAPTIVE, *FISHER],
    )  # fmt: skip
    args = parser.parse_args()
    print(environment())
    params, batch, potential = mlp.problem()
    rows = []
    for name in args.metrics:
        chains = {v: candidate(name, v, params, batch, potential, args.chunk) for v in VARIANTS}
        times = interleave(chains, args.rounds)
        if not all(c.finite for c in chains.values()):
            print(f"  {name}: a chain became non-finite; its times are not a step's", flush=True)
        rate = {v: spread(args.chunk / t for t in times[v]).median for v in VARIANTS}
        rows.append(
            [
                name,
                *(f"{rate[v]:.1f}" for v in VARIANTS),
                fmt_spread(paired(times["c=1"], times["none"])),
                fmt_spread(paired(times["auto"], times["c=1"])),
            ]
        )
        print("  " + " | ".join(rows[-1]), flush=True)
    head = ["metric", *(f"{v} steps/s" for v in VARIANTS), "c=1 / none", "auto / c=1"]
    print(f"{args.rounds} interleaved rounds of {args.chunk} steps; ratios of time per step")
    print(table(head, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
