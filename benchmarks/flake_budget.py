"""The statistical tests' flake budget: every ``@pytest.mark.statistical`` test under K seeds.

Runs pytest in this process with ``SGRLD_SEED_SWEEP=K``, so that each statistical test runs once
per seed 1000, ..., 1000 + K − 1 instead of its fixed default (``tests/conftest.py``), and prints
a table: per test (each parametrised case apart), the false-failure probability its docstring
states, the failures observed out of K runs, the failing seeds, the mean seconds per run, and a
flag where

* the stated probability is over 1e-3 (such a test needs a larger budget or a better statistic);
* the observed failures are incompatible with it: that many failures or more would have a
  probability under 5% were the statement true (with a budget under 1e-3 and K = 50, a single
  failure is flagged).

A failing seed is rerun alone with ``SGRLD_SEED_SWEEP=K pytest TEST -k seed1037``.

Usage::

    python benchmarks/flake_budget.py [--seeds 50] [PYTEST_SELECTION ...]
    python benchmarks/flake_budget.py tests/reproductions/test_funnel_experiment.py

Without a selection it sweeps ``tests`` (``-m statistical`` is always added): every statistical
test, the slow ones included, which takes hours on two cores.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from scipy.stats import binom

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import SWEEP_VARIABLE, stated_budget  # noqa: E402

CEILING = 1e-3
SIGNIFICANCE = 0.05
SEED_ID = re.compile(r"^seed(\d+)$")


def split_seed(nodeid: str) -> tuple[str, int]:
    """``test_x[monge-seed1003]`` -> (``test_x[monge]``, 1003)."""
    head, _, params = nodeid.partition("[")
    kept, seed = [], -1
    for token in params.rstrip("]").split("-"):
        found = SEED_ID.match(token)
        if found:
            seed = int(found.group(1))
        else:
            kept.append(token)
    case = "-".join(t for t in kept if t)
    return (f"{head}[{case}]" if case else head), seed


class Recorder:
    """Collects each statistical case's stated budget and each run's outcome and duration."""

    def __init__(self):
        self.budget = {}
        self.failed = defaultdict(set)
        self.runs = defaultdict(set)
        self.skipped = defaultdict(set)
        self.seconds = defaultdict(float)

    def pytest_collection_modifyitems(self, items):
        for item in items:
            if item.get_closest_marker("statistical"):
                self.budget[split_seed(item.nodeid)[0]] = stated_budget(item.function)

    def pytest_runtest_logreport(self, report):
        case, seed = split_seed(report.nodeid)
        if case not in self.budget:
            return
        self.seconds[case] += report.duration
        self.runs[case].add(seed)
        if report.failed:
            self.failed[case].add(seed)
        elif report.skipped:
            self.skipped[case].add(seed)


def flag(budget: float, failures: int, runs: int) -> str:
    notes = []
    if budget > CEILING:
        notes.append(f"budget > {CEILING:g}")
    if failures:
        p = binom.sf(failures - 1, runs, budget)
        if p < SIGNIFICANCE:
            notes.append(f"INCOMPATIBLE (P = {p:.2g})")
    return "; ".join(notes)


def table(recorder: Recorder) -> str:
    lines = [
        "| test | stated budget | failures / runs | failing seeds | s per run | flag |",
        "|---|---|---|---|---|---|",
    ]
    for case in sorted(recorder.budget):
        runs = len(recorder.runs[case] - recorder.skipped[case])
        if not runs:
            continue
        failures = len(recorder.failed[case])
        seeds = ", ".join(map(str, sorted(recorder.failed[case]))) or "—"
        budget = recorder.budget[case]
        per_run = recorder.seconds[case] / len(recorder.runs[case])
        lines.append(
            f"| {case} | {budget:.2g} | {failures} / {runs} | {seeds} | {per_run:.2f} | "
            f"{flag(budget, failures, runs)} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="seeds per test (%(default)s)")
    args, selection = parser.parse_known_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    os.environ[SWEEP_VARIABLE] = str(args.seeds)
    os.chdir(ROOT)
    recorder = Recorder()
    code = pytest.main(
        ["-q", "-p", "no:randomly", "-m", "statistical", *(selection or ["tests"])],
        plugins=[recorder],
    )
    print(f"\n{args.seeds} seeds per statistical test ({SWEEP_VARIABLE}={args.seeds}):\n")
    print(table(recorder))
    return 0 if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) else int(code)


if __name__ == "__main__":
    raise SystemExit(main())
