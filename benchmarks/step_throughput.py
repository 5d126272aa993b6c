"""Steady-state steps/s of one SGRLD step on a 784-400-400-10 MLP (478,410 parameters), per metric.

Candidates (each compiled and warmed up first; compile time is reported separately):

* ``floor``: ``jax.value_and_grad(potential)`` plus one ``jax.random.normal(key, (478410,))``, both
  returned; the least work any SGLD step must do.
* ``grad step``: the noiseless ``params - lr * grad`` (state threaded), for reference.
* ``SGLD by hand``: ``params - lr * grad + sqrt(2 lr / N) * noise`` per leaf (state threaded), for
  reference: the identity step without the library's diagnostics.
* one ``sgrld.sgrld`` step per metric, uncorrected, and one with ``correction="hutchinson"`` per
  adaptive metric, each in a Python loop over the jitted step;
* the same steps run ``--chunk`` at a time inside one jitted ``jax.lax.scan`` (how ``sgrld.sample``
  and the runner sample), for the metrics ``--scan`` selects;
* eager PyTorch SGLD and pSGLD steps of the same model, if ``import torch`` works
  (``torch_reference.py``).

Timing (``timing.py``): R interleaved rounds; in each round every candidate runs one chunk of
steps, the order rotating from round to round; the state is carried across chunks and rounds.
Reported: the median over rounds of steps/s and ratios of median times per step.

``--against TREE`` compares the library of this checkout with the one in ``TREE`` (another checkout
of the repository, e.g. ``git worktree add /tmp/base COMMIT``): two worker processes, each with one
tree first on ``PYTHONPATH``, time the same candidates (the library's steps and the floor as a
control), one round each in turn; printed per candidate are both medians and the ratio this / TREE
paired by round, with its range over rounds.

Usage::

    python benchmarks/step_throughput.py                  # full run (7 rounds of 200 steps)
    python benchmarks/step_throughput.py --quick          # smoke run
    python benchmarks/step_throughput.py --metrics identity shampoo --no-torch --rounds 5
    python benchmarks/step_throughput.py --against /tmp/base --rounds 9 --chunk 100
    python benchmarks/step_throughput.py --scan only --no-torch --json steps.json   # scan rows only

``--json PATH`` writes every candidate's seconds per round (``benchmarks/gpu/run.py`` reads it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import mlp
import numpy as np
import torch_reference
from timing import (
    Candidate,
    Worker,
    alternate,
    environment,
    fmt_ratio,
    fmt_spread,
    interleave,
    paired,
    rotated,
    serve,
    spread,
    table,
)

import sgrld

HERE = Path(__file__).resolve().parent


def scanned(args, metric: str, corrected: bool) -> bool:
    """Whether ``--scan`` asks for the scan row of this step."""
    return (
        args.scan in ("all", "only")
        or (args.scan == "uncorrected" and not corrected)
        or (args.scan == "some" and not corrected and metric in ("identity", "shampoo"))
    )


def variants(args) -> list[tuple[str, bool]]:
    """The library steps to time: ``(metric, corrected)``."""
    plain = [(m, False) for m in args.metrics]
    if args.no_hutchinson:
        return plain
    return plain + [(m, True) for m in args.metrics if m in mlp.ADAPTIVE]


def library_candidates(args, params, batch, potential) -> list[Candidate]:
    """The library's steps that ``args`` asks for."""
    scan = lambda m, c: scanned(args, m, c)
    loop = args.scan != "only"
    return mlp.library_candidates(
        params, batch, potential, variants(args), args.chunk, scan, loop, args.compile_workers
    )


# --------------------------------------------------------------------------------------------------
# Reporting


def print_table(cands: list[Candidate]) -> None:
    """One row per candidate: steps/s, range, ms/step, ratios to floor, Identity, uncorrected."""
    by = {(c.group, c.metric, c.corrected): c for c in cands if c.metric}
    floor = next(c for c in cands if c.group == "floor")
    rows = []
    for c in cands:
        ident = by.get(("scan" if c.group == "scan" else "loop", "identity", False))
        plain = by.get((c.group, c.metric, False)) if c.corrected else None
        rows.append(
            [
                c.name,
                f"{c.rates.median:.1f}",
                f"{c.rates.low:.1f}-{c.rates.high:.1f}",
                f"{1e3 * c.step_s:.2f}",
                fmt_ratio(c.step_s / floor.step_s),
                fmt_ratio(c.step_s / ident.step_s if ident else None),
                fmt_ratio(c.step_s / plain.step_s if plain else None),
                f"{c.compile_s:.2f}",
                "yes" if c.finite() else "NO",
            ]
        )
    head = ["candidate", "steps/s", "range", "ms/step", "/floor", "/Identity", "/uncorr."]
    print(table([*head, "compile s", "finite"], rows))
    print(
        "steps/s: median over rounds; range: min-max over rounds; ratios: median time per step "
        "of this row / that of the reference (floor / Identity of the same kind, loop or scan / "
        "the same metric uncorrected); compile s: first call incl. tracing and compilation "
        "(torch: first eager step)."
    )


def target_lines(cands: list[Candidate], group: str) -> list[str]:
    """The step-cost targets of issues 2 and 3 for the loop or the scan rows."""
    by = {(c.group, c.metric, c.corrected): c for c in cands if c.metric}
    floor = next(c for c in cands if c.group == "floor")
    ident = by.get((group, "identity", False))
    tag = "Python loop" if group == "loop" else "scan"
    checks = []
    if ident and group == "loop":
        checks.append((f"Identity / floor ({tag})", ident.step_s / floor.step_s, 1.15))
    for m in mlp.ADAPTIVE:
        plain, corrected = by.get((group, m, False)), by.get((group, m, True))
        if plain and ident:
            limit = 1.6 if m == "shampoo" else 1.15
            checks.append(
                (f"{mlp.LABELS[m]} / Identity ({tag})", plain.step_s / ident.step_s, limit)
            )
        if plain and corrected:
            desc = f"{mlp.LABELS[m]} + Hutchinson / {mlp.LABELS[m]} ({tag})"
            checks.append((desc, corrected.step_s / plain.step_s, 2.5))
    lines = [
        f"  [{'PASS' if r <= limit else 'MISS'}] {desc}: {r:.2f}x (target <= {limit}x)"
        for desc, r, limit in checks
    ]
    torch_sgld = by.get(("torch", "identity", False))
    if torch_sgld and ident:
        r = torch_sgld.step_s / ident.step_s
        lines.append(
            f"  [{'PASS' if r >= 1.5 else 'MISS'}] Identity ({tag}) steps/s / torch SGLD "
            f"steps/s: {r:.2f}x (target >= 1.5x)"
        )
    for c in cands:
        ref = by.get((group, c.metric, False))
        if ref and c.group in ("torch", "torch1") and c is not torch_sgld:
            lines.append(
                f"  [info] {ref.name} steps/s / {c.name} steps/s: {c.step_s / ref.step_s:.2f}x"
            )
    return lines


def print_targets(cands: list[Candidate]) -> None:
    lines = target_lines(cands, "loop") + target_lines(cands, "scan")
    print("Targets:")
    print("\n".join(lines) if lines else "  (none measurable with the selected candidates)")


def write_json(path: Path, cands: list[Candidate]) -> None:
    """Every candidate's name, kind, steps per call, seconds per round and compile seconds."""
    keys = ("name", "group", "metric", "corrected", "steps", "times", "compile_s")
    rows = [{k: getattr(c, k) for k in keys} | {"finite": c.finite()} for c in cands]
    path.write_text(json.dumps({"candidates": rows}, indent=1))


# --------------------------------------------------------------------------------------------------
# This tree against another


def tree_name(tree: Path) -> str:
    """``PATH (commit)``, with ``+ changes`` if the tree has uncommitted changes."""
    git = ["git", "-C", str(tree)]
    try:
        head = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--", "sgrld"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(tree)
    return f"{tree} ({head}{' + changes' if dirty else ''})"


def worker(args) -> None:
    """The worker of ``--against``: the floor and the library's steps, one round per request."""
    params, batch, potential = mlp.problem()
    cands = [mlp.floor_candidate(params, batch, potential, args.chunk)]
    cands += library_candidates(args, params, batch, potential)
    by_name = {c.name: c for c in cands}

    def one_round(request):
        times = interleave({c.name: c.run for c in rotated(cands, request["round"])}, 1)
        return {
            "seconds": {k: v[0] for k, v in times.items()},
            "finite": {c.name: c.finite() for c in cands},
        }

    ready = {
        "sgrld": sgrld.__file__,
        "names": list(by_name),
        "steps": {c.name: c.steps for c in cands},
    }
    serve(ready, one_round)


def against(args, argv: list[str]) -> int:
    """Time this tree and ``args.against`` in alternating rounds; print medians, paired ratios."""
    trees = {"this": HERE.parent, "other": Path(args.against).resolve()}
    command = [sys.executable, str(Path(__file__).resolve()), *argv, "--worker"]
    workers = {}
    try:
        for name, tree in trees.items():  # one after the other: compile without contention
            t0 = time.perf_counter()
            workers[name] = Worker(tree, command)
            print(
                f"{name}: {tree_name(tree)}, sgrld from {workers[name].ready['sgrld']}, "
                f"compiled in {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
        t0 = time.perf_counter()
        replies = alternate(workers, args.rounds)
        print(f"timing: {time.perf_counter() - t0:.0f} s ({args.rounds} rounds per tree)\n")
    finally:
        for w in workers.values():
            w.close()
    ready = workers["this"].ready
    seconds = {
        name: {c: [r["seconds"][c] for r in replies[name]] for c in ready["names"]}
        for name in trees
    }
    misses = report_against(args, ready, seconds, replies)
    return 1 if misses else 0


def report_against(args, ready, seconds, replies) -> int:
    """The table of ``--against``; returns how many candidates miss the tolerance."""
    rows, misses = [], 0
    for c in ready["names"]:
        per_step = {name: [t / ready["steps"][c] for t in seconds[name][c]] for name in seconds}
        ratio = paired(per_step["this"], per_step["other"])
        ok = abs(ratio.median - 1.0) <= args.tolerance
        finite = all(replies[n][-1]["finite"][c] for n in replies)
        misses += not ok
        rows.append(
            [
                c,
                f"{1e3 * spread(per_step['other']).median:.3f}",
                f"{1e3 * spread(per_step['this']).median:.3f}",
                fmt_spread(ratio),
                "yes" if ok else "NO",
                "yes" if finite else "NO",
            ]
        )
    head = ["candidate", "other ms/step", "this ms/step", "this/other [range]", "within", "finite"]
    print(table(head, rows))
    print(
        f"ms/step: median over rounds; this/other: median over rounds of the ratio of the two "
        f"trees' times in the same round, [min-max over rounds]; within: |ratio - 1| <= "
        f"{args.tolerance:g}. The floor runs the same code in both trees: its ratio is the noise."
    )
    return misses


# --------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--rounds", type=int, default=7, help="interleaved timing rounds")
    add("--chunk", type=int, default=200, help="steps per candidate per round")
    add("--quick", action="store_true", help="smoke run: 2 rounds of 50 steps, no scan rows")
    add(
        "--metrics",
        nargs="+",
        choices=mlp.METRICS,
        default=None,
        help="metrics to time (default: all; with --quick: identity shampoo)",
    )
    add("--no-torch", action="store_true", help="skip the PyTorch comparison")
    add(
        "--torch-chunk",
        type=int,
        default=None,
        help="steps per chunk of the default-thread torch steps (default: chunk/10; they can be "
        "very slow: OpenMP spin-waiting on 2 shared cores)",
    )
    add(
        "--no-torch-one-thread",
        dest="torch_one_thread",
        action="store_false",
        help="skip the extra torch rows with torch.set_num_threads(1)",
    )
    add("--no-hutchinson", action="store_true", help="skip the corrected steps")
    add(
        "--scan",
        choices=("none", "some", "uncorrected", "all", "only"),
        default=None,
        help="which steps also run as one jitted lax.scan per chunk (default: some, identity and "
        "shampoo; with --against: all; only: every step in a scan and none in a Python loop)",
    )
    add("--json", type=Path, help="write every candidate's times per round here (JSON)")
    add("--compile-workers", type=int, default=1, help="scan rows compiled at a time (threads)")
    add("--against", metavar="TREE", help="compare with the library in this checkout")
    add("--tolerance", type=float, default=0.03, help="--against: the allowed |ratio - 1|")
    add("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.chunk, args.scan = 2, 50, args.scan or "none"
        args.metrics = args.metrics or ["identity", "shampoo"]
    args.metrics = args.metrics or list(mlp.METRICS)
    args.scan = args.scan or ("all" if args.against or args.worker else "some")
    args.torch_chunk = args.torch_chunk or max(1, args.chunk // 10)
    if args.rounds < 1 or args.chunk < 1:
        parser.error("--rounds and --chunk must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    print(environment())
    print(
        f"model 784-400-400-10 ReLU MLP ({mlp.NUM_PARAMS:,} params), batch {mlp.BATCH}, "
        f"N {mlp.NUM_DATA:,}; {args.rounds} rounds x {args.chunk} steps per candidate"
    )
    if "shampoo" in args.metrics and args.chunk % mlp.SHAMPOO_EVERY:
        print(
            "note: chunk is not a multiple of Shampoo's update_every=100: the root refreshes "
            "fall unevenly across chunks"
        )
    if args.against:
        return against(args, [a for a in argv if a != "--worker"])
    return here(args)


def here(args) -> int:
    """Time every candidate in this process and print the table and the targets."""
    params, batch, potential = mlp.problem()
    t0 = time.perf_counter()
    cands = mlp.reference_candidates(params, batch, potential, args.chunk)
    cands += library_candidates(args, params, batch, potential)
    if args.no_torch:
        print("torch: skipped (--no-torch)")
    else:
        numpy_batch = tuple(np.asarray(a) for a in batch)
        extra, version = torch_reference.candidates(
            numpy_batch, args.chunk, args.torch_chunk, args.torch_one_thread
        )
        print(f"torch {version}" if version else f"torch: not installed; {torch_reference.HINT}")
        cands += extra
    print(f"compile/warm-up of {len(cands)} candidates: {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    times = interleave({c.name: c.run for c in cands}, args.rounds)
    for c in cands:
        c.times = times[c.name]
    print(f"timing: {time.perf_counter() - t0:.1f} s\n")
    print_table(cands)
    print()
    print_targets(cands)
    if args.json:
        write_json(args.json, cands)
    bad = [c.name for c in cands if not c.finite()]
    if bad:
        print("NON-FINITE chains (see benchmarks/RESULTS.md):", ", ".join(bad))
    return 0


if __name__ == "__main__":
    sys.exit(main())
