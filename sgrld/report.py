"""Reports of runs and reproductions: one table renderer (rich to print, Markdown to save),
JSON next to it, the curves of Yu et al.'s Fig. 3.

A table is a list of row dicts and its columns a sequence of ``(key, title, format)``: ``key``
indexes the row, ``title`` heads the column, ``format`` is a ``str.format`` pattern; a text column
(``"{}"``) is left-aligned, every other column right-aligned. A missing value (``None``, or a
score that was not finite) prints as :data:`MISSING`.

Example:
  >>> columns = (("metric", "metric", "{}"), ("tv", "TV", "{:.3f}"))
  >>> rows = [{"metric": "Monge", "tv": 0.01234}, {"metric": "SGLD", "tv": finite(float("nan"))}]
  >>> print(markdown_table("caption", columns, rows, "notes"), end="")
  caption
  <BLANKLINE>
  | metric | TV |
  |---|---|
  | Monge | 0.012 |
  | SGLD | — |
  <BLANKLINE>
  notes
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

Column = tuple[str, str, str]
MISSING = "—"
"""How a missing value prints."""


def finite(x: float | None) -> float | None:
    """``x`` as a float, or None where it is None, NaN or infinite (JSON has no NaN)."""
    return None if x is None or not math.isfinite(x) else float(x)


def format_value(value: Any, spec: str = ".4f") -> str:
    """``format(value, spec)``, or :data:`MISSING` for a missing or NaN value.

    Example:
        >>> format_value(0.98765), format_value(None)
        ('0.9877', '—')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return format(value, spec)


def console() -> Console:
    """A rich console, 200 columns wide when the output is not a terminal (a log, a pipe)."""
    terminal = Console()
    return terminal if terminal.is_terminal else Console(width=200)


def cells(row: dict[str, Any], columns: Sequence[Column]) -> list[str]:
    """The formatted cells of one row (:data:`MISSING` for None)."""
    return [MISSING if row[k] is None else fmt.format(row[k]) for k, _, fmt in columns]


def markdown_table(
    caption: str, columns: Sequence[Column], rows: list[dict[str, Any]], notes: str = ""
) -> str:
    """The table as Markdown: its caption, the table, and the notes below it (if any)."""
    escape = lambda values: "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"
    lines = [caption, "", escape([title for _, title, _ in columns]), "|" + "---|" * len(columns)]
    lines += [escape(cells(row, columns)) for row in rows]
    return "\n".join([*lines, "", notes] if notes else lines) + "\n"


def rich_table(title: str, columns: Sequence[Column], rows: list[dict[str, Any]]) -> Table:
    """The table for ``rich`` (text columns left-aligned, the others right-aligned)."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for _, name, fmt in columns:
        table.add_column(name, justify="left" if fmt == "{}" else "right", overflow="fold")
    for row in rows:
        table.add_row(*cells(row, columns))
    return table


def print_table(title: str, columns: Sequence[Column], rows: list[dict[str, Any]]) -> None:
    """Print ``rows`` with ``rich``."""
    console().print(rich_table(title, columns, rows))


def write_tables(out: Path, stem: str, markdown: str, payload: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``out/<stem>.md`` and ``out/<stem>.json`` (strict JSON: no NaN); return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / f"{stem}.md", out / f"{stem}.json"
    md.write_text(markdown, encoding="utf-8")
    js.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return md, js


def results_table(title: str, rows: list[Mapping[str, str]]) -> tuple[Table, str]:
    """Rows of preformatted strings as a rich table (to print) and Markdown (to save).

    The first key of the first row is the text column; the others are right-aligned.

    Example:
        >>> print(results_table("t", [{"a": "1", "b": "2"}])[1], end="")
        **t**
        <BLANKLINE>
        | a | b |
        |---|---|
        | 1 | 2 |
    """
    names = list(rows[0]) if rows else []
    columns = [(name, name, "{}" if i == 0 else "{:>}") for i, name in enumerate(names)]
    rows = [dict(row) for row in rows]
    return rich_table(title, columns, rows), markdown_table(f"**{title}**", columns, rows)


def summary_row(result: Any, **first: str) -> dict[str, str]:
    """One table row of a run: its final test (and validation) scores and its timing.

    Args:
        result: the run's :class:`Result`.
        **first: the first columns, e.g. ``metric="Monge"``.

    Returns:
        Column name -> formatted value, in display order.
    """
    final = result.records[-1] if result.records else {}
    if "test_rmse" in final:
        scores = {"test RMSE": final.get("test_rmse"), "test NLL": final.get("test_nll")}
    else:
        scores = {
            "test log p(y|X)": final.get("test_log_likelihood"),
            "test acc.": final.get("test_accuracy"),
            "test ECE": final.get("test_ece"),
            "val log p(y|X)": final.get("val_log_likelihood"),
        }
    return {
        **first,
        **{name: format_value(value) for name, value in scores.items()},
        "samples": str(final.get("samples", 0)),
        "s/epoch sampling": format_value(result.summary["sampler_seconds_per_epoch"], ".2f"),
        "s/epoch scoring": format_value(result.summary["eval_seconds_per_epoch"], ".2f"),
        "compile s": format_value(result.compile_s, ".1f"),
        "status": result.status,
    }


def plot_curves(
    runs: Mapping[str, list[dict[str, Any]]], path: str | Path, title: str = ""
) -> Path:
    """Test log-likelihood and accuracy of the ensembles against epochs (Yu et al. Fig. 3).

    Args:
        runs: per label (e.g. a metric), the epoch records of a run.
        path: the PNG file to write.
        title: the figure title.

    Returns:
        ``path``. Regression runs plot the test NLL and RMSE instead.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = next((r[0] for r in runs.values() if r), {})
    panels = (
        [("test_log_likelihood", "test log p(y|X)"), ("test_accuracy", "test accuracy")]
        if "test_log_likelihood" in first
        else [("test_nll", "test NLL"), ("test_rmse", "test RMSE")]
    )
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    for ax, (key, label) in zip(axes, panels, strict=True):
        for name, records in runs.items():
            points = [
                (r["epoch"], r[key]) for r in records if math.isfinite(r.get(key) or math.nan)
            ]
            if points:
                ax.plot(
                    *zip(*points, strict=True), marker="." if len(points) < 30 else None, label=name
                )
        ax.set(xlabel="epoch", ylabel=label)
        ax.grid(alpha=0.3)
    if axes[0].lines:  # no line before the first thinned sample (e.g. a run shorter than burn-in)
        axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
