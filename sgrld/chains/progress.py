"""The progress bar of long runs (rich): steps done, chunks (epochs) done, elapsed time, ETA."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


@contextlib.contextmanager
def progress_bar(
    total: int, chunks: int, enabled: bool, label: str, unit: str
) -> Iterator[tuple[Progress, Any]]:
    """A rich progress bar over ``total`` steps in ``chunks`` chunks (disabled: shows nothing)."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn(f"{unit} {{task.fields[chunk]}}/{chunks}"),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        disable=not enabled,
        transient=False,
    )
    with bar:
        yield bar, bar.add_task(label, total=total, chunk=0)
