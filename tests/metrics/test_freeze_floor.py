"""The frozen statistic's floor (:func:`sgrld.metrics.metric.freeze`): a coordinate whose statistic
was near 0 at the freeze steps no further than the adapting metric would for a gradient of its
leaf's typical size."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.metrics.metric import freeze, new_observation_weight


def test_rmsprop_frozen_step_is_bounded_like_the_adapting_one():
    """V = (0, 4) frozen: the first coordinate's V is floored at (1 − decay)·mean V = 0.02, so a
    gradient of the leaf's typical size (2) moves it lr·2/√0.02 = 14·lr, the adapting metric's
    bound lr/√(1 − decay) = 10·lr for that gradient up to the mean's factor √2, not lr·2/1e-8."""
    m = sgrld.metrics.rmsprop(decay=0.99)
    state = freeze(m, m.init(jnp.zeros(2)), jnp.array([0.0, 4.0]))
    np.testing.assert_allclose(state.stat, [0.02, 4.0], rtol=1e-6)
    step = m.inv(state, jnp.array([2.0, 2.0]))
    assert float(step[0]) == pytest.approx(2.0 / np.sqrt(0.02), rel=1e-4)
    assert float(step[1]) == pytest.approx(1.0, rel=1e-6)  # above the floor: unchanged


def test_inverse_sqrt_floor_is_the_next_weight():
    m = sgrld.metrics.fisher_diag(decay=sgrld.metrics.INVERSE_SQRT, eps=0.0)
    state = m.init(jnp.zeros(3))._replace(count=jnp.int32(99))
    assert float(new_observation_weight(m, state)) == pytest.approx(0.1)
    frozen = freeze(m, state, jnp.array([0.0, 3.0, 6.0]))
    np.testing.assert_allclose(frozen.stat, [0.3, 3.0, 6.0], rtol=1e-6)


def test_qdiag_floor_raises_the_diagonal_only():
    m = sgrld.metrics.fisher_qdiag(decay=0.9)
    params = {"Dense_0": {"bias": jnp.zeros(1), "kernel": jnp.zeros((2, 1))}}
    initial = m.init(params).stat
    diag = {"Dense_0": {"bias": jnp.array([2.0]), "kernel": jnp.array([[0.0], [10.0]])}}
    stat = initial._replace(diag=diag, cross=tuple(jnp.ones_like(c) for c in initial.cross))
    frozen = freeze(m, m.init(params), stat).stat
    np.testing.assert_allclose(frozen.diag["Dense_0"]["kernel"], [[0.5], [10.0]], rtol=1e-6)
    np.testing.assert_allclose(frozen.diag["Dense_0"]["bias"], [2.0], rtol=1e-6)
    np.testing.assert_array_equal(frozen.cross[0], np.ones_like(frozen.cross[0]))


def test_full_floor_is_a_ridge_on_the_mean_diagonal():
    m = sgrld.metrics.fisher_full(decay=0.5, eps=0.0)
    stat = jnp.array([[4.0, 2.0], [2.0, 0.0]])
    frozen = freeze(m, m.init(jnp.zeros(2)), stat)
    np.testing.assert_allclose(frozen.stat, [[5.0, 2.0], [2.0, 1.0]], rtol=1e-6)
    assert np.all(np.linalg.eigvalsh(np.asarray(frozen.stat)) > 0)


@pytest.mark.parametrize("metric", ["identity", "monge", "wenzel", "shampoo"])
def test_metrics_without_a_floor_freeze_as_they_are(metric):
    m = getattr(sgrld.metrics, metric)()
    state = m.init(jnp.ones((3, 2)))
    assert m.floor is None
    frozen = freeze(m, state, state.stat)
    for a, b in zip(jax.tree.leaves(frozen.stat), jax.tree.leaves(state.stat), strict=True):
        np.testing.assert_array_equal(a, b)
