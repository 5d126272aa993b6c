"""Wall time of one ``sgrld sweep`` against the separate ``sgrld run`` processes it replaces.

Issue 17 asks that a sweep of 4 learning rates x 3 replicates on digits compile once, and for its
wall time against 12 separate ``sgrld run`` processes, measured in the same run. Both sides run
the configuration of ``sgrld demo``'s Identity row (64-100-100-10 MLP, horseshoe prior, batches
of 32, burn-in 1000, a sample every 20; :data:`sgrld_app.demo.BASE`) for ``--epochs``
epochs, each as a fresh process, as a user would run them (``python -m sgrld``: imports, data,
compilation and sampling all count):

* **sweep**: ``sgrld sweep --grid sampler.learning_rate=[...] --replicates 3``, 12 chains;
* **runs**: ``sgrld run --set sampler.learning_rate=LR --set run.seed=R`` for the 12 pairs, one
  after the other.

The two take turns in ``--rounds`` rounds, the order rotating (``timing.py``); reported are the
median wall times, the median per-round ratio (runs / sweep) with its range, and from the
``summary.json`` files the compile seconds and the sampling seconds per epoch of both sides.

    python benchmarks/sweep_time.py [--epochs 100] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import environment, fmt_spread, interleave, paired, table

from sgrld_app import demo

LEARNING_RATES = (0.05, 0.1, 0.25, 0.5)
REPLICATES = 3


def sgrld(*args: str) -> None:
    """Run ``python -m sgrld ARGS`` (quietly); stop the benchmark if it fails."""
    done = subprocess.run([sys.executable, "-m", "sgrld", *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"sgrld {' '.join(args)} failed:\n{done.stderr[-2000:]}")


def overrides(epochs: int) -> list[str]:
    """``--set`` arguments of demo's Identity configuration for ``epochs`` epochs."""
    keys = [*demo.BASE, 'sampler.metric="identity"', f"run.epochs={epochs}"]
    return [arg for key in keys for arg in ("--set", key)]


def summaries(folder: Path) -> list[dict]:
    """The ``summary.json`` of every run under ``folder``."""
    return [json.loads(p.read_text()) for p in sorted(folder.rglob("summary.json"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--epochs",
        type=int,
        default=demo.EPOCHS,
        help="epochs of every run (default: the demo's %(default)s)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds")
    args = parser.parse_args()
    if args.rounds < 1 or args.epochs < 1:
        parser.error("--rounds and --epochs must be >= 1")
    print(environment())
    print(
        f"digits, demo's Identity configuration, {args.epochs} epochs; learning rates "
        f"{list(LEARNING_RATES)} x {REPLICATES} replicates; {args.rounds} round(s)"
    )
    common = overrides(args.epochs)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        def sweep() -> None:
            grid = f"sampler.learning_rate={list(LEARNING_RATES)}"
            out = ["--out", str(root / "sweep"), "--overwrite"]
            sgrld("sweep", *common, "--grid", grid, "--replicates", str(REPLICATES), *out)

        def runs() -> None:
            for lr in LEARNING_RATES:
                for seed in range(REPLICATES):
                    out = ["--out", str(root / "runs" / f"{lr}-{seed}"), "--overwrite"]
                    keys = ["--set", f"sampler.learning_rate={lr}", "--set", f"run.seed={seed}"]
                    sgrld("run", *common, *keys, *out)

        times = interleave({"sweep": sweep, "runs": runs}, args.rounds)
        swept, separate = summaries(root / "sweep"), summaries(root / "runs")
    n = len(LEARNING_RATES) * REPLICATES
    ratio = paired(times["runs"], times["sweep"])
    sampling = lambda s: s["sampler_seconds_per_epoch"]
    rows = [
        [
            f"1 sgrld sweep ({n} chains)",
            f"{statistics.median(times['sweep']):.1f}",
            f"{swept[0]['compile_s']:.1f}",
            f"{sampling(swept[0]):.3f}",
        ],
        [
            f"{n} sgrld run (1 chain each)",
            f"{statistics.median(times['runs']):.1f}",
            f"{sum(s['compile_s'] for s in separate):.1f}",
            f"{sum(sampling(s) for s in separate):.3f}",
        ],
    ]
    print()
    print(table(["", "wall s", "compile s", "sampling s/epoch"], rows))
    print(f"\nruns / sweep wall time: {fmt_spread(ratio, 2)} (median [range] over rounds)")
    best = swept[0]["sweep"]["best_setting"]
    print(f"best learning rate on validation log p(y|X): {best}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
