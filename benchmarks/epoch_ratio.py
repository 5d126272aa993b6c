"""Seconds per MNIST epoch of each metric against Identity, measured in interleaved rounds.

Issue 4 asks for the seconds per epoch of the MNIST run of Yu et al. (MLP 784-400-400-10,
horseshoe prior, batch 100, the paper's learning rates): Identity ≤ 3 s, Monge ≤ 1.15× Identity,
Shampoo ≤ 1.6× Identity. Separate 50-epoch runs, one per metric, see different load on a shared
machine, and their ratio moves by ±0.1 from run to run. Here the metrics take turns instead: in each
round every metric runs ``--epochs`` epochs through :func:`sgrld.runner.run` (the runner's own
jitted epoch scan and online scoring; compilation is excluded), the order rotating from round to
round, so that slow phases of the machine hit every metric alike. Reported per metric:

* the median over rounds of its median sampling time per epoch (``sample_s``, the epoch's
  ``lax.scan`` of 500 steps: what the paper times, whose per-epoch seconds exclude evaluation)
  and of its whole epoch (``epoch_s``: sampling and scoring, the runner's ``seconds_per_epoch``);
* the median over rounds of each one's ratio to Identity *in the same round* (paired). The
  targets are checked on sampling time.

Every epoch scores 5 samples on the 10 000 test and 10 000 validation images (burn-in 0, a sample
every 100 steps), as every epoch after the paper's burn-in does. Needs MNIST in ``--data-dir``.

    python benchmarks/epoch_ratio.py --data-dir ../shared/data/mnist [--rounds 5] [--epochs 2]
        [--metrics identity monge shampoo]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import jax

try:
    from sgrld import runner
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from sgrld import runner
from sgrld.experiments import mnist_mlp

TARGETS = {"monge": 1.15, "shampoo": 1.6, "rmsprop": 1.15, "wenzel": 1.15}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="folder holding the MNIST IDX files")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per metric per round")
    parser.add_argument(
        "--metrics",
        nargs="+",
        default=["identity", "monge", "shampoo"],
        choices=mnist_mlp.METRICS,
        help="metrics to time (Identity is always included, as the reference)",
    )
    args = parser.parse_args()
    if args.rounds < 1 or args.epochs < 1:
        parser.error("--rounds and --epochs must be >= 1")
    metrics = ["identity", *(m for m in args.metrics if m != "identity")]

    print(f"command: {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(
        f"python {platform.python_version()}, jax {jax.__version__}, {jax.default_backend()}, "
        f"os.cpu_count() {os.cpu_count()}"
    )
    experiments = {}
    with tempfile.TemporaryDirectory() as tmp:
        for metric in metrics:
            config = mnist_mlp.config(
                "horseshoe", 400, metric, Path(tmp), epochs=args.epochs, data_dir=args.data_dir
            )
            schedule = dataclasses.replace(runner.schedule_of(config), burn_in=0)
            experiments[metric] = (runner.build_experiment(config), schedule)
    print(
        f"MNIST MLP 784-400-400-10, horseshoe, batch 100; {args.rounds} rounds x "
        f"{args.epochs} epochs per metric, order rotating; compilation excluded"
    )

    epoch_s = {m: [] for m in metrics}
    sample_s = {m: [] for m in metrics}
    for r in range(args.rounds):
        order = metrics[r % len(metrics) :] + metrics[: r % len(metrics)]
        for metric in order:
            experiment, schedule = experiments[metric]
            result = runner.run(experiment, dataclasses.replace(schedule, seed=r))
            if result.status != "completed":
                raise SystemExit(f"{metric}: {result.message}")
            epoch_s[metric].append(statistics.median(x["epoch_s"] for x in result.records))
            sample_s[metric].append(statistics.median(x["sample_s"] for x in result.records))
        times = "  ".join(f"{m} {epoch_s[m][-1]:.2f}" for m in metrics)
        print(f"round {r + 1}/{args.rounds}: s/epoch {times}", flush=True)

    print()
    print(f"{'metric':10s} {'sampling s':>11s} {'/Identity':>10s} {'paired range':>14s}", end="")
    print(f" {'epoch s':>9s} {'/Identity':>10s}")
    verdicts = []
    for m in metrics:
        paired = {
            name: [a / b for a, b in zip(t[m], t["identity"], strict=True)]
            for name, t in (("sample", sample_s), ("epoch", epoch_s))
        }
        ratio = statistics.median(paired["sample"])
        print(
            f"{m:10s} {statistics.median(sample_s[m]):11.2f} {ratio:9.2f}x"
            f" {min(paired['sample']):6.2f}-{max(paired['sample']):.2f}x"
            f" {statistics.median(epoch_s[m]):9.2f} {statistics.median(paired['epoch']):9.2f}x"
        )
        if m in TARGETS:
            verdicts.append(
                f"[{'PASS' if ratio <= TARGETS[m] else 'MISS'}] {m} / Identity {ratio:.2f}x "
                f"(target <= {TARGETS[m]}x)"
            )
    identity = statistics.median(sample_s["identity"])
    verdicts.insert(
        0,
        f"[{'PASS' if identity <= 3.0 else 'MISS'}] Identity {identity:.2f} s/epoch "
        "(target <= 3 s)",
    )
    print("\nTargets (issue 4):")
    print("\n".join(f"  {v}" for v in verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
