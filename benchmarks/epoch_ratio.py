"""Seconds per MNIST epoch of each metric against Identity, measured in interleaved rounds.

Issue 4 asks for the seconds per epoch of the MNIST run of Yu et al. (MLP 784-400-400-10,
horseshoe prior, batch 100, the paper's learning rates): Identity ≤ 3 s, Monge ≤ 1.15× Identity,
Shampoo ≤ 1.6× Identity. Separate 50-epoch runs, one per metric, see different load on a shared
machine, and their ratio moves by ±0.1 from run to run. Here the metrics take turns instead
(``timing.py``): in each round every metric runs ``--epochs`` epochs through
:func:`sgrld_app.runner.run` (the runner's own jitted epoch and online scoring; compilation is
excluded), the order rotating from round to round, so that slow phases of the machine hit every
metric alike. Reported per metric:

* the median over rounds of its median sampling time per epoch (``sample_s``, the epoch's 500
  steps: what the paper times, whose per-epoch seconds exclude evaluation) and of its whole epoch
  (``epoch_s``: sampling and scoring);
* the median over rounds of each one's ratio to Identity *in the same round* (paired), with the
  range over rounds. The targets are checked on sampling time.

Every epoch scores 5 samples on the 10 000 test and 10 000 validation images (burn-in 0, a sample
every 100 steps), as every epoch after the paper's burn-in does. Needs MNIST in ``--data-dir``.

    python benchmarks/epoch_ratio.py --data-dir ../shared/data/mnist [--rounds 5] [--epochs 2]
        [--metrics identity monge shampoo]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

from timing import environment, fmt_spread, paired, rotated, table

from sgrld_app import runner
from sgrld_app.from_config import build_experiment, run_plan_of
from sgrld_reproductions.scaffolding import MNIST_METRICS, mnist_config

TARGETS = {"monge": 1.15, "shampoo": 1.6, "rmsprop": 1.15, "wenzel": 1.15}


def experiments(metrics, args) -> dict:
    """metric -> (experiment, schedule) of the horseshoe MNIST run, burn-in 0."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for metric in metrics:
            config = mnist_config(
                "horseshoe", 400, metric, Path(tmp), epochs=args.epochs, data_dir=args.data_dir
            )
            schedule = dataclasses.replace(run_plan_of(config), burn_in=0)
            out[metric] = (build_experiment(config), schedule)
    return out


def rounds(metrics, args) -> tuple[dict, dict]:
    """Median sampling and epoch seconds of each metric in each round."""
    runs = experiments(metrics, args)
    sample_s = {m: [] for m in metrics}
    epoch_s = {m: [] for m in metrics}
    for r in range(args.rounds):
        for metric in rotated(metrics, r):
            experiment, schedule = runs[metric]
            result = runner.run(experiment, dataclasses.replace(schedule, seed=r))
            if result.status != "completed":
                raise SystemExit(f"{metric}: {result.message}")
            epoch_s[metric].append(statistics.median(x["epoch_s"] for x in result.records))
            sample_s[metric].append(statistics.median(x["sample_s"] for x in result.records))
        times = "  ".join(f"{m} {epoch_s[m][-1]:.2f}" for m in metrics)
        print(f"round {r + 1}/{args.rounds}: s/epoch {times}", flush=True)
    return sample_s, epoch_s


def report(metrics, sample_s, epoch_s) -> None:
    """The table of medians and paired ratios, and the targets of issue 4."""
    rows, verdicts = [], []
    for m in metrics:
        sample = paired(sample_s[m], sample_s["identity"])
        rows.append(
            [
                m,
                f"{statistics.median(sample_s[m]):.2f}",
                fmt_spread(sample, 2),
                f"{statistics.median(epoch_s[m]):.2f}",
                fmt_spread(paired(epoch_s[m], epoch_s["identity"]), 2),
            ]
        )
        if m in TARGETS:
            ok = sample.median <= TARGETS[m]
            verdicts.append(
                f"[{'PASS' if ok else 'MISS'}] {m} / Identity {sample.median:.2f}x "
                f"(target <= {TARGETS[m]}x)"
            )
    identity = statistics.median(sample_s["identity"])
    ok = identity <= 3.0
    verdicts.insert(
        0, f"[{'PASS' if ok else 'MISS'}] Identity {identity:.2f} s/epoch (target <= 3 s)"
    )
    head = ["metric", "sampling s", "/Identity [range]", "epoch s", "/Identity [range]"]
    print()
    print(table(head, rows))
    print("\nTargets (issue 4):")
    print("\n".join(f"  {v}" for v in verdicts))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="folder holding the MNIST IDX files")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per metric per round")
    parser.add_argument(
        "--metrics",
        nargs="+",
        default=["identity", "monge", "shampoo"],
        choices=MNIST_METRICS,
        help="metrics to time (Identity is always included, as the reference)",
    )
    args = parser.parse_args()
    if args.rounds < 1 or args.epochs < 1:
        parser.error("--rounds and --epochs must be >= 1")
    metrics = ["identity", *(m for m in args.metrics if m != "identity")]
    print(environment())
    print(
        f"MNIST MLP 784-400-400-10, horseshoe, batch 100; {args.rounds} rounds x "
        f"{args.epochs} epochs per metric, order rotating; compilation excluded"
    )
    report(metrics, *rounds(metrics, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
