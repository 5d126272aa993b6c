"""The scan/vmap sampling helper: shapes, chunking invariance, thinning, divergence reporting."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld


def identity_sampler(lr=0.1):
    t = sgrld.samples.targets.standard_normal()
    return t, sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=lr, num_data=1)


def test_chunking_does_not_change_samples():
    t, s = identity_sampler()
    kw = dict(num_samples=12, thin=3, burn_in=5, num_chains=2)
    one = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, **kw)
    many = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, num_chunks=5, **kw)
    np.testing.assert_array_equal(one.params, many.params)
    assert one.params.shape == (2, 12)
    assert int(one.state.step[0]) == 5 + 12 * 3


def test_thinning_keeps_every_thin_th_step():
    t, s = identity_sampler()
    thin = sgrld.sample(
        jax.random.key(0), s, t.init_params, t.batch_fn, num_samples=4, thin=3, burn_in=2
    )
    full = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, num_samples=14, thin=1)
    np.testing.assert_allclose(thin.params, full.params[np.array([4, 7, 10, 13])], rtol=1e-6)


def test_continue_from_state_equals_one_long_run():
    t, s = identity_sampler()
    long = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, num_samples=10)
    first = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, num_samples=4)
    second = sgrld.sample(jax.random.key(0), s, None, t.batch_fn, num_samples=6, state=first.state)
    np.testing.assert_allclose(
        jnp.concatenate([first.params, second.params]), long.params, rtol=1e-6
    )


@pytest.mark.parametrize("num_chunks", [1, 20])
def test_divergence_is_reported_with_samples_kept(num_chunks):
    # Repulsive, with a gradient that becomes NaN beyond x = 60 (step 11). With 20 chunks it
    # falls in the third (run again keeping the last finite state) and 17 chunks follow.
    potential = lambda w, b: -0.5 * w["x"] ** 2 + jnp.sqrt(60.0 - w["x"])
    s = sgrld.sgrld(potential, sgrld.metrics.identity(), learning_rate=0.5, num_data=1)
    params = {"x": jnp.asarray(1.0)}
    with pytest.raises(sgrld.DivergenceError, match=r"parameter \['x'\]") as err:
        sgrld.sample(
            jax.random.key(0), s, params, lambda k: None, num_samples=100, num_chunks=num_chunks
        )
    out = err.value.samples
    step = int(out.diverged_at)
    assert 0 < step < 100
    x = np.asarray(out.params["x"])
    assert np.all(np.isfinite(x))
    # frozen at the last finite
    assert np.all(x[step:] == x[step - 1]) and x[step - 2] != x[step - 1]
    assert "step" in str(err.value) and "learning_rate" in str(err.value)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(num_samples=0), "num_samples"),
        (dict(num_samples=3, thin=0), "thin"),
        (dict(num_samples=3, burn_in=-1), "burn_in"),
        (dict(num_samples=3, num_chains=0), "num_chains"),
    ],
)
def test_bad_arguments(kwargs, message):
    t, s = identity_sampler()
    with pytest.raises(ValueError, match=message):
        sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, **kwargs)


def test_minibatch_fn_checks_shapes():
    with pytest.raises(ValueError, match="leading dimension"):
        sgrld.minibatch_fn((jnp.zeros(5), jnp.zeros(4)), 2)
    with pytest.raises(ValueError, match="batch_size"):
        sgrld.minibatch_fn((jnp.zeros(5),), 6)
