"""What a reproduction prints after each run and what its command returns: its runs' progress
lines and exit codes, written once for all reproductions.

A reproduction keeps its runs in its results either as :class:`sgrld_app.api.Result` objects
(:func:`worst_run_exit_code`, :func:`last_run_message`) or as JSON-ready dicts with a
``"status"`` and ``"seconds"`` (:func:`record_run`, :func:`exit_code_of`, :func:`run_progress`,
:func:`progress_line`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sgrld_app import api as app
from sgrld_reproductions.scaffolding.driver import OnResult, Results


def worst_run_exit_code(results: Results) -> int:
    """The largest exit code (:data:`sgrld_app.api.EXIT_CODES`) of the
    :class:`sgrld_app.api.Result` objects in ``results["runs"]``, 0 without any."""
    return max([0] + [app.EXIT_CODES[r.status] for r in results["runs"]])


def last_run_message(results: Results) -> str | None:
    """The ``progress`` of a reproduction that keeps its runs as :class:`sgrld_app.api.Result`
    objects in ``results["runs"]``: the last one's message if it did not complete (None: nothing
    to print).

    Example:
      >>> from types import SimpleNamespace
      >>> run = SimpleNamespace(status="diverged", message="diverged at step 7")  # a Result's
      >>> last_run_message({"runs": [run]}), last_run_message({"runs": []})
      ('diverged at step 7', None)
    """
    last = results["runs"][-1] if results["runs"] else None
    return None if last is None or last.status == "completed" else last.message


def record_run(results: Results, run: dict[str, Any], on_result: OnResult) -> bool:
    """Append a run kept as a JSON-ready dict with a ``"status"`` to ``results["runs"]`` and call
    ``on_result``; return whether the run was interrupted (the computation then stops).

    Example:
      >>> from sgrld_reproductions.scaffolding.driver import ignore
      >>> results = {"runs": []}
      >>> record_run(results, {"status": "interrupted"}, ignore), results
      (True, {'runs': [{'status': 'interrupted'}]})
    """
    results["runs"].append(run)
    on_result(results)
    return run["status"] == "interrupted"


def exit_code_of(runs: Iterable[Mapping[str, Any]], failed: bool) -> int:
    """The exit code of runs (or table rows) kept as JSON-ready dicts with a ``"status"``: 130
    (:data:`sgrld_app.api.EXIT_CODES`' ``"interrupted"``) if one was interrupted, else 1 if
    ``failed`` (what failure means is the reproduction's), else 0.

    Example:
      >>> runs = [{"status": "completed"}, {"status": "interrupted"}]
      >>> exit_code_of(runs, failed=False), exit_code_of([], failed=True)
      (130, 1)
    """
    if any(r["status"] == "interrupted" for r in runs):
        return app.EXIT_CODES["interrupted"]
    return int(failed)


def run_status(run: Mapping[str, Any]) -> str:
    """How a run ended, at the end of a progress line: ``(<status>, <seconds> s)``.

    Example:
      >>> run_status({"status": "diverged", "seconds": 12.6})
      '(diverged, 13 s)'
    """
    return f"({run['status']}, {run['seconds']:.0f} s)"


def progress_line(head: str, scores: Sequence[str], run: Mapping[str, Any], sep: str = ", ") -> str:
    """A run's progress line: ``<head>: <scores joined by sep> (<status>, <seconds> s)``, with
    ``no scores`` in place of none.

    Args:
      head: what was run (method, learning rate, data, ...).
      scores: its scores, each already written (``"val NLL 0.2100"``).
      run: its JSON-ready dict, with ``"status"`` and ``"seconds"`` (:func:`run_status`).
      sep: between two scores.

    Returns:
      The line.

    Example:
      >>> run = {"status": "completed", "seconds": 3.2}
      >>> progress_line("SGLD lr=0.1", ["val NLL 0.2000", "test NLL 0.2100"], run)
      'SGLD lr=0.1: val NLL 0.2000, test NLL 0.2100 (completed, 3 s)'
      >>> progress_line("SGLD lr=1", [], run | {"status": "diverged"})
      'SGLD lr=1: no scores (diverged, 3 s)'
    """
    return f"{head}: {sep.join(scores) or 'no scores'} {run_status(run)}"


def run_progress(
    head: Callable[[Mapping[str, Any]], str], scores: Mapping[str, str]
) -> Callable[[Results], str]:
    """The ``progress`` of a reproduction that keeps its runs as JSON-ready dicts in
    ``results["runs"]`` (:func:`record_run`): the last run's :func:`progress_line`, its scores
    ``<label> <value>`` with each value by :func:`sgrld_app.api.format_value`.

    Args:
      head: a run -> what was run.
      scores: label -> the run's key of that score.

    Returns:
      ``results -> str``.

    Example:
      >>> progress = run_progress(lambda r: r["method"], {"val NLL": "val_nll", "test NLL": "nll"})
      >>> run = {"method": "SGLD", "val_nll": 0.2, "nll": None, "status": "completed", "seconds": 3}
      >>> progress({"runs": [run]})
      'SGLD: val NLL 0.2000, test NLL — (completed, 3 s)'
    """

    def progress(results: Results) -> str:
        run = results["runs"][-1]
        values = [f"{label} {app.format_value(run[key])}" for label, key in scores.items()]
        return progress_line(head(run), values, run)

    return progress
