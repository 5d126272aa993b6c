"""The tables of ``sgrld reproduce mnist-mlp``: the paper's equal-time numbers (Yu et al., 2023,
Table 6) and re-chosen rates, the columns, and the rows of ours beside the paper's, Tables 1-2
(:func:`table_row`) and Table 6 (:func:`equal_time_row`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sgrld_app import api as app
from sgrld_app.api import MISSING, TEXT, ConfigError, mean_std
from sgrld_reproductions.scaffolding import (
    METRIC_LABELS,
    MNIST_PAPER,
    MnistCell,
    YuPaper,
    equal_time_epochs,
)

Pair = tuple[float, float]
TABLE6: dict[tuple[str, int], dict[str, tuple[Pair, Pair]]] = {
    ("gaussian", 400): {
        "identity": ((-0.1311, 0.0004), (0.9684, 0.0005)),
        "wenzel": ((-0.1315, 0.0002), (0.9686, 0.0003)),
        "rmsprop": ((-0.1310, 0.0005), (0.9689, 0.0006)),
        "shampoo": ((-0.1304, 0.0002), (0.9684, 0.0004)),
    },
    ("gaussian", 800): {
        "identity": ((-0.1667, 0.0004), (0.9587, 0.0003)),
        "wenzel": ((-0.1668, 0.0004), (0.9583, 0.0004)),
        "rmsprop": ((-0.1648, 0.0002), (0.9612, 0.0003)),
        "shampoo": ((-0.1635, 0.0003), (0.9596, 0.0004)),
    },
    ("gaussian", 1200): {
        "identity": ((-0.1932, 0.0004), (0.9514, 0.0004)),
        "wenzel": ((-0.1935, 0.0004), (0.9519, 0.0003)),
        "rmsprop": ((-0.1894, 0.0006), (0.9566, 0.0003)),
        "monge": ((-0.1785, 0.0005), (0.9560, 0.0005)),
        "shampoo": ((-0.1878, 0.0003), (0.9541, 0.0003)),
    },
    ("horseshoe", 400): {
        "identity": ((-0.0750, 0.0004), (0.9823, 0.0003)),
        "wenzel": ((-0.0777, 0.0009), (0.9806, 0.0003)),
        "rmsprop": ((-0.0680, 0.0013), (0.9792, 0.0007)),
        "monge": ((-0.0650, 0.0006), (0.9826, 0.0006)),
        "shampoo": ((-0.0691, 0.0009), (0.9812, 0.0008)),
    },
    ("horseshoe", 800): {
        "identity": ((-0.0798, 0.0003), (0.9818, 0.0004)),
        "wenzel": ((-0.0842, 0.0008), (0.9787, 0.0002)),
        "rmsprop": ((-0.0656, 0.0013), (0.9801, 0.0007)),
        "monge": ((-0.0628, 0.0010), (0.9835, 0.0007)),
        "shampoo": ((-0.0663, 0.0009), (0.9819, 0.0006)),
    },
    ("horseshoe", 1200): {
        "identity": ((-0.0809, 0.0004), (0.9814, 0.0002)),
        "wenzel": ((-0.1009, 0.0009), (0.9745, 0.0005)),
        "rmsprop": ((-0.0630, 0.0011), (0.9808, 0.0007)),
        "monge": ((-0.0699, 0.0005), (0.9832, 0.0005)),
        "shampoo": ((-0.0599, 0.0005), (0.9831, 0.0003)),
    },
}
"""Table 6 of Yu et al. (2023), equal computation time: (log p(y|X), accuracy), each mean and
standard deviation over 10 runs, by (prior, W) and metric (Monge absent where α² = 0 is optimal)."""
EQUAL_TIME_LR: dict[tuple[str, int, str], float] = {
    ("gaussian", 400, "shampoo"): 0.005,
    ("gaussian", 800, "shampoo"): 0.0025,
    ("gaussian", 1200, "shampoo"): 0.0025,
    ("horseshoe", 400, "rmsprop"): 0.00075,
}
"""The learning rates the paper re-chose for the equal time budget where they differ from Table 4's
(App. A.6), by (prior, W, metric)."""


def _cell(
    ours: float | None, paper: tuple[float, float] | None, over: np.ndarray | None = None
) -> tuple[str, str]:
    """(ours, paper) formatted; ours marked ▼ below the paper's mean − 2 standard deviations.
    ``over``: our value in each replicate, shown as mean ± std (the mean is compared)."""
    text = app.format_value(ours)
    if over is not None:
        ours = float(np.mean(over)) if np.all(np.isfinite(over)) else None
        text = mean_std(over)
    if paper is None:
        return text, MISSING
    worse = ours is not None and ours < paper[0] - 2 * paper[1]
    return text + (" ▼" if worse else ""), f"{paper[0]:.4f} ± {paper[1]:.4f}"


COLUMNS = tuple(
    (name, name, TEXT if name in ("table", "prior", "metric", "lr", "status") else "{:>}")
    for name in (
        "table", "prior", "W", "metric", "lr", "log p(y|X)", "paper log p", "acc.", "paper acc.",
        "conf.", "paper conf.", "ECE", "curv.", "paper curv.", "s/epoch", "paper s/epoch",
        "eval s/epoch", "epochs", "status",
    )
)  # fmt: skip
"""The columns of the output table, ours next to the paper's: preformatted text (:func:`table_row`),
right-aligned except the names."""
NOTES = (
    "table 1-2: the ensembles after the last epoch; table 6 (--equal-time): each ensemble cut at "
    "the fastest sampler's total sampling time (epochs: those within it; lr: the rate kept on "
    "validation at the cut). s/epoch: the sampler's time per epoch, evaluation excluded, as the "
    "paper timed it (the paper's: one CPU core, per step; ours with --replicates or --lr-grid: "
    "that of the sweep's chains together); eval s/epoch: the time spent scoring "
    "the epoch's samples on the test and validation sets. conf.: the average confidence, the "
    "mean largest predicted probability of the ensemble (paper: Table 10, 3 runs, horseshoe "
    "W = 400 only); below the accuracy, the ensemble is under-confident."
)


def seconds_per_epoch(result: app.Result) -> float:
    """A run's median sampling seconds per epoch (its records' ``sample_s``), the time source
    of ``--equal-time``.

    Raises:
        ConfigError: the run has no epoch, or an epoch's record has no ``sample_s``.

    Example:
        >>> from types import SimpleNamespace
        >>> seconds_per_epoch(SimpleNamespace(records=[{"sample_s": s} for s in (3, 1, 2)]))
        2.0
        >>> seconds_per_epoch(SimpleNamespace(records=[{"epoch": 1}], out="r/identity"))
        Traceback (most recent call last):
        ...
        sgrld_app.config.key_checks.ConfigError: --equal-time cuts each ensemble by ...
    """
    times = [r.get("sample_s") for r in result.records]
    if not times or any(t is None or not np.isfinite(t) for t in times):
        where = f" in {result.out}/metrics.jsonl" if getattr(result, "out", None) else ""
        raise ConfigError(
            f"--equal-time cuts each ensemble by the epochs' sampling times, but the run's "
            f"records{where} ({len(times)} epochs) lack sample_s: run the cells again to time them"
        )
    return float(np.median(times))


def _row(
    table: str,
    prior: str,
    width: int,
    metric: str,
    cell: MnistCell | None,
    paper: YuPaper,
    rate: int = 0,
) -> dict[str, str]:
    row = dict.fromkeys((key for key, _, _ in COLUMNS), MISSING)
    row |= {"table": table, "prior": prior, "W": str(width), "metric": METRIC_LABELS[metric]}
    if cell is None:
        note = "α² = 0 is optimal (= Identity)"
        return row | {"log p(y|X)": note, "paper log p": note, "status": "not run"}
    alpha2 = f", α²={paper.alpha2:g}" if paper.alpha2 else ""
    status = cell.result.status
    diverged = cell.result.records[-1].get("divergences", 0) if cell.result.records else 0
    if diverged and status == "completed":  # a sweep's other chains went on
        status += f" ({diverged} chain(s) diverged)"
    lr = format(cell.learning_rates[rate], "g")
    if len(cell.learning_rates) > 1:
        lr += f" (val. of {', '.join(format(r, 'g') for r in cell.learning_rates)})"
    return row | {"lr": lr + alpha2, "status": status}


def table_row(prior: str, width: int, metric: str, cell: MnistCell | None) -> dict[str, str]:
    """One row of Tables 1-2 (``cell=None``: Monge where α² = 0, i.e. Identity, is best), at the
    cell's rate of best validation log p(y|X) (:meth:`MnistCell.choose`)."""
    paper = MNIST_PAPER[(prior, width)][metric]
    rate = 0 if cell is None else cell.choose()
    row = _row("1-2", prior, width, metric, cell, paper, rate)
    if cell is None:
        return row
    result, replicates = cell.result, None if cell.scores is None else cell.scores[rate]
    final = result.records[-1] if result.records else {}
    over = (replicates or {}).get
    ll, acc = "test_log_likelihood", "test_accuracy"
    row["log p(y|X)"], row["paper log p"] = _cell(final.get(ll), paper.log_lik, over(ll))
    row["acc."], row["paper acc."] = _cell(final.get(acc), paper.accuracy, over(acc))
    ece = app.format_value(final.get("test_ece"))
    confidence = app.format_value(final.get("test_confidence"))
    curvature = app.format_value(final.get("curvature"), "{:.2f}")  # pooled over all chains
    if replicates is not None and "test_confidence" in replicates:
        confidence = mean_std(replicates["test_confidence"])
    return row | {
        "conf.": confidence,
        "paper conf.": app.format_value(paper.confidence),
        "ECE": ece if replicates is None else mean_std(replicates["test_ece"]),
        "curv.": MISSING if len(cell.learning_rates) > 1 else curvature,
        "paper curv.": app.format_value(paper.curvature, "{:.2f}"),
        "s/epoch": app.format_value(result.summary["sampler_seconds_per_epoch"], "{:.2f}"),
        "paper s/epoch": app.format_value(paper.seconds, "{:.1f}"),
        "eval s/epoch": app.format_value(result.summary["eval_seconds_per_epoch"], "{:.2f}"),
        "epochs": str(len(result.records)),
    }


def equal_time_row(
    prior: str, width: int, metric: str, candidates: list[MnistCell], seconds: float, budget: float
) -> dict[str, str]:
    """The Table 6 row of one metric after the epochs that fit in ``budget`` seconds at
    ``seconds`` per epoch, at the rate of highest mean validation log p(y|X) at that cut among
    ``candidates`` (the metric's run, with ``--lr-grid`` of every rate, and without it a run at
    the paper's re-chosen rate, :data:`EQUAL_TIME_LR`); none: Monge where α² = 0 is optimal."""
    paper = MNIST_PAPER[(prior, width)][metric]
    if not candidates:
        return _row("6", prior, width, metric, None, paper)
    epochs = equal_time_epochs(seconds, budget, min(len(c.result.records) for c in candidates))
    kept = epochs if epochs else None
    best = [(c, c.choose(kept)) for c in candidates]
    val = lambda c, i: float(np.mean(c.values(i, "val_log_likelihood", kept))) if kept else np.nan
    ranked = [(val(c, i), k) for k, (c, i) in enumerate(best) if np.isfinite(val(c, i))]
    cell, rate = best[max(ranked)[1] if ranked else 0]
    row = _row("6", prior, width, metric, cell, paper, rate)
    if len(candidates) > 1:
        others = ", ".join(format(c.learning_rates[0], "g") for c in candidates if c is not cell)
        row["lr"] += f" (val. over {others})"
    cut = lambda key: cell.values(rate, key, kept) if kept else np.array([np.nan])
    paper_ll, paper_acc = TABLE6[(prior, width)].get(metric, (None, None))
    keys = ("test_log_likelihood", "test_accuracy", "test_ece", "test_confidence")
    values = {key: cut(key) for key in keys}
    show = lambda v: mean_std(v) if len(v) > 1 else app.format_value(float(v[0]))
    row["log p(y|X)"], row["paper log p"] = _cell(*_one(values["test_log_likelihood"], paper_ll))
    row["acc."], row["paper acc."] = _cell(*_one(values["test_accuracy"], paper_acc))
    return row | {
        "conf.": show(values["test_confidence"]),
        "ECE": show(values["test_ece"]),
        "s/epoch": app.format_value(seconds, "{:.2f}"),
        "paper s/epoch": app.format_value(paper.seconds, "{:.1f}"),
        "epochs": str(epochs),
    }


def _one(values: np.ndarray, paper: Pair | None) -> tuple[Any, Pair | None, Any]:
    """:func:`_cell`'s arguments for per-replicate values: one value alone, else all of them."""
    if len(values) > 1:
        return None, paper, values
    return (None if np.isnan(values[0]) else float(values[0])), paper, None
