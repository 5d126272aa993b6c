"""The whitening map of every metric (:attr:`sgrld.metrics.Metric.whiten`, or ``inv_sqrt`` where
it is ``None``) is the transpose of its noise factor A, against dense matrices: ``A·whiten =
G⁻¹``, so a frozen drift clipped in those coordinates is ``G⁻¹g`` wherever the clip does not bind
(:func:`sgrld.parts.preconditioning.clip_drift`)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import METRICS, adapted_state, dense, small_params
from tests.metrics.test_fisher import METRICS as FISHER
from tests.metrics.test_fisher import classifier, random_state
from tests.metrics.test_fisher import dense as fisher_dense


def _check(metric, state, as_dense):
    a = as_dense(metric.inv_sqrt, state)
    whiten = as_dense(metric.whiten or metric.inv_sqrt, state)
    np.testing.assert_allclose(whiten, a.T, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(a @ whiten, as_dense(metric.inv, state), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_whiten_is_the_factors_transpose(name):
    metric, params = METRICS[name](), small_params()
    state, _ = adapted_state(metric, params)
    _check(metric, state, lambda op, s: dense(lambda v: op(s, v), params))


@pytest.mark.parametrize("kind", sorted(FISHER))
def test_fisher_whiten_is_the_factors_transpose(kind):
    """QDOP's and the full Fisher's factors are not symmetric: their ``whiten`` is not None."""
    _, params, _ = classifier()
    metric = FISHER[kind](eps=0.1, decay=0.0)
    assert (metric.whiten is None) == (kind == "diag")
    state = random_state(kind, metric, params)
    _check(metric, state, lambda op, s: fisher_dense(op, s, params))
