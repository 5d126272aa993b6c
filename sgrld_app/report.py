"""Reports of runs and reproductions: one table renderer (rich to print, Markdown to save), the
JSON next to it, and the curves of Yu et al.'s Fig. 3.

A table is a list of row dicts and its columns a sequence of ``(key, title, format)``: ``key``
indexes the row, ``title`` heads the column, ``format`` is a ``str.format`` pattern. A text column
(``"{}"``) is left-aligned, every other column right-aligned (``"{:>}"``: preformatted text,
right-aligned). A missing value (``None`` or NaN) prints as :data:`MISSING`. :func:`columns` reads
the columns from a small text table.

Example:
  >>> cols = columns('''
  ...     metric  metric  {}
  ...     tv      TV      {:.3f}
  ... ''')
  >>> rows = [{"metric": "Monge", "tv": 0.01234}, {"metric": "SGLD", "tv": finite(float("nan"))}]
  >>> print(markdown_table("caption", cols, rows, "notes"), end="")
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
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from sgrld_app.config import Config

Column = tuple[str, str, str]
"""``(key, title, format)`` of a table column."""
MISSING = "—"
"""How a missing value prints."""
TEXT = "{}"
"""The format of a left-aligned text column."""

SUMMARY_FORMATS = {
    "test RMSE": "{:.4f}",
    "test NLL": "{:.4f}",
    "test log p(y|X)": "{:.4f}",
    "test acc.": "{:.4f}",
    "test ECE": "{:.4f}",
    "val log p(y|X)": "{:.4f}",
    "samples": "{:d}",
    "s/epoch sampling": "{:.2f}",
    "s/epoch scoring": "{:.2f}",
    "compile s": "{:.1f}",
}
"""The formats of the columns of :func:`summary_row` (the others are text)."""


def finite(x: float | None) -> float | None:
    """``x`` as a float, or None where it is None, NaN or infinite (JSON has no NaN)."""
    return None if x is None or not math.isfinite(x) else float(x)


def format_value(value: Any, fmt: str = "{:.4f}") -> str:
    """``fmt.format(value)``, or :data:`MISSING` for a missing or NaN value.

    Example:
        >>> format_value(0.98765), format_value(None), format_value(2.5, "{:.1f}")
        ('0.9877', '—', '2.5')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return fmt.format(value)


def columns(spec: str) -> tuple[Column, ...]:
    """Columns from a text table: one line per column, ``key  title  format``.

    Fields are separated by two or more spaces (a title may hold single spaces); a line without a
    format is a text column, and blank lines are skipped.

    Example:
        >>> columns('''
        ...     wall_s    wall [s]  {:.1f}
        ...     status    status
        ... ''')
        (('wall_s', 'wall [s]', '{:.1f}'), ('status', 'status', '{}'))
    """
    fields = [re.split(r"\s{2,}", line.strip()) for line in spec.splitlines() if line.strip()]
    return tuple((f[0], f[1], f[2] if len(f) > 2 else TEXT) for f in fields)


def cells(row: Mapping[str, Any], cols: Sequence[Column]) -> list[str]:
    """The formatted cells of one row (:func:`format_value`)."""
    return [format_value(row[key], fmt) for key, _, fmt in cols]


def markdown_table(
    caption: str, cols: Sequence[Column], rows: Sequence[Mapping[str, Any]], notes: str = ""
) -> str:
    """The table as Markdown: its caption, the table, and the notes below it (if any).

    A ``|`` inside a title or a cell is escaped.
    """
    escape = lambda values: "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"
    lines = [caption, "", escape([title for _, title, _ in cols]), "|" + "---|" * len(cols)]
    lines += [escape(cells(row, cols)) for row in rows]
    return "\n".join([*lines, "", notes] if notes else lines) + "\n"


def rich_table(caption: str, cols: Sequence[Column], rows: Sequence[Mapping[str, Any]]) -> Table:
    """The table for ``rich`` (text columns left-aligned, the others right-aligned)."""
    table = Table(title=caption, title_justify="left", box=box.SIMPLE_HEAD)
    for _, title, fmt in cols:
        table.add_column(title, justify="left" if fmt == TEXT else "right", overflow="fold")
    for row in rows:
        table.add_row(*cells(row, cols))
    return table


def console() -> Console:
    """A rich console, 200 columns wide when the output is not a terminal (a log, a pipe)."""
    terminal = Console()
    return terminal if terminal.is_terminal else Console(width=200)


def print_table(caption: str, cols: Sequence[Column], rows: Sequence[Mapping[str, Any]]) -> None:
    """Print the table with ``rich`` (:func:`rich_table`)."""
    console().print(rich_table(caption, cols, rows))


def write_tables(out: Path, stem: str, markdown: str, payload: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``out/<stem>.md`` and ``out/<stem>.json`` (strict JSON: no NaN); return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / f"{stem}.md", out / f"{stem}.json"
    md.write_text(markdown, encoding="utf-8")
    js.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return md, js


def changed_settings(config: Config) -> list[str]:
    """The keys of ``config`` that differ from the defaults, ``out.folder`` aside.

    Example:
        >>> from sgrld_app.config import load_config
        >>> changed_settings(load_config(None, ["run.chains=4", "out.folder=x",
        ...     "sampler.metric=monge", "sampler.metric_params.alpha2=0.5"]))
        ['sampler.metric', 'sampler.metric_params.alpha2', 'run.chains']
    """
    now, defaults = _flat(config.to_dict()), _flat(Config().to_dict())
    return [k for k in now if k != "out.folder" and now[k] != defaults.get(k)]


def _flat(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a.b.c": value}`` of nested dicts."""
    out: dict[str, Any] = {}
    for name, value in tree.items():
        if isinstance(value, Mapping):
            out |= _flat(value, f"{prefix}{name}.")
        else:
            out[f"{prefix}{name}"] = value
    return out


def describe(config: Config) -> str:
    """What a configuration runs, in one line: data set, sampler, learning rate (as set:
    ``auto`` until the run chooses it), chains, and how many settings differ from the defaults
    (:func:`changed_settings`).

    Example:
        >>> from sgrld_app.config import load_config
        >>> describe(load_config(None, ["data.name=digits", "sampler.metric=monge",
        ...                             "sampler.learning_rate=0.05", "run.chains=4"]))
        'digits, monge, lr 0.05, 4 chains; 4 settings changed from the defaults'
        >>> describe(load_config(None, ["sampler.kind=isgd"]))
        'mnist, isgd, lr λ rule, 1 chain; 1 setting changed from the defaults'
    """
    s = config.sampler
    method = s.kind if s.kind not in ("sgrld", "sghmc") else s.metric
    method = f"sghmc {method}" if s.kind == "sghmc" else method
    lr = s.sampler_options().get("learning_rate", "λ rule")
    lr = format(lr, "g") if isinstance(lr, float | int) else lr
    plural = lambda n, word: f"{n} {word}{'' if n == 1 else 's'}"
    changed = len(changed_settings(config))
    what = f"{config.data.source()}, {method}, lr {lr}, {plural(config.run.chains, 'chain')}"
    return what + (f"; {plural(changed, 'setting')} changed from the defaults" if changed else "")


def summary_row(result: Any, **first: str) -> dict[str, Any]:
    """One table row of a run (:class:`sgrld_app.experiment.Result`): its final scores and its
    timing.

    Args:
        result: the run's result.
        **first: the first columns, text, e.g. ``metric="Monge"``; without an ``lr``, the
            column ``lr`` is the learning rate the run used (the mean of its last epoch's steps'
            ``info.learning_rate``: a rate chosen by ``learning_rate = "auto"`` or a schedule's).

    Returns:
        Column name -> value, in display order; :func:`summary_columns` gives the columns.
    """
    final = result.records[-1] if result.records else {}
    rate = final.get("learning_rate")
    first.setdefault("lr", None if rate is None else format(rate, ".3g"))
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
        **scores,
        "samples": final.get("samples", 0),
        "s/epoch sampling": result.summary["sampler_seconds_per_epoch"],
        "s/epoch scoring": result.summary["eval_seconds_per_epoch"],
        "compile s": result.compile_s,
        "status": result.status,
        "guarantee": result.summary.get("meta", {}).get("guarantee", ""),
    }


def summary_columns(row: Mapping[str, Any]) -> tuple[Column, ...]:
    """The columns of rows like ``row``, a :func:`summary_row` (title = key).

    Example:
        >>> summary_columns({"metric": "Monge", "compile s": 1.25})
        (('metric', 'metric', '{}'), ('compile s', 'compile s', '{:.1f}'))
    """
    return tuple((key, key, SUMMARY_FORMATS.get(key, TEXT)) for key in row)


BAND = 1.96
"""Half-width of the bands of :func:`plot_curves`, in standard deviations over replicates (Yu et
al. Figs. 3 and 4)."""


def curve(records: Sequence[Mapping[str, Any]], key: str) -> tuple[list[int], Any, Any]:
    """One score against epochs: ``(epochs, values, half-widths)``.

    Records with ``"groups"`` (the replicates of a sweep, :func:`sgrld_app.records.record`) give the
    mean over replicates and :data:`BAND` standard deviations (ddof 1) of it, at the epochs where
    every replicate has a score; others give their own score and ``None`` half-widths.

    Example:
        >>> recs = [{"epoch": 1, "acc": 0.5}, {"epoch": 2, "acc": 0.75}]
        >>> curve(recs, "acc")
        ([1, 2], [0.5, 0.75], None)
        >>> recs = [{"epoch": 1, "groups": {"acc": [0.5, None]}},
        ...         {"epoch": 2, "groups": {"acc": [0.7, 0.8]}}]
        >>> epochs, mean, band = curve(recs, "acc")
        >>> epochs, mean.round(2).tolist(), band.round(3).tolist()
        ([2], [0.75], [0.139])
    """
    if records and "groups" in records[0]:
        rows = [
            (r["epoch"], np.array([math.nan if v is None else v for v in r["groups"][key]]))
            for r in records
        ]
        rows = [(e, v) for e, v in rows if np.all(np.isfinite(v))]
        if not rows:
            return [], np.zeros(0), None
        values = np.array([v for _, v in rows])
        band = BAND * values.std(axis=1, ddof=1) if values.shape[1] > 1 else None
        return [e for e, _ in rows], values.mean(axis=1), band
    points = [(r["epoch"], r[key]) for r in records if math.isfinite(r.get(key) or math.nan)]
    return [e for e, _ in points], [v for _, v in points], None


def plot_curves(
    runs: Mapping[str, list[dict[str, Any]]], path: str | Path, title: str = ""
) -> Path:
    """Test log-likelihood and accuracy of the ensembles against epochs (Yu et al. Fig. 3).

    Args:
        runs: per label (e.g. a metric), the epoch records of a run; a sweep's records (with
            ``"groups"``) are drawn as the mean over replicates with a ±1.96 std band
            (:func:`curve`), as the paper's figure.
        path: the PNG file to write.
        title: the figure title.

    Returns:
        ``path``. Regression runs plot the test NLL and RMSE instead.
    """
    plt = pyplot()
    first = next((r[0] for r in runs.values() if r), {})
    panels = (
        [("test_log_likelihood", "test log p(y|X)"), ("test_accuracy", "test accuracy")]
        if "test_log_likelihood" in first or "test_log_likelihood" in first.get("groups", {})
        else [("test_nll", "test NLL"), ("test_rmse", "test RMSE")]
    )
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    for ax, (key, label) in zip(axes, panels, strict=True):
        for name, records in runs.items():
            epochs, values, band = curve(records, key)
            if epochs:
                marker = "." if len(epochs) < 30 else None
                (line,) = ax.plot(epochs, values, marker=marker, label=name)
                if band is not None:
                    low, high = values - band, values + band
                    ax.fill_between(epochs, low, high, color=line.get_color(), alpha=0.2)
        ax.set(xlabel="epoch", ylabel=label)
        ax.grid(alpha=0.3)
    if axes[0].lines:  # no line before the first thinned sample (e.g. a run shorter than burn-in)
        axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path, dpi=120)


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int) -> Path:
    """Save ``fig`` as ``path`` (its folder created if need be), close it; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


CONVERGENCE_COLUMNS = columns("""
    trace     trace
    r_hat     split R-hat  {:.3f}
    ess_bulk  bulk ESS     {:.0f}
    ess_tail  tail ESS     {:.0f}
""")
"""The columns of the table of :func:`sgrld.samples.diagnostics.convergence`'s rows."""


def plot_traces(series: dict[str, np.ndarray], path: str | Path) -> Path:
    """One panel per trace, one line per chain; saved as ``path`` (PNG)."""
    plt = pyplot()
    fig, axes = plt.subplots(
        len(series), 1, figsize=(8, 1.6 * len(series)), sharex=True, constrained_layout=True
    )
    for ax, (name, x) in zip(np.atleast_1d(axes), series.items(), strict=True):
        for c, chain in enumerate(x):
            ax.plot(chain, lw=0.7, label=f"chain {c}")
        ax.set_ylabel(name, rotation=0, ha="right", fontsize=8)
    np.atleast_1d(axes)[-1].set_xlabel("draw")
    return save_figure(fig, path, dpi=100)
