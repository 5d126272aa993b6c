"""The skeleton every ``sgrld reproduce NAME`` shares: its options, its run, its table and files.

A reproduction is described by a :class:`Reproduction`: how its options become a run
(``options``, ``header``, ``compute``), what it prints after each row (``progress``), its table
(``rows``, ``columns``, ``caption``, ``notes``) and its figure (``plot``). The driver
(:meth:`Reproduction.add_arguments`, :meth:`Reproduction.run`) does the rest the same way for all:

* options: ``--quick``, the reproduction's own options, ``--seed`` and ``--out``;
* run: print the header; compute, and after each row print its progress line and write
  ``<stem>.md`` and ``<stem>.json`` (so an interrupted run leaves what it has);
* end: write the tables, draw the figure, print the table with ``rich`` and the files written.

The results are a dict with a ``"config"`` entry (what was run, written to the JSON as is) and
whatever else the reproduction keeps; ``rows(results)`` makes its JSON-ready table rows, written to
the JSON under ``rows_key``.

To add a reproduction: a package that defines the parts under the names of :data:`MODULE_NAMES`
(``COLUMNS``, ``NOTES``, ``caption``, ``table_rows``, ``options``, ``header``, ``compute``,
``progress``, and ``plot`` or ``exit_code`` where it has them), ends with
``REPRODUCTION = Reproduction.from_module(globals(), summary=..., quick_help=..., ...)``, and names
that object in the ``sgrld.reproductions`` entry-point group of its ``pyproject.toml``
(``docs/reproductions/index.md``).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

import sgrld
from sgrld_app import api as app
from sgrld_reproductions.scaffolding.options import resume_option

Results = dict[str, Any]
OnResult = Callable[[Results], None]

MODULE_NAMES = {
    "columns": "COLUMNS",
    "notes": "NOTES",
    "caption": "caption",
    "rows": "table_rows",
    "options": "options",
    "header": "header",
    "compute": "compute",
    "progress": "progress",
    "plot": "plot",
    "exit_code": "exit_code",
}
"""Field of :class:`Reproduction` -> the name of that part in a reproduction's module."""


def ignore(results: Results) -> None:
    """The default ``on_result`` of a computation: nothing to do after a row."""


def stored_rows(results: Results) -> list[dict[str, Any]]:
    """The default ``rows``: the rows the computation stored as ``results["rows"]``."""
    return results["rows"]


def quick_note(args: argparse.Namespace) -> str:
    """The end of a header with ``--quick``: ``" (--quick: a smoke test, not a reproduction)"``.

    Example:
      >>> quick_note(argparse.Namespace(quick=True)), quick_note(argparse.Namespace(quick=False))
      (' (--quick: a smoke test, not a reproduction)', '')
    """
    return " (--quick: a smoke test, not a reproduction)" if args.quick else ""


def paper_caption(results: Results) -> str:
    """The caption of a table of ours beside the paper's: the run's title
    (``results["config"]["title"]``) and a note that the paper's columns are marked (paper).

    Example:
      >>> paper_caption({"config": {"title": "Toy run"}})
      "Toy run. Ours beside the paper's (paper)."
    """
    return f"{results['config']['title']}. Ours beside the paper's (paper)."


@dataclass(frozen=True, kw_only=True)
class Reproduction:
    """How one reproduction runs and reports.

    Attributes:
      summary: one line, the help of ``sgrld reproduce NAME``.
      stem: the files' name: ``<stem>.md``, ``<stem>.json`` in ``--out`` (:meth:`from_module`:
        the module's own name, e.g. ``isgd_mnist``).
      options: adds the reproduction's own options to a parser.
      quick_help: help of ``--quick``.
      seed: the default random seed.
      out: the default results folder (:meth:`from_module`: ``results/<stem with hyphens>``,
        e.g. ``results/isgd-mnist``).
      header: ``args -> str``, printed before the run.
      compute: ``(args, on_result) -> results``; calls ``on_result(results)`` after each row.
      progress: ``results -> str | None``, printed after each row (None: nothing).
      plot: ``(results, out) -> path(s)`` of the figure(s) it draws, or None.
      rows_key: key of the rows in the JSON, next to ``"config"``.
      columns: the table's columns (:func:`sgrld_app.api.columns`).
      rows: ``results -> rows``, one JSON-ready dict per row (the table and the JSON); default
        :func:`stored_rows`.
      caption: ``results -> str``, one line describing the run, above the table; default
        :func:`paper_caption`.
      notes: what the columns mean, below the Markdown table.
      exit_code: ``results -> int``, the command's exit code.
      resumable: its runs write checkpoints into folders under ``--out``, and it takes
        ``--resume`` (:func:`~sgrld_reproductions.scaffolding.options.resume_option`) to continue
        them.
    """

    summary: str
    stem: str
    options: Callable[[argparse.ArgumentParser], None]
    quick_help: str
    seed: int = 0
    out: str
    header: Callable[[argparse.Namespace], str]
    compute: Callable[[argparse.Namespace, OnResult], Results]
    progress: Callable[[Results], str | None]
    plot: Callable[[Results, Path], Path | Sequence[Path]] | None = None
    rows_key: str = "rows"
    columns: Sequence[app.Column]
    rows: Callable[[Results], list[dict[str, Any]]] = stored_rows
    caption: Callable[[Results], str] = paper_caption
    notes: str
    exit_code: Callable[[Results], int] = lambda results: 0
    resumable: bool = False

    @classmethod
    def from_module(cls, namespace: Mapping[str, Any], **settings: Any) -> Reproduction:
        """The reproduction whose parts a module defines under :data:`MODULE_NAMES`, its ``stem``
        and ``out`` by default named after the module (``...isgd_mnist``: ``isgd_mnist``,
        ``results/isgd-mnist``).

        Args:
          namespace: the module's ``globals()``.
          **settings: the other fields (``summary``, ``quick_help``, ...).

        Example:
          >>> parts = dict(
          ...     COLUMNS=app.columns("x  x  {:d}"), NOTES="", caption=lambda r: "toy",
          ...     table_rows=lambda r: [{"x": 1}], options=lambda p: None, header=lambda a: "",
          ...     compute=lambda a, on_result: {"config": {}}, progress=lambda r: None)
          >>> toy = Reproduction.from_module(
          ...     parts, summary="a toy", stem="toy", quick_help="", out="results/toy")
          >>> print(toy.markdown({"config": {}}), end="")
          toy
          <BLANKLINE>
          | x |
          |---|
          | 1 |
        """
        parts = {
            field: namespace[name] for field, name in MODULE_NAMES.items() if name in namespace
        }
        stem = str(namespace.get("__name__", "")).rpartition(".")[2]
        named = {"stem": stem, "out": f"results/{stem.replace('_', '-')}"} if stem else {}
        return cls(**parts, **(named | settings))

    def markdown(self, results: Results) -> str:
        """The table as Markdown, with its caption and notes."""
        return app.markdown_table(
            self.caption(results), self.columns, self.rows(results), self.notes
        )

    def write_tables(self, results: Results, out: Path) -> tuple[Path, Path]:
        """Write ``<stem>.md`` and ``<stem>.json`` into ``out``; return their paths."""
        payload = {"config": results["config"], self.rows_key: self.rows(results)}
        return app.write_tables(out, self.stem, self.markdown(results), payload)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add ``--quick``, the reproduction's options, ``--seed``, ``--out`` and, if it is
        ``resumable``, ``--resume`` to ``parser``."""
        parser.add_argument("--quick", action="store_true", help=self.quick_help)
        self.options(parser)
        if self.resumable:
            resume_option(parser)
        parser.add_argument(
            "--seed", type=int, default=self.seed, help="random seed (default: %(default)s)"
        )
        parser.add_argument("--out", default=self.out, help="results folder (default: %(default)s)")

    def run(self, args: argparse.Namespace) -> int:
        """Run from parsed arguments: compute, print, write the files; return the exit code."""
        con = app.console()
        out = Path(args.out)

        def on_result(results: Results) -> None:
            line = self.progress(results)
            if line is not None:
                con.print(line)
            self.write_tables(results, out)

        con.print(self.header(args))
        if self.resumable and args.resume and out.is_dir():
            con.print(f"--resume: each run in {out} goes on from its newest checkpoint")
        elif self.resumable and args.resume:
            con.print(f"--resume: {out} does not exist yet, so every run starts from the beginning")
        results = self.compute(args, on_result)
        files = list(self.write_tables(results, out))
        if self.plot is not None:
            figures = self.plot(results, out)
            files[:0] = [figures] if isinstance(figures, Path) else figures
        app.print_table(self.caption(results), self.columns, self.rows(results))
        con.print(f"Wrote {', '.join(map(str, files[:-1]))} and {files[-1]}")
        return self.exit_code(results)


def equal_time_epochs(seconds_per_epoch: float, budget: float, epochs: int) -> int:
    """Epochs of a run that fit in ``budget`` seconds of sampling (at most ``epochs``): Yu et al.'s
    equal time budget (App. A.6), a run taking ``seconds_per_epoch`` per epoch.

    Example:
        >>> equal_time_epochs(11.4, 400 * 7.5, 400)  # Shampoo within Wenzel's 400 epochs
        263
    """
    if not seconds_per_epoch > 0:
        return epochs
    return min(epochs, math.floor(budget / seconds_per_epoch + 1e-9))


def sample_timed(
    key: jax.Array, sampler: sgrld.Sampler, init_params: Any, batch_fn: Callable, **options: Any
) -> tuple[sgrld.Samples, float]:
    """:func:`sgrld.sample`, keeping the samples taken before a divergence, and its wall time.

    Args:
      key, sampler, init_params, batch_fn, **options: as :func:`sgrld.sample`.

    Returns:
      ``(samples, seconds)``: the samples (of a :class:`sgrld.DivergenceError` if one was
      raised) and the wall time of the sampling, compilation included.
    """
    start = time.perf_counter()
    try:
        out = sgrld.sample(key, sampler, init_params, batch_fn, **options)
    except sgrld.DivergenceError as error:
        out = error.samples
    jax.block_until_ready(out.params)
    return out, time.perf_counter() - start
