"""What ``learning_rate="auto"`` costs a user: ``sgrld run`` with the rate searched against the
same run at the rate it chose, and at Monge's α² where it chose it (issue 49's acceptance: at
most 1.5× the wall time).

For each metric, every round runs both commands as the user does (``python -m sgrld run``, a child
process: start-up, data loading, compilation, the search, the run, its scores and its files
included), their order rotating from round to round (``benchmarks/timing.py``). The first round's
auto run gives the rate for the fixed run (``summary.json``'s ``meta.learning_rate_search``); every
auto run must choose it again (the search is reproducible from the seed). Printed per metric: the
chosen rate, the median seconds of each and the median of the per-round ratios, with their range.

The data are read from ``../shared/data`` (``--data-dir``, or ``$SGRLD_DATA_DIR``); without them
the script says so and exits 0.

    python benchmarks/right_by_default/auto_wall.py [--data mnist] [--epochs 20]
        [--metrics identity rmsprop] [--rounds 3] [--set prior.kind=gaussian ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from timing import environment, fmt_spread, paired, rotated, spread, table  # noqa: E402

DATA_DIR = ROOT.parent / "shared" / "data"


def run(settings: list[str], folder: Path, data_dir: Path) -> tuple[float, dict | None]:
    """``(seconds, the choice)`` of one ``sgrld run`` into ``folder``: its
    ``meta.learning_rate_search`` (``None``: the rate given)."""
    args = [sys.executable, "-m", "sgrld", "run", "--data-dir", str(data_dir), "--out", str(folder)]
    args += [part for s in settings for part in ("--set", s)] + ["--overwrite"]
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, check=False)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    summary = json.loads((folder / "summary.json").read_text())
    return seconds, summary["meta"].get("learning_rate_search")


def fixed_settings(choice: dict) -> list[str]:
    """The settings that fix what the auto run chose: its rate, and the metric's option chosen
    beside it (Monge's α²)."""
    fixed = [f"sampler.learning_rate={choice['learning_rate']!r}"]
    if choice.get("option_value") is not None:
        fixed.append(f"sampler.metric_params.{choice['option']}={choice['option_value']!r}")
    return fixed


def metric_row(metric: str, args: argparse.Namespace, work: Path) -> list[str]:
    base = [f"data.name={args.data}", f"sampler.metric={metric}", f"run.epochs={args.epochs}"]
    base += args.set
    auto_s, choice = run(base, work / f"auto_{metric}", args.data_dir)
    assert choice is not None, "the auto run chose no rate"
    rate, chosen = choice["learning_rate"], fixed_settings(choice)
    fixed = [*base, *chosen]
    times: dict[str, list[float]] = {"auto": [auto_s], "fixed": []}
    times["fixed"].append(run(fixed, work / f"fixed_{metric}", args.data_dir)[0])
    for r in range(1, args.rounds):
        for name in rotated(["auto", "fixed"], r):
            seconds, again = run(base if name == "auto" else fixed, work / name, args.data_dir)
            if name == "auto" and fixed_settings(again) != chosen:
                raise SystemExit(f"{metric}: auto chose {again} in round {r + 1}, {choice} before")
            times[name].append(seconds)
    ratio = paired(times["auto"], times["fixed"])
    option = "" if choice.get("option_value") is None else f", α² {choice['option_value']:g}"
    row = [metric, f"{rate:.3g}{option}", f"{spread(times['auto']).median:.1f}"]
    return [*row, f"{spread(times['fixed']).median:.1f}", fmt_spread(ratio, 2)]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="mnist")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--metrics", nargs="+", default=["identity", "rmsprop"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--set", nargs="*", default=["prior.kind=gaussian"], help="more settings")
    default_dir = os.environ.get("SGRLD_DATA_DIR", str(DATA_DIR))
    p.add_argument("--data-dir", type=Path, default=Path(default_dir))
    args = p.parse_args(argv)
    if not args.data_dir.is_dir():
        print(f"no data in {args.data_dir}: nothing measured (give --data-dir)")
        return
    print(environment())
    print(f"{date.today()}: sgrld run {args.data}, {args.epochs} epochs, {' '.join(args.set)}; "
          f"{args.rounds} rounds, the order rotating", flush=True)  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for metric in args.metrics:
            rows.append(metric_row(metric, args, Path(work)))
            print("  ".join(rows[-1]), flush=True)
    head = ["metric", "auto lr", "auto s", "fixed s", "auto / fixed [range]"]
    print(table(head, rows))


if __name__ == "__main__":
    main()
