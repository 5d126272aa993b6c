"""Tables of the reproductions: printed with ``rich``, saved as Markdown and JSON.

A table is a list of row dicts and its columns a sequence of ``(key, title, format)``: ``key``
indexes the row, ``title`` heads the column, ``format`` is a ``str.format`` pattern (``"{}"`` marks
a text column, left-aligned). A value ``None`` (a score that does not exist, or was not finite)
prints as ``–``.

Example:
  >>> columns = (("metric", "metric", "{}"), ("tv", "TV", "{:.3f}"))
  >>> rows = [{"metric": "Monge", "tv": 0.01234}, {"metric": "SGLD", "tv": finite(float("nan"))}]
  >>> print(markdown_table("caption", columns, rows, "notes"), end="")
  caption
  <BLANKLINE>
  | metric | TV |
  |---|---|
  | Monge | 0.012 |
  | SGLD | – |
  <BLANKLINE>
  notes
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from sgrld.runner import console

Column = tuple[str, str, str]


def finite(x: float | None) -> float | None:
    """``x`` as a float, or None where it is None, NaN or infinite (JSON has no NaN)."""
    return None if x is None or not math.isfinite(x) else float(x)


def cells(row: dict[str, Any], columns: Sequence[Column]) -> list[str]:
    """The formatted cells of one row (``–`` for None)."""
    return ["–" if row[k] is None else fmt.format(row[k]) for k, _, fmt in columns]


def markdown_table(
    caption: str, columns: Sequence[Column], rows: list[dict[str, Any]], notes: str
) -> str:
    """The table as Markdown: its caption, the table, and the notes below it."""
    lines = [
        caption,
        "",
        "| " + " | ".join(title for _, title, _ in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    lines += ["| " + " | ".join(cells(row, columns)) + " |" for row in rows]
    return "\n".join([*lines, "", notes]) + "\n"


def write_tables(out: Path, stem: str, markdown: str, payload: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``out/<stem>.md`` and ``out/<stem>.json`` (strict JSON: no NaN); return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / f"{stem}.md", out / f"{stem}.json"
    md.write_text(markdown, encoding="utf-8")
    js.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return md, js


def print_table(title: str, columns: Sequence[Column], rows: list[dict[str, Any]]) -> None:
    """Print ``rows`` with ``rich`` (text columns left-aligned, numbers right-aligned)."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for _, name, fmt in columns:
        table.add_column(name, justify="left" if fmt == "{}" else "right", overflow="fold")
    for row in rows:
        table.add_row(*cells(row, columns))
    console().print(table)
