"""Yu et al.'s Fig. 3 bands, Fig. 4 (``sgrld reproduce monge-alpha``) and Table 6 (``mnist-mlp
--equal-time``): per-replicate records of a sweep, the α² reproduction end to end on small IDX
files, the equal-time cut, and bad options."""

from __future__ import annotations

import numpy as np
import pytest

import sgrld
from sgrld.sweep import parse_grid, run_sweep

TINY = ["data.name=digits", "data.batch_size=64", "model.widths=[8]", "prior.kind=gaussian",
        "run.epochs=2", "run.burn_in=0", "run.thin=5"]  # fmt: skip


def test_sweep_records_score_every_replicate_apart():
    """Each record of a sweep gives every (setting, replicate)'s ensemble so far; the last one's
    are the sweep's final scores."""
    cfg = sgrld.config.load_config(None, TINY)
    grid = parse_grid("sampler.learning_rate=[0.05, 0.1]", cfg)
    sweep = run_sweep(cfg, [grid], replicates=2, out=None)
    records = sweep.result.records
    assert [len(r["groups"]["test_log_likelihood"]) for r in records] == [4, 4]
    assert records[0]["groups"]["samples"] == [3, 3, 3, 3]
    last = records[-1]["groups"]
    for i, scores in enumerate(sweep.scores):
        for key in ("test_log_likelihood", "test_accuracy", "val_log_likelihood"):
            np.testing.assert_allclose(last[key][2 * i : 2 * i + 2], scores[key], rtol=1e-6)
    assert "groups" not in sgrld.from_config.run_config(cfg, out=None).records[0]
