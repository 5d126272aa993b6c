"""``sgrld diagnose`` of a run whose chains diverged: only the draws that are samples are
diagnosed, and the output says which were left out (issue 38); no traceback, no NumPy warning."""

from __future__ import annotations

import numpy as np
import pytest

from sgrld.samples.diagnostics import valid_part
from sgrld.samples.results import ResultsError, RunSamples
from sgrld_app import cli
from tests.samples.test_arviz import TINY


def run_of(valid: np.ndarray) -> RunSamples:
    chains, draws = valid.shape
    values = np.arange(chains * draws, dtype=float).reshape(chains, draws)
    return RunSamples(np.arange(draws), valid, values, {"potential": values}, ["w"])


def test_every_chain_diverged_keeps_the_draws_before_the_first_divergence():
    valid = np.ones((2, 10), bool)
    valid[0, 7:], valid[1, 5:] = False, False
    kept, note = valid_part(run_of(valid))
    assert kept.params.shape == (2, 5) and kept.valid.all() and len(kept.step) == 5
    assert kept.stats["potential"].tolist() == [[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]]
    assert note == (
        "chain 0 diverged after draw 7 of 10, chain 1 diverged after draw 5 of 10: every chain "
        "diverged; diagnosed the first 5 draws of each"
    )


def test_too_few_valid_draws_are_refused_and_a_clean_run_is_kept_whole():
    valid = np.ones((2, 10), bool)
    valid[:, 2:] = False
    with pytest.raises(ResultsError, match="the first after 2 draw"):
        valid_part(run_of(valid))
    whole = run_of(np.ones((3, 6), bool))
    assert valid_part(whole) == (whole, None)


def test_diagnose_of_a_diverged_run_says_so_without_a_traceback(tmp_path, capsys, recwarn):
    out = tmp_path / "diverged"
    assert cli.main(["run", *sum((["--set", s] for s in TINY), []), "--set",
                     "sampler.learning_rate=1000", "--out", str(out)]) == 1  # fmt: skip
    capsys.readouterr()
    code = cli.main(["diagnose", str(out), "--no-ksd"])
    text = capsys.readouterr()
    assert "Traceback" not in text.err and "RuntimeWarning" not in text.err
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    if code == 0:
        assert "every chain diverged; diagnosed the first" in text.out
    else:  # diverged before 4 draws: refused in one line
        assert code == 2 and "too few to diagnose" in text.err
