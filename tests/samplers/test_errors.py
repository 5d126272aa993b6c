"""Bad input gets a clear error at construction or trace time, not a traceback from inside JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import sgrld

LOGLIK = lambda w, batch: -0.5 * (batch[1] - w * batch[0]) ** 2
POTENTIAL = sgrld.potential(LOGLIK, lambda w: -0.5 * w**2, num_data=10)


@pytest.mark.parametrize("lr", [-0.1, 0.0, float("nan"), float("inf")])
def test_bad_learning_rate(lr):
    with pytest.raises(ValueError, match="learning_rate"):
        sgrld.sgrld(POTENTIAL, sgrld.metrics.identity(), learning_rate=lr, num_data=10)


def test_bad_schedule():
    with pytest.raises(ValueError, match="schedule"):
        sgrld.sgrld(POTENTIAL, sgrld.metrics.identity(), learning_rate=lambda t: -1.0, num_data=10)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(num_data=0), "num_data"),
        (dict(num_data=11), "differs from the potential"),
        (dict(temperature=-1.0), "temperature"),
        (dict(adapt_until=-3), "adapt_until"),
        (dict(max_drift_norm=0.0), "max_drift_norm"),
        (dict(correction_warmup=-1), "correction_warmup"),
    ],
)
def test_bad_sampler_arguments(kwargs, message):
    kw = dict(num_data=10) | kwargs
    with pytest.raises(ValueError, match=message):
        sgrld.sgrld(POTENTIAL, sgrld.metrics.identity(), learning_rate=0.1, **kw)


def test_not_a_metric():
    with pytest.raises(TypeError, match="Metric"):
        sgrld.sgrld(POTENTIAL, "rmsprop", learning_rate=0.1, num_data=10)


def test_prior_out_of_metric_needs_a_potential():
    with pytest.raises(TypeError, match="prior_in_metric"):
        sgrld.sgrld(
            lambda p, b: jnp.sum(p**2),
            sgrld.metrics.rmsprop(),
            learning_rate=0.1,
            num_data=10,
            prior_in_metric=False,
        )


def test_non_floating_parameters():
    s = sgrld.sgrld(POTENTIAL, sgrld.metrics.identity(), learning_rate=0.1, num_data=10)
    with pytest.raises(TypeError, match=r"\['n'\].*int32"):
        s.init({"w": jnp.zeros(3), "n": jnp.zeros(3, jnp.int32)})


def test_batch_of_wrong_shape():
    s = sgrld.sgrld(POTENTIAL, sgrld.metrics.identity(), learning_rate=0.1, num_data=10)
    state = s.init(jnp.zeros(()))
    with pytest.raises(ValueError, match="leading"):
        s.step(jax.random.key(0), state, (jnp.zeros(4), jnp.zeros(5)))


def test_loglik_must_be_per_example():
    summed = sgrld.potential(lambda w, b: jnp.sum(LOGLIK(w, b)), None, num_data=10)
    s = sgrld.sgrld(summed, sgrld.metrics.identity(), learning_rate=0.1, num_data=10)
    with pytest.raises(ValueError, match=r"shape \[batch\]"):
        s.step(jax.random.key(0), s.init(jnp.zeros(())), (jnp.zeros(4), jnp.zeros(4)))


def test_potential_must_be_scalar():
    s = sgrld.sgrld(
        lambda w, b: w * jnp.ones(2),
        sgrld.metrics.identity(),
        learning_rate=0.1,
        num_data=10,
    )
    with pytest.raises(TypeError):  # jax.grad refuses non-scalar outputs with a clear message
        s.step(jax.random.key(0), s.init(jnp.zeros(())), None)


def test_prior_out_of_metric_uses_likelihood_gradient_only():
    """With prior_in_metric=False, RMSprop's statistic is built from the likelihood gradient."""
    s = sgrld.sgrld(
        POTENTIAL,
        sgrld.metrics.rmsprop(decay=0.0),
        learning_rate=0.1,
        num_data=10,
        prior_in_metric=False,
    )
    batch = (jnp.ones(2), jnp.ones(2))
    state, _ = s.step(jax.random.key(0), s.init(jnp.asarray(3.0)), batch)
    g_lik = jax.grad(POTENTIAL.likelihood_term)(jnp.asarray(3.0), batch)
    assert float(state.metric_state.stat) == pytest.approx(float(g_lik) ** 2)
