"""The table of ``sgrld reproduce monge-alpha``: the authors' α² grid behind Yu et al. (2023)'s
Fig. 4, the columns, and the rows of ours beside the paper's (one per α², one per other metric),
the best α² on validation marked.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from sgrld_app import api as app
from sgrld_app.api import MISSING, TEXT, mean_std
from sgrld_reproductions.scaffolding import METRIC_LABELS, MNIST_PAPER, MnistCell, at_epoch

WIDTH = 400
Pair = tuple[float, float]


class Point(NamedTuple):
    """One α² of the authors' grid: its learning rate and test scores over 10 runs (mean, std)."""

    learning_rate: float
    log_lik: Pair | None = None
    accuracy: Pair | None = None


PAPER: dict[str, dict[float, Point]] = {
    "horseshoe": {
        0.05: Point(0.25, (-0.0726, 0.0004), (0.9827, 0.0003)),
        0.1: Point(0.25, (-0.0710, 0.0005), (0.9829, 0.0004)),
        0.25: Point(0.25, (-0.0682, 0.0005), (0.9832, 0.0004)),
        0.5: Point(0.25, (-0.0653, 0.0005), (0.9831, 0.0004)),
        0.75: Point(0.25, (-0.0638, 0.0007), (0.9831, 0.0005)),
        1.0: Point(0.25, (-0.0634, 0.0010), (0.9834, 0.0005)),
        1.25: Point(0.25, (-0.0629, 0.0009), (0.9831, 0.0005)),
        1.5: Point(0.5, (-0.0669, 0.0006), (0.9829, 0.0007)),
        1.75: Point(0.5, (-0.0670, 0.0011), (0.9829, 0.0005)),
        2.0: Point(0.5, (-0.0681, 0.0012), (0.9823, 0.0006)),
        2.25: Point(0.5, (-0.0682, 0.0010), (0.9828, 0.0005)),
        2.5: Point(0.5),
        2.75: Point(0.5),
        3.0: Point(0.5),
    },
    "gaussian": {
        0.1: Point(0.05, (-0.1308, 0.0004), (0.9687, 0.0004)),
        0.5: Point(0.05, (-0.1317, 0.0004), (0.9684, 0.0005)),
        1.0: Point(0.05, (-0.1327, 0.0004), (0.9683, 0.0003)),
    },
}
"""The authors' α² grid on MNIST, W = 400 (their notebook behind Fig. 4; the horseshoe prior is
the figure's): per α², the learning rate chosen on validation and the test log p(y|X) and accuracy
(mean, std over 10 runs); no scores where their runs did not finish (α² ≥ 2.5)."""

COLUMNS = tuple(
    (name, name, TEXT if name in ("metric", "α²", "lr", "best", "status") else "{:>}")
    for name in (
        "metric", "α²", "lr", "log p(y|X)", "paper log p", "acc.", "paper acc.", "val log p",
        "diverged", "epochs", "best", "status",
    )
)  # fmt: skip
"""The table's columns: ours beside the paper's (preformatted text)."""
NOTES = (
    "Monge rows: one per α² (0 is the Identity metric); paper: the authors' 10 runs behind Fig. 4 "
    "(std ddof 0), — where they did not run that α² or their runs failed (α² ≥ 2.5). Other rows: "
    "the metrics at their Table 4 learning rates beside Table 1. best: the α² of highest mean "
    "validation log p(y|X) among those without a diverged chain. diverged: chains of the row "
    "that produced NaN/inf (they stop sampling; their samples before it count)."
)


def _cell(values: np.ndarray, paper: Pair | None) -> tuple[str, str]:
    """(ours, paper): our mean ± std over replicates, ▼ below the paper's mean − 2 std."""
    text = mean_std(values)
    if paper is None:
        return text, MISSING
    low = np.all(np.isfinite(values)) and float(np.mean(values)) < paper[0] - 2 * paper[1]
    return text + (" ▼" if low else ""), f"{paper[0]:.4f} ± {paper[1]:.4f}"


def _scores(values: dict[str, Any], paper_ll: Pair | None, paper_acc: Pair | None) -> dict:
    row = {}
    row["log p(y|X)"], row["paper log p"] = _cell(values["test_log_likelihood"], paper_ll)
    row["acc."], row["paper acc."] = _cell(values["test_accuracy"], paper_acc)
    row["val log p"] = mean_std(values["val_log_likelihood"])
    return row


def alpha2_row(
    prior: str, alpha2: float, lr: float, scores: dict[str, Any], run: app.Result
) -> dict:
    """The row of one α²: ``scores`` its replicates' (:attr:`sgrld_app.api.SweepResult.scores`),
    ``run`` the sweep's :class:`sgrld_app.api.Result`."""
    paper = PAPER[prior].get(alpha2, Point(lr))
    return {
        "metric": "Monge",
        "α²": format(alpha2, "g"),
        "lr": format(lr, "g"),
        **_scores(scores, paper.log_lik, paper.accuracy),
        "diverged": str(scores["diverged"]),
        "epochs": str(len(run.records)),
        "best": "",
        "status": run.status,
        "replicates": {key: _floats(v) for key, v in scores.items() if key != "diverged"},
    }


def reference_row(prior: str, metric: str, cell: MnistCell) -> dict:
    """The row of another metric at its Table 4 learning rate, beside Table 1."""
    paper = MNIST_PAPER[(prior, WIDTH)][metric]
    keys = ("test_log_likelihood", "test_accuracy", "val_log_likelihood")
    values = {key: at_epoch(cell.result, key) for key in keys}
    diverged = cell.result.records[-1].get("divergences", 0) if cell.result.records else 0
    return {
        "metric": METRIC_LABELS[metric],
        "α²": MISSING,
        "lr": format(cell.learning_rates[0], "g"),
        **_scores(values, paper.log_lik, paper.accuracy),
        "diverged": str(diverged),
        "epochs": str(len(cell.result.records)),
        "best": "",
        "status": cell.result.status,
        "replicates": {key: _floats(v) for key, v in values.items()},
    }


def _floats(values: Any) -> list[float | None]:
    return [app.finite(float(v)) for v in np.asarray(values, np.float64)]


def mark_best(rows: list[dict]) -> None:
    """Mark the Monge row of highest mean validation log p(y|X) without a diverged chain.

    Example:
        >>> rows = [{"metric": "Monge", "diverged": "0", "replicates": {"val_log_likelihood": v}}
        ...         for v in ([-0.07], [-0.06], [-0.05])]
        >>> rows[2]["diverged"] = "1"
        >>> mark_best(rows); [r["best"] for r in rows]
        ['', '◀ best', '']
    """
    for row in rows:
        row["best"] = ""
    ranked = [
        (float(np.mean(vals)), i)
        for i, row in enumerate(rows)
        if row["metric"] == "Monge" and row["diverged"] == "0"
        for vals in [row["replicates"]["val_log_likelihood"]]
        if all(v is not None for v in vals)
    ]
    if ranked:
        rows[max(ranked)[1]]["best"] = "◀ best"
