"""The tables of ``sgrld reproduce cifar-resnet``: the columns, and the rows of ours beside the
paper's (:mod:`sgrld_reproductions.cifar_resnet.paper`), Tables 3 and 9 (:func:`table3_row`), Table
7 at the equal time budget (:func:`table7_row`) and Monge's, not run (:func:`monge_row`).
"""

from __future__ import annotations

import statistics
from typing import NamedTuple

from sgrld_app import api as app
from sgrld_app.api import MISSING, TEXT
from sgrld_reproductions.cifar_resnet.paper import PAPER, Pair
from sgrld_reproductions.scaffolding import METRIC_LABELS, equal_time_epochs


def _stats(values: list[float | None]) -> Pair | None:
    """Mean and standard deviation (ddof 1; 0 for one value) of the values, None if any is."""
    if not values or any(v is None for v in values):
        return None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def cell(values: list[float | None], paper: Pair | None, higher_is_better: bool = True) -> str:
    """Our value (mean ± std over replicates), marked ▼ where worse than the paper's mean by
    more than twice its standard deviation.

    Example:
        >>> cell([-0.47, -0.48], (-0.4627, 0.0039)), cell([0.09], (0.0919, 0.0032), False)
        ('-0.4750 ± 0.0071 ▼', '0.0900')
    """
    ours = _stats(values)
    if ours is None:
        return MISSING
    text = f"{ours[0]:.4f}" + (f" ± {ours[1]:.4f}" if len(values) > 1 else "")
    if paper is not None:
        gap = (paper[0] - ours[0]) if higher_is_better else (ours[0] - paper[0])
        text += " ▼" if gap > 2 * paper[1] else ""
    return text


def _paper(pair: Pair | None) -> str:
    return MISSING if pair is None else f"{pair[0]:.4f} ± {pair[1]:.4f}"


COLUMNS = tuple(
    (name, name, TEXT if name in ("table", "prior", "metric", "lr", "status") else "{:>}")
    for name in (
        "table", "prior", "metric", "lr", "log p(y|X)", "paper log p", "acc.", "paper acc.",
        "ECE", "paper ECE", "curv.", "paper curv.", "s/epoch", "paper s/epoch", "epochs",
        "status",
    )
)  # fmt: skip
"""The columns of the output table, ours next to the paper's (preformatted text)."""
NOTES = (
    "table 3 & 9: the ensembles after the last epoch (ECE: Table 9); table 7: each ensemble cut "
    "at the fastest sampler's total sampling time (epochs: those within it), at App. A.6's "
    "learning rates. s/epoch: the sampler's median time per epoch, evaluation excluded (the "
    "paper's: one V100 GPU). Monge: the paper's best α² was 0 (= Identity) for both priors."
)


class Cell(NamedTuple):
    """The runs of one prior, metric and learning rate: one result per replicate."""

    prior: str
    metric: str
    learning_rate: float
    results: list[app.Result]


def seconds_per_epoch(cell_: Cell) -> float:
    """The median over replicates of the median sampling seconds per epoch."""
    return statistics.median(r.summary["sampler_seconds_per_epoch"] for r in cell_.results)


def _final(results: list[app.Result], key: str, epochs: int | None = None) -> list:
    """``key`` of each replicate's record after ``epochs`` epochs (default: the last)."""
    out = []
    for r in results:
        records = r.records if epochs is None else r.records[:epochs]
        out.append(records[-1].get(key) if records else None)
    return out


def _status(results: list[app.Result]) -> str:
    return max((r.status for r in results), key=lambda s: app.EXIT_CODES[s])


def table3_row(cell_: Cell) -> dict[str, str]:
    """The Table 3 and 9 row of one prior and metric."""
    paper, results = PAPER[cell_.prior][cell_.metric], cell_.results
    return {
        "table": "3 & 9",
        "prior": cell_.prior,
        "metric": METRIC_LABELS[cell_.metric],
        "lr": format(cell_.learning_rate, "g"),
        "log p(y|X)": cell(_final(results, "test_log_likelihood"), paper.log_lik),
        "paper log p": _paper(paper.log_lik),
        "acc.": cell(_final(results, "test_accuracy"), paper.accuracy),
        "paper acc.": _paper(paper.accuracy),
        "ECE": cell(_final(results, "test_ece"), paper.ece, higher_is_better=False),
        "paper ECE": _paper(paper.ece),
        "curv.": app.format_value(_mean(_final(results, "curvature")), "{:.2f}"),
        "paper curv.": app.format_value(paper.curvature, "{:.2f}"),
        "s/epoch": app.format_value(seconds_per_epoch(cell_), "{:.2f}"),
        "paper s/epoch": app.format_value(paper.seconds, "{:.1f}"),
        "epochs": str(min(len(r.records) for r in results)),
        "status": _status(results),
    }


def _mean(values: list[float | None]) -> float | None:
    stats = _stats(values)
    return None if stats is None else stats[0]


def table7_row(cell_: Cell, seconds: float, budget: float) -> dict[str, str]:
    """The Table 7 row of one prior and metric: its ensemble after the epochs that fit in
    ``budget`` seconds at ``seconds`` per epoch (its Table 3 run's)."""
    paper, results = PAPER[cell_.prior][cell_.metric], cell_.results
    epochs = equal_time_epochs(seconds, budget, min(len(r.records) for r in results))
    kept = epochs if epochs > 0 else None
    scores = {
        "ll": _final(results, "test_log_likelihood", kept) if kept else [None],
        "acc": _final(results, "test_accuracy", kept) if kept else [None],
        "ece": _final(results, "test_ece", kept) if kept else [None],
    }
    return {
        "table": "7",
        "prior": cell_.prior,
        "metric": METRIC_LABELS[cell_.metric],
        "lr": format(cell_.learning_rate, "g"),
        "log p(y|X)": cell(scores["ll"], paper.equal_time_log_lik),
        "paper log p": _paper(paper.equal_time_log_lik),
        "acc.": cell(scores["acc"], paper.equal_time_accuracy),
        "paper acc.": _paper(paper.equal_time_accuracy),
        "ECE": cell(scores["ece"], None),
        "paper ECE": MISSING,
        "curv.": MISSING,
        "paper curv.": MISSING,
        "s/epoch": app.format_value(seconds, "{:.2f}"),
        "paper s/epoch": app.format_value(paper.seconds, "{:.1f}"),
        "epochs": str(epochs),
        "status": _status(results),
    }


def monge_row(prior: str, table: str) -> dict[str, str]:
    """The row that says Monge was not run: its best α² is 0, which is Identity."""
    note = "α² = 0 is optimal (= Identity)"
    row = dict.fromkeys((key for key, _, _ in COLUMNS), MISSING)
    return row | {
        "table": table,
        "prior": prior,
        "metric": "Monge",
        "log p(y|X)": note,
        "paper log p": note,
        "status": "not run",
    }
