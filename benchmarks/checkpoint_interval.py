"""What a checkpoint every epoch costs a run of short epochs, against ``run.checkpoint_seconds``.

Ten chains of a 784-400-400-10 MLP are a checkpoint of 27 MB, and on an H200 their whole epoch
(500 steps and scoring) takes about 0.15 s (RESULTS §4): a checkpoint each epoch, the old default,
cost such a run about as much as its epochs. This script measures the same effect on a CPU with
epochs made short: the digits data (about 1,400 training images, 14 steps of batch 100), an MLP
64-W-W-10 and C chains, one run with ``checkpoint_seconds = 0`` (a checkpoint after every epoch)
and one with the default 60 s (only the last, for runs shorter than that), taking turns in rounds
(``timing.rotated``) so that load hits both alike.
Reported: the median time of one checkpoint write (``sgrld_app.checkpoint.save``, timed inside the
runs that write one each epoch) beside the median epoch (``epoch_s``: sampling and scoring), and
each setting's wall seconds per epoch with compilation excluded (``(wall − compile_s) / epochs``:
the checkpoint writes are in it, and so is the run's start-up, the same for both), with their
ratio paired by round.

    python benchmarks/checkpoint_interval.py [--rounds 5] [--epochs 20] [--chains 10] [--width 400]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from timing import environment, fmt_spread, paired, rotated, table

from sgrld_app import checkpoint, runner
from sgrld_app.config import load_config
from sgrld_app.from_config import build_experiment, run_plan_of

SECONDS = (0.0, 60.0)
"""``run.checkpoint_seconds`` compared: every epoch, and the default."""


def timed_saves(seconds_of_saves: list[float]):
    """Wrap :func:`sgrld_app.checkpoint.save` (which the runner calls through the module) to append
    the seconds of each call to ``seconds_of_saves``."""
    save = checkpoint.save

    def timed(*args, **kwargs):
        start = time.perf_counter()
        path = save(*args, **kwargs)
        seconds_of_saves.append(time.perf_counter() - start)
        return path

    checkpoint.save = timed


def per_epoch(experiment, schedule, seconds: float, out: Path) -> tuple[float, float, int]:
    """One run's wall seconds per epoch (compilation excluded), its median epoch, and its newest
    checkpoint's size."""
    start = time.perf_counter()
    result = runner.run(experiment, schedule, out=out, checkpoint_seconds=seconds)
    wall = time.perf_counter() - start
    if result.status != "completed":
        raise SystemExit(f"checkpoint_seconds={seconds}: {result.message}")
    epoch = statistics.median(r["epoch_s"] for r in result.records)
    size = max(p.stat().st_size for p in (out / "checkpoints").glob("epoch_*.npz"))
    return (wall - result.compile_s) / schedule.epochs, epoch, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--epochs", type=int, default=20, help="epochs per run")
    parser.add_argument("--chains", type=int, default=10, help="chains per run")
    parser.add_argument("--width", type=int, default=400, help="hidden width W")
    args = parser.parse_args()
    if min(args.rounds, args.epochs, args.chains, args.width) < 1:
        parser.error("--rounds, --epochs, --chains and --width must be >= 1")
    config = load_config(
        None,
        [
            "data.name=digits",
            f"model.widths=[{args.width}, {args.width}]",
            f"run.chains={args.chains}",
            f"run.epochs={args.epochs}",
            "run.burn_in=0",
            "run.thin=7",
            "sampler.learning_rate=0.05",
        ],
    )
    experiment, schedule = build_experiment(config), run_plan_of(config)
    print(environment())
    print(
        f"digits, MLP 64-{args.width}-{args.width}-10, {args.chains} chains, {args.epochs} epochs "
        f"a run, {args.rounds} rounds, order rotating; compilation excluded"
    )
    wall: dict[float, list[float]] = {s: [] for s in SECONDS}
    epochs: list[float] = []
    saves: list[float] = []
    timed_saves(saves)
    size = 0
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for seconds in rotated(SECONDS, r):
                out = Path(tmp) / f"r{r}-{seconds:g}"
                w, e, size = per_epoch(experiment, schedule, seconds, out)
                wall[seconds].append(w)
                epochs.append(e)
            shown = "  ".join(f"{s:g} s: {wall[s][-1] * 1e3:.0f} ms" for s in SECONDS)
            print(f"round {r + 1}/{args.rounds}: wall per epoch, checkpoint_seconds {shown}")
    default = wall[SECONDS[1]]
    rows = [
        [
            f"{s:g}",
            f"{statistics.median(wall[s]) * 1e3:.0f}",
            fmt_spread(paired(wall[s], default), 2),
        ]
        for s in SECONDS
    ]
    print()
    print(table(["checkpoint_seconds", "wall ms/epoch", "/ 60 s [range]"], rows))
    save, epoch = statistics.median(saves), statistics.median(epochs)
    print(
        f"\ncheckpoint {size / 1e6:.1f} MB: a write takes {save * 1e3:.0f} ms (median of "
        f"{len(saves)}), {save / epoch:.2f}x the median epoch ({epoch * 1e3:.0f} ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
