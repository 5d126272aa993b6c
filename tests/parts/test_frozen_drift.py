"""A frozen metric's drift clipped to the step's noise (``frozen_drift_limit``): the formula per
coordinate, nothing clipped without noise or with no limit, the argument's errors, the clip only
after the freeze, and a freeze that blows a chain up unclipped and keeps it bounded clipped."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.metrics.metric import freeze
from sgrld.parts.preconditioning import FROZEN_DRIFT_SDS, clip_drift


def test_drift_step_is_clipped_at_the_limit_times_the_noise():
    """Per leaf noise scales (SGHMC's) on the identity metric; a zero noise (T = 0) clips
    nothing."""
    m = sgrld.metrics.identity()
    g = {"a": jnp.array([1e6, -1e6, 0.5]), "b": jnp.array([5.0])}
    noise = {"a": jnp.float32(0.1), "b": jnp.float32(0.0)}
    out, clipped = clip_drift(m, m.init(g), g, g, jnp.float32(0.01), noise, 3.0)
    np.testing.assert_allclose(0.01 * out["a"], [0.3, -0.3, 0.005], rtol=1e-5)
    assert float(out["b"][0]) == 5.0 and bool(clipped)


def test_a_dense_metric_is_clipped_along_its_whitened_directions():
    """Monge (rank one, not diagonal): the clipped drift is ``G^{−1/2}·clip(G^{−1/2}g)``, its
    whitened step within the bound; a loose limit returns ``G⁻¹g`` bit for bit."""
    m = sgrld.metrics.monge(alpha2=4.0, decay=0.0)
    g = jnp.array([3.0, -1.0, 0.5, 2.0])
    state = m.update(m.init(g), g)
    drift = m.inv(state, g)
    same, clipped = clip_drift(m, state, drift, g, 1.0, 1.0, 1e6)
    assert not bool(clipped)
    np.testing.assert_array_equal(same, drift)
    out, clipped = clip_drift(m, state, drift, g, 1.0, 1.0, 0.1)
    w = np.asarray(m.inv_sqrt(state, g))
    assert bool(clipped) and np.abs(w).max() > 0.1 > np.abs(w).min()  # binds on some only
    expected = m.inv_sqrt(state, jnp.asarray(np.clip(w, -0.1, 0.1)))
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def _frozen_tiny(limit, steps=200):
    """A standard normal target (N = 1) sampled by RMSprop frozen at step 0 with V = 10⁻¹²: the
    unclipped step θ − lr·θ/√(V + ε) overshoots a thousandfold; returns θ's path."""
    potential = sgrld.potential(lambda w, b: 0.0 * b, lambda w: -0.5 * jnp.sum(w**2), 1)
    metric = sgrld.metrics.rmsprop(eps=1e-8)
    s = sgrld.sgrld(
        potential,
        metric,
        learning_rate=0.1,
        num_data=1,
        adapt_until=0,
        frozen_drift_limit=limit,
    )
    state = s.init(jnp.ones(3))
    state = state._replace(
        metric_state=freeze(metric, state.metric_state, jnp.full(3, 1e-12, jnp.float32))
    )
    step = jax.jit(s.step)
    path, fallbacks = [], 0
    for t in range(steps):
        state, info = step(jax.random.key(t), state, jnp.zeros(1))
        path.append(np.asarray(state.params))
        fallbacks += int(info.drift_fallback)
    sigma = np.sqrt(2 * 0.1) * np.asarray(metric.inv_sqrt(state.metric_state, jnp.ones(3)))
    return np.array(path), fallbacks, sigma


def test_a_freeze_at_a_tiny_statistic_blows_up_unclipped_and_stays_bounded_clipped():
    """Clipped at L noise sds σ (σ = √(2·lr)·G^{−1/2} ≈ 450), θ stays within 2Lσ of 0 (each
    step moves it Lσ back to 0 and σ at random); unclipped, the step multiplies θ by about
    −10⁵ and θ is not finite within 200 steps."""
    path, _, _ = _frozen_tiny(None)
    assert not np.all(np.isfinite(path))
    path, fallbacks, sigma = _frozen_tiny(FROZEN_DRIFT_SDS)
    assert np.all(np.isfinite(path)) and np.all(np.abs(path) < 2 * FROZEN_DRIFT_SDS * sigma)
    assert fallbacks > 100  # the clip bound, and info says so


def test_clip_acts_only_after_the_freeze():
    """Frozen after 3 steps, a tight limit leaves the first 3 steps bit-identical and changes the
    later ones."""
    potential = sgrld.potential(lambda w, b: -0.5 * jnp.sum((b - w) ** 2, -1), None, 4)
    kw = dict(learning_rate=0.5, num_data=4, adapt_until=3)
    paths = []
    for limit in (None, 1e-3):
        s = sgrld.sgrld(potential, sgrld.metrics.rmsprop(), frozen_drift_limit=limit, **kw)
        state, path = s.init(jnp.zeros(2)), []
        for t in range(5):
            state, _ = s.step(jax.random.key(t), state, jnp.ones((2, 2)))
            path.append(np.asarray(state.params))
        paths.append(np.array(path))
    np.testing.assert_array_equal(paths[0][:3], paths[1][:3])
    assert np.all(paths[0][3:] != paths[1][3:])


def test_frozen_drift_limit_errors():
    potential = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, None, 4)
    build = partial(sgrld.sgrld, potential, sgrld.metrics.rmsprop(), learning_rate=0.1, num_data=4)
    for bad in (0.0, -1.0, "1", True, float("nan")):
        with pytest.raises(ValueError, match="frozen_drift_limit must be"):
            build(frozen_drift_limit=bad)
