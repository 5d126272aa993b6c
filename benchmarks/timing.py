"""The timing harness every benchmark uses: interleaved rounds, medians, paired ratios, one run.

A shared machine speeds up and slows down while a benchmark runs. Timing one variant after the
other lets that drift into their ratio, so every benchmark here times its variants **in rounds**:
each round runs every variant once, in an order that rotates by one from round to round
(:func:`interleave`). Reported are the median over rounds of each variant's time, and the median
over rounds of its ratio to a reference **in the same round** (:func:`paired`), with the range of
those per-round ratios as the spread.

To compare two source trees of the library (a change against the commit before it),
:class:`Worker` runs a benchmark in a child process whose ``PYTHONPATH`` is one tree, and
:func:`alternate` asks the workers for one round each in turn (the same rotation), so that both
trees meet the same load; :func:`serve` is the worker's side. Each worker compiles once.

Example:
  >>> times = {"new": [1.1, 2.2, 1.05], "old": [1.0, 2.0, 1.0]}
  >>> paired(times["new"], times["old"])
  Spread(median=1.1, low=1.05, high=1.1)
  >>> rotated(["a", "b", "c"], 4)
  ['b', 'c', 'a']
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

PROTOCOL = "@@timing "
"""Prefix of the worker's reply lines on stdout (anything else it prints is passed through)."""


class Spread(NamedTuple):
    """The median of some values and their range (``low``, ``high``)."""

    median: float
    low: float
    high: float


def spread(values: Iterable[float]) -> Spread:
    """Median, minimum and maximum of ``values``.

    Example:
      >>> spread([3.0, 1.0, 2.0])
      Spread(median=2.0, low=1.0, high=3.0)
    """
    values = list(values)
    if not values:
        raise ValueError("no values")
    return Spread(statistics.median(values), min(values), max(values))


def paired(times: Sequence[float], reference: Sequence[float]) -> Spread:
    """The ratios ``times[r] / reference[r]`` of the same rounds r: median and range."""
    if len(times) != len(reference):
        raise ValueError(f"{len(times)} rounds against {len(reference)}")
    return spread(a / b for a, b in zip(times, reference, strict=True))


@dataclass
class Candidate:
    """One thing a benchmark times: ``run()`` does ``steps`` steps and blocks until they are done.

    ``finite()`` says whether its chain is still finite; ``times`` collects the seconds of each
    round's call (:func:`interleave`).
    """

    name: str
    run: Callable[[], Any]
    steps: int
    group: str = ""
    metric: str | None = None
    corrected: bool = False
    finite: Callable[[], bool] = lambda: True
    compile_s: float = float("nan")
    times: list[float] = field(default_factory=list)

    @property
    def step_s(self) -> float:
        """The median over rounds of the seconds per step."""
        return statistics.median(self.times) / self.steps

    @property
    def rates(self) -> Spread:
        """Steps per second: the median over rounds and the range."""
        return spread(self.steps / t for t in self.times)


def rotated(items: Sequence[Any], shift: int) -> list[Any]:
    """``items`` rotated left by ``shift`` (modulo their number): the order of round ``shift``."""
    items = list(items)
    if not items:
        return items
    k = shift % len(items)
    return items[k:] + items[:k]


def interleave(
    candidates: Mapping[str, Callable[[], Any]],
    rounds: int,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Call every candidate once per round, the order rotating; seconds of each call.

    A candidate blocks until its work is done (``jax.block_until_ready`` inside it).

    Args:
      candidates: name -> a function of no arguments that runs one timed unit of work.
      rounds: how many rounds.
      clock: the clock (seconds).

    Returns:
      name -> the seconds of its call in each round, in round order.

    Example:
      >>> ticks = iter(range(100))
      >>> interleave({"a": lambda: None, "b": lambda: None}, 2, clock=lambda: next(ticks))
      {'a': [1, 1], 'b': [1, 1]}
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for r in range(rounds):
        for name in rotated(list(candidates), r):
            start = clock()
            candidates[name]()
            times[name].append(clock() - start)
    return times


def fmt_ratio(x: float | None) -> str:
    """``1.23x``, or empty for a ratio that does not exist."""
    return "" if x is None or x != x else f"{x:.2f}x"


def fmt_spread(s: Spread, digits: int = 3) -> str:
    """``median [low-high]`` of a ratio."""
    return f"{s.median:.{digits}f} [{s.low:.{digits}f}-{s.high:.{digits}f}]"


def table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned plain-text columns: the first left-aligned, the others right-aligned.

    Example:
      >>> print(table(["name", "ms"], [["a", "1.0"], ["bb", "10.0"]]))
      name    ms
      a      1.0
      bb    10.0
    """
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]

    def line(cells):
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(head), *(line(r) for r in rows)])


def environment() -> str:
    """The command line and the machine, as every benchmark prints them first."""
    import jax

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    return "\n".join(
        [
            "command: " + " ".join([os.path.relpath(sys.executable), *sys.argv]),
            f"python {platform.python_version()}, jax {jax.__version__}, "
            f"devices {jax.devices()}, os.cpu_count() {os.cpu_count()}, usable cores {cores}",
            f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}",
        ]
    )


# --------------------------------------------------------------------------------------------------
# Two source trees in alternation


def serve(ready: Mapping[str, Any], handle: Callable[[Mapping[str, Any]], Mapping[str, Any]]):
    """The worker's side: announce ``ready``, then answer each request line with ``handle``.

    Requests and replies are JSON objects, one a line; a reply line starts with :data:`PROTOCOL`.
    The loop ends at end of input or at the request ``{"quit": true}``.
    """
    print(PROTOCOL + json.dumps(ready), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("quit"):
            return
        print(PROTOCOL + json.dumps(handle(request)), flush=True)


class Worker:
    """A benchmark in a child process that imports the library from one source tree.

    Args:
      tree: the tree's root (the folder holding the ``sgrld`` package), put first on
        ``PYTHONPATH``, so that it wins over the installed package.
      argv: the command (``[python, script, ...]``); it must call :func:`serve`.
    """

    def __init__(self, tree: Path, argv: Sequence[str]):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
        self.tree = tree
        self.process = subprocess.Popen(
            list(argv), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.ready = self._reply()

    def _reply(self) -> dict[str, Any]:
        for line in self.process.stdout:
            if line.startswith(PROTOCOL):
                return json.loads(line[len(PROTOCOL) :])
            sys.stdout.write(line)
        raise RuntimeError(f"the worker for {self.tree} ended (exit {self.process.wait()})")

    def request(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its reply."""
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        return self._reply()

    def close(self) -> None:
        """Ask the worker to quit and wait for it."""
        if self.process.poll() is None:
            self.process.stdin.write(json.dumps({"quit": True}) + "\n")
            self.process.stdin.close()
            self.process.wait()


def alternate(workers: Mapping[str, Worker], rounds: int) -> dict[str, list[dict[str, Any]]]:
    """Ask each worker for round r in turn, the order of the workers rotating with r.

    Returns:
      worker name -> its replies, in round order.
    """
    replies: dict[str, list[dict[str, Any]]] = {name: [] for name in workers}
    for r in range(rounds):
        for name in rotated(list(workers), r):
            replies[name].append(workers[name].request({"round": r}))
    return replies
