"""What a run records: one line of ``metrics.jsonl`` per epoch and its ``summary.json``.

Every field of the sampler's ``info`` is summarised per epoch (:func:`diagnostics`), so a metric's
root refresh that fell back, a drift fallback or a large Γ̂ shows in ``metrics.jsonl``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from sgrld.chains import engine as eng
from sgrld_app import scoring


def diagnostics(summary: dict[str, Any]) -> dict[str, float]:
    """The sampler diagnostics of a record, from a chunk summary (:mod:`sgrld.chains.summaries`).

    The summary covers the epoch's *summarised* steps, those whose ``info`` the engine reads:
    every ``thin``-th step (the thinning grid, burn-in included) and the epoch's last; every step
    with ``thin = 1`` and in an epoch re-run after a divergence. Float fields of ``info``
    become their mean over the finite summarised steps (``potential``, ``grad_norm``,
    ``gamma_norm``, ``learning_rate``) and ``NAME_max``; boolean fields the count ``NAME_count``
    over them (``drift_fallback_count``); integer counters their total over chains at the end
    of the epoch (``metric_fallbacks``, a count over every step).
    """
    steps = max(float(summary["steps"]), 1.0)
    out: dict[str, float] = {}
    for key, value in summary.items():
        name, _, kind = key.rpartition("_")
        if kind == "sum":
            out[name] = float(value) / steps
        elif kind in ("max", "count"):
            out[key] = float(value) if kind == "max" else int(value)
        elif kind == "last":
            out[name] = int(value)
    return out


def record(
    epoch: int,
    steps: int,
    scores: scoring.Scores,
    previous: int,
    chunk: eng.Chunk,
    values: dict[str, jax.Array],
    carry: eng.Carry,
    seconds: dict[str, float],
    groups: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """One line of ``metrics.jsonl``: counts, diagnostics, scores so far, timing and, if given,
    ``"groups"``: each group of chains' scores so far (:func:`sgrld_app.scoring.group_scores`), a
    list per score, ``None`` for a group without samples (JSON has no NaN)."""
    samples = int(np.sum(np.asarray(scores.samples)))
    rec = {
        "epoch": epoch + 1,
        "steps": (epoch + 1) * steps,
        "samples": samples,
        "samples_in_epoch": samples - previous,
        **diagnostics(chunk.summary),
        "divergences": int(np.sum(np.asarray(carry.diverged_step) >= 0)),
        # An empty ensemble has no scores (its "accuracy" would be that of argmax over NaNs).
        **{name: float(value) if samples else math.nan for name, value in values.items()},
        **seconds,
    }
    if groups is not None:
        rec["groups"] = {
            name: [None if not math.isfinite(x) else float(x) for x in np.asarray(v, np.float64)]
            if name != "samples"
            else np.asarray(v).tolist()
            for name, v in groups.items()
        }
    return rec


def summary(result: Any, schedule: Any, steps: int, meta: Mapping) -> dict[str, Any]:
    """``summary.json`` of a run: its outcome, schedule, timing medians and final record."""
    records = result.records

    def median(key: str) -> float | None:
        return float(np.median([r[key] for r in records])) if records else None

    return {
        "status": result.status,
        "message": result.message,
        "epochs_completed": len(records),
        "steps_per_epoch": steps,
        "schedule": vars(schedule),
        "compile_s": result.compile_s,
        "seconds_per_epoch": median("epoch_s"),
        "sampler_seconds_per_epoch": median("sample_s"),
        "eval_seconds_per_epoch": median("eval_s"),
        "cpu_seconds_per_epoch": median("epoch_cpu_s"),
        "final": records[-1] if records else None,
        "meta": dict(meta),
    }
