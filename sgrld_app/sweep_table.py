"""A sweep's table (:func:`sgrld_app.sweep.run_sweep`): each setting's scores over its replicates
(:func:`setting_scores`), as ``mean ± std`` (:func:`mean_std`), the best setting on the
validation log-likelihood (:func:`best_setting`), the rows and columns (:func:`table`), and its
files: ``sweep.md``, ``sweep.json`` and the sweep in ``summary.json`` (:func:`write`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from sgrld.samples import results
from sgrld_app import report, scoring
from sgrld_app.config import Config
from sgrld_app.experiment import Experiment, Result

CLASSIFICATION = (
    ("test_log_likelihood", "test log p(y|X)"),
    ("test_accuracy", "test acc."),
    ("test_ece", "test ECE"),
    ("val_log_likelihood", "val log p(y|X)"),
)
REGRESSION = (("test_rmse", "test RMSE"), ("test_nll", "test NLL"), ("val_nll", "val NLL"))
"""The scores of the table, (score, column title), by kind."""


def mean_std(values: np.ndarray) -> str:
    """``"mean ± std"`` over replicates (std with ``ddof = 1``; one replicate: the value alone),
    :data:`sgrld_app.report.MISSING` if a replicate has no score.

    Example:
        >>> mean_std(np.array([-0.1, -0.12, -0.11])), mean_std(np.array([0.5]))
        ('-0.1100 ± 0.0100', '0.5000')
    """
    if not np.all(np.isfinite(values)):
        return report.MISSING
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{np.mean(values):.4f} ± {np.std(values, ddof=1):.4f}"


@dataclasses.dataclass
class SweepResult:
    """What :func:`run_sweep` returns.

    Attributes:
        result: the run of all chains (:class:`sgrld_app.experiment.Result`).
        settings: the settings, key -> value (:func:`settings`).
        replicates: replicates per setting.
        scores: per setting, ``NAME_SCORE -> [replicates]`` (each replicate's chains pooled) and
            ``"diverged"``: chains of the setting that diverged.
        best: index of the best setting, ``None`` if every setting had a divergence.
        rows: the table rows (text cells), one per setting.
        columns: the table's columns (:mod:`sgrld_app.report`).
        caption: the table's caption.
    """

    result: Result
    settings: list[dict[str, float]]
    replicates: int
    scores: list[dict[str, Any]]
    best: int | None
    rows: list[dict[str, str]]
    columns: tuple[report.Column, ...]
    caption: str


def best_setting(kind: scoring.Kind, scores: list[dict[str, Any]]) -> int | None:
    """The setting of the highest mean validation log-likelihood (lowest NLL) without divergence."""
    key, sign = ("val_log_likelihood", 1.0) if kind == "classification" else ("val_nll", -1.0)
    ranked = [
        (sign * float(np.mean(s[key])), i)
        for i, s in enumerate(scores)
        if not s["diverged"] and np.all(np.isfinite(s[key]))
    ]
    return max(ranked)[1] if ranked else None


def table(
    kind: scoring.Kind,
    points: list[dict[str, float]],
    scores: list[dict[str, Any]],
    best: int | None,
    title_of: Mapping[str, str],
) -> tuple[tuple[report.Column, ...], list[dict[str, str]]]:
    """The columns and the rows (text cells) of the settings ``points``: the swept values (their
    column titles ``title_of`` each key), the scores' ``mean ± std``, samples, diverged chains and
    the ``best`` setting marked."""
    names = CLASSIFICATION if kind == "classification" else REGRESSION
    keys = list(points[0]) if points else []
    titles = [title_of[key] for key in keys]
    cols = (
        *((t, t, report.TEXT) for t in titles),
        *((title, title, "{:>}") for _, title in names),
        ("samples", "samples/replicate", "{:>}"),
        ("diverged", "diverged chains", "{:>}"),
        ("best", "best", report.TEXT),
    )
    rows = []
    for i, (point, s) in enumerate(zip(points, scores, strict=True)):
        row = {t: format(point[key], "g") for t, key in zip(titles, keys, strict=True)}
        row |= {title: mean_std(s[score]) for score, title in names}
        row["samples"] = str(int(np.min(s["samples"])))
        row["diverged"] = str(s["diverged"])
        row["best"] = "◀ best" if i == best else ""
        rows.append(row)
    return cols, rows


def setting_scores(
    result: Result, experiment: Experiment, points: int, replicates: int, config: Config
) -> list[dict[str, Any]]:
    """Each setting's per-replicate scores and its number of diverged chains."""
    labels = {name: jnp.asarray(y) for name, (_, y) in experiment.eval_sets.items()}
    per_group = scoring.group_scores(experiment.kind, result.scores, labels, points * replicates)
    per_setting = (replicates * config.run.chains,)
    diverged = (result.diverged_step >= 0).reshape(points, *per_setting).sum(axis=1)
    return [
        {name: values[i * replicates : (i + 1) * replicates] for name, values in per_group.items()}
        | {"diverged": int(diverged[i])}
        for i in range(points)
    ]


def payload(sweep: SweepResult) -> dict[str, Any]:
    """The table and the per-replicate scores as JSON-safe data (NaN -> ``None``)."""
    values = lambda a: [report.finite(float(x)) for x in np.asarray(a)]
    return {
        "settings": sweep.settings,
        "replicates": sweep.replicates,
        "best": sweep.best,
        "best_setting": None if sweep.best is None else sweep.settings[sweep.best],
        "scores": [
            {k: v if k == "diverged" else values(v) for k, v in s.items()} for s in sweep.scores
        ],
        "rows": sweep.rows,
    }


def write(sweep: SweepResult, out: Path) -> None:
    """Write ``sweep.md`` and ``sweep.json`` to ``out`` and add the sweep to ``summary.json``."""
    data = payload(sweep)
    markdown = report.markdown_table(sweep.caption, sweep.columns, sweep.rows)
    report.write_tables(out, "sweep", markdown, data)
    sweep.result.summary["sweep"] = data
    results.write_json(out / "summary.json", sweep.result.summary)
