"""The rules both ``learning_rate="auto"`` criteria share (:mod:`sgrld.chains.rate_choice`): the
search past the grid's edge, the back-off from a diverged rate across grids, and the halving's
one-standard-error rule (:func:`sgrld.chains.rate_halving.within_one_error`)."""

from __future__ import annotations

import numpy as np
import pytest

from sgrld.chains import rate_choice
from sgrld.chains.rate_halving import within_one_error


def test_the_search_stops_at_the_edge_it_came_from_and_after_its_extensions():
    calls = []

    def search_fn(rates, best_rate):
        calls.append(rates)
        best = int(np.argmin([abs(np.log(r / best_rate)) for r in rates]))
        return rate_choice.chosen(rates, tuple(range(len(rates))), best, 32), best

    # the best rate is far above: two extensions, then a warning at the edge
    with pytest.warns(RuntimeWarning, match="at the edge of the rates tried"):
        choice, _ = rate_choice.search_beyond_edges(lambda r: search_fn(r, 1e6), (9.0, 3.0, 1.0))
    assert len(calls) == 3 and choice.learning_rate == 729.0 and choice.at_edge
    # the extension chooses the shared rate (its lower edge): no search back down
    calls.clear()
    choice, _ = rate_choice.search_beyond_edges(lambda r: search_fn(r, 9.0), (9.0, 3.0, 1.0))
    assert len(calls) == 2 and choice.learning_rate == 9.0 and not choice.at_edge


def test_a_diverged_extension_leaves_the_choice_at_the_edge():
    def search_fn(rates):
        if rates[0] > 9.0:
            raise FloatingPointError("every rate tried diverged")
        return rate_choice.chosen(rates, (0.0, 1.0, 2.0), 0, 32), None

    with pytest.warns(RuntimeWarning, match="at the edge"):
        choice, _ = rate_choice.search_beyond_edges(search_fn, (9.0, 3.0, 1.0))
    assert choice.learning_rate == 9.0 and choice.candidates == (9.0, 3.0, 1.0)


def test_a_choice_next_to_a_diverged_rate_past_the_edge_backs_off_one_grid_step():
    """The first grid's largest rate wins; past it every rate diverges, so the edge rate is the
    only one of the second grid left: it is next to a divergence, and the choice is the rate
    below it, from the first grid."""

    def search_fn(rates):
        scores = tuple(np.inf if r > 9.0 else 1.0 / r for r in rates)  # larger is better
        best = int(np.argmin(scores))
        return rate_choice.chosen(rates, scores, best, 32), None

    choice, _ = rate_choice.search_beyond_edges(search_fn, (9.0, 3.0, 1.0))
    assert choice.candidates == (81.0, 27.0, 9.0, 3.0, 1.0)
    assert choice.learning_rate == 3.0 and not choice.at_edge


def test_one_standard_error_rule_prefers_the_smaller_rate_only_within_the_error():
    rng = np.random.default_rng(0)
    base = rng.normal(1.0, 0.5, size=400)  # per-point losses of the best rate (index 0)
    near = base + rng.normal(0.01, 0.3, size=400)  # 0.01 worse, se of the difference 0.015
    far = base + rng.normal(0.2, 0.3, size=400)  # 0.2 worse: 13 se
    assert within_one_error(0, [0, 1], np.stack([base, near])) == 1
    assert within_one_error(0, [0, 1], np.stack([base, far])) == 0
    assert within_one_error(1, [0, 1], np.stack([base, near])) == 1  # never a larger rate
    with_nan = np.stack([base, np.where(np.arange(400) == 3, np.nan, near)])
    assert within_one_error(0, [0, 1], with_nan) == 0  # a diverged point is no tie
