"""Every quick reproduction's JSON in this checkout against another tree's, timings aside (issues
50 and 52: "the quick reproductions' JSON is identical, timings aside").

Each of ``--names`` (default: every reproduction) runs as ``python -m sgrld reproduce NAME
--quick`` from this checkout and from ``--against`` (another checkout, e.g. ``git worktree add
/tmp/base COMMIT``), one tree first on ``PYTHONPATH``, under ``nice``, into ``OUT/this/NAME`` and
``OUT/other/NAME``. Then every ``.json`` and ``.jsonl`` file under the two folders is compared value
by value: keys that hold times (``*_s``, ``seconds``, ``wall``, ``ms``, rates per second,
``timing``, ``compile``, ``cpu``, ...) are left out, and each folder's own path is masked in
strings. A value that differs is listed with its relative difference, so that float rounding
(~1e-7) tells itself apart from other draws (a stream that changed moves a table's values by
their Monte-Carlo error)::

    git worktree add /tmp/base 9eb34e1
    python benchmarks/quick_json.py --against /tmp/base --out /tmp/quick --data-dir ../shared/data
    python benchmarks/quick_json.py --against /tmp/base --out /tmp/quick --compare-only

``cifar-resnet`` needs ``--cifar-dir`` (the python pickles, e.g. the test suite's synthetic files;
run with ``--validation-size 100``), else it is skipped; ``funnel`` and the ``stationary-*`` need no
data.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMES = (
    "funnel",
    "isgd-uci",
    "stationary-1d",
    "stationary-nd",
    "cifar-resnet",
    "psgld",
    "natural-langevin",
    "isgd-mnist",
    "monge-alpha",
    "mnist-mlp",
)
"""Every reproduction, the quickest first."""
NO_DATA = ("funnel", "stationary-1d", "stationary-nd")
TIMING = re.compile(
    r"(^|_)(s|ms|us|seconds|wall|time|date|when|version|cpu|host|commit|elapsed)$"
    r"|seconds|per_s$|per_step|timing|duration|compile|wall|gamma_cost|^ess$|s/epoch",
    re.I,
)
"""Keys whose values are times, rates of time or the machine's: left out of the comparison
(``ess`` is psgld's table column of the least ESS per second, ``s/epoch`` a table's seconds).

Example:
  >>> keys = ("wall_s", "epoch_cpu_s", "min_ess_per_s", "per_split", "val_nll", "steps")
  >>> [k for k in keys if TIMING.search(k)]
  ['wall_s', 'epoch_cpu_s', 'min_ess_per_s']
"""
NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")


def relative(a, b) -> float | None:
    """The relative difference of two numbers, or the largest of the numbers written in two
    strings (a formatted table's cells), or ``None`` where there are none to pair.

    Example:
      >>> relative(1.0, 1.5), relative("2.0 ± 0.1", "2.5 ± 0.1"), relative("yes", "no")
      (0.3333333333333333, 0.2, None)
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) / max(abs(a), abs(b), 1e-300)
    pairs = NUMBER.findall(str(a)), NUMBER.findall(str(b))
    if not pairs[0] or len(pairs[0]) != len(pairs[1]):
        return None
    return max(relative(float(x), float(y)) for x, y in zip(*pairs, strict=True))


def differences(a, b, path: str = "", masks: tuple[str, ...] = ()) -> list[tuple[str, str, float]]:
    """``(path, what, relative difference or nan)`` of each value that differs between two JSON
    values, keys matching :data:`TIMING` aside, each of ``masks`` removed from strings.

    Example:
      >>> differences({"x": 1.0, "wall_s": 3, "m": "in /a"}, {"x": 1.0, "wall_s": 4, "m": "in /b"},
      ...             masks=("/a", "/b"))
      []
      >>> differences({"rows": [1, 2.0]}, {"rows": [1, 2.5]})
      [('.rows[1]', '2.0 != 2.5', 0.2)]
    """
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if TIMING.search(str(k)):
                continue
            if k not in a or k not in b:
                out.append((f"{path}.{k}", "on one side only", math.nan))
            else:
                out += differences(a[k], b[k], f"{path}.{k}", masks)
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = [(path, f"length {len(a)} != {len(b)}", math.nan)] if len(a) != len(b) else []
        for i, (x, y) in enumerate(zip(a, b, strict=False)):  # lengths: above
            out += differences(x, y, f"{path}[{i}]", masks)
        return out
    for mask in masks:
        a, b = (v.replace(mask, "<OUT>") if isinstance(v, str) else v for v in (a, b))
    same = a == b or all(isinstance(v, float) and math.isnan(v) for v in (a, b))
    rel = relative(a, b)
    return [] if same else [(path, f"{a!r} != {b!r}", math.nan if rel is None else rel)]


def load(path: Path):
    text = path.read_text()
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def compare(this: Path, other: Path, name: str) -> tuple[str, list]:
    """The verdict on one reproduction's two folders and the values that differ."""
    files = lambda root: {  # noqa: E731
        p.relative_to(root) for p in (root / name).rglob("*") if p.suffix in (".json", ".jsonl")
    }
    mine, theirs = files(this), files(other)
    if not mine and not theirs:
        return "not run", []
    found = [(str(p), "only in one tree", math.nan) for p in sorted(mine ^ theirs)]
    for p in sorted(mine & theirs):
        masks = tuple(str(q) for root in (other, this) for q in (root, root.resolve()))
        found += differences(load(other / p), load(this / p), str(p), masks)
    return ("identical" if not found else "DIFFERENT"), found


def run(tree: Path, out: Path, name: str, args: argparse.Namespace) -> str:
    """``sgrld reproduce NAME --quick`` from ``tree`` into ``out/NAME``; its exit code and time."""
    extra = [] if name in NO_DATA else ["--data-dir", str(args.data_dir)]
    if name == "cifar-resnet":
        if args.cifar_dir is None:
            return "skipped (no --cifar-dir)"
        extra = ["--data-dir", str(args.cifar_dir), "--no-verify-checksums"]
        extra += ["--validation-size", "100"]
    cmd = ["nice", "-n", "10", sys.executable, "-m", "sgrld", "reproduce", name, "--quick"]
    env = {**os.environ, "PYTHONPATH": str(tree), "MPLBACKEND": "Agg"}
    out.mkdir(parents=True, exist_ok=True)
    tic = time.perf_counter()
    with (out / f"{name}.log").open("w") as log:
        code = subprocess.call(
            [*cmd, *extra, "--out", str(out / name)], cwd=tree, env=env, stdout=log, stderr=log
        )
    return f"exit {code}, {time.perf_counter() - tic:.0f} s"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--against", type=Path, required=True, help="the other tree (a checkout)")
    p.add_argument("--out", type=Path, required=True, help="folder of both trees' outputs")
    p.add_argument("--names", nargs="+", choices=NAMES, default=list(NAMES))
    p.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--cifar-dir", type=Path, help="CIFAR-10's python pickles (cifar-resnet)")
    p.add_argument("--compare-only", action="store_true", help="compare what --out holds")
    p.add_argument("--show", type=int, default=8, help="differing values listed per reproduction")
    args = p.parse_args(argv)
    this, other = args.out / "this", args.out / "other"
    differ = 0
    for name in args.names:
        if not args.compare_only:
            for label, tree, out in (("this", ROOT, this), ("other", args.against, other)):
                print(f"{name} ({label}): {run(tree.resolve(), out, name, args)}", flush=True)
        verdict, found = compare(this, other, name)
        rels = [r for *_, r in found if not math.isnan(r)]
        most = f", largest relative difference {max(rels):.2g}" if rels else ""
        print(f"== {name}: {verdict} ({len(found)} values differ{most})")
        for path, what, _ in found[: args.show]:
            print(f"   {path}: {what[:160]}")
        differ += verdict == "DIFFERENT"
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
