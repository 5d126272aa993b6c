"""Likelihoods: exact per-example log-likelihoods and trace-time shape validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from sgrld.bnn import likelihoods


def linear(net, x):
    """A plain apply function (no Flax): likelihoods must not assume our models."""
    return x @ net["w"] + net["b"]


def linear_params(num_in, num_out, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "w": jnp.asarray(rng.normal(size=(num_in, num_out)), jnp.float32),
        "b": jnp.asarray(rng.normal(size=num_out), jnp.float32),
    }


def test_categorical_equals_log_softmax():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 3)).astype(np.float32)
    y = np.array([0, 3, 1, 4, 2, 0])
    params = {"net": linear_params(3, 5), "prior": {}}
    got = jax.jit(likelihoods.categorical(linear))(params, (x, y))
    logits = x.astype(np.float64) @ params["net"]["w"] + params["net"]["b"]
    log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    assert got.shape == (6,) and got.dtype == jnp.float32
    np.testing.assert_allclose(got, log_softmax[np.arange(6), y], rtol=1e-5, atol=1e-6)


def test_categorical_out_of_range_labels_give_nan():
    params = {"net": linear_params(2, 3)}
    got = jax.jit(likelihoods.categorical(linear))(
        params, (jnp.ones((3, 2)), jnp.array([3, -1, 2]))
    )
    assert np.isnan(got[0]) and np.isnan(got[1]) and np.isfinite(got[2])


@pytest.mark.parametrize(
    ("logits_shape", "y", "match"),
    [
        ((4, 3), np.zeros(5, np.int32), r"shape \[batch\] = \(4,\)"),
        ((4, 3), np.zeros((4, 1), np.int32), r"shape \[batch\] = \(4,\)"),
        ((4, 3), np.zeros(4, np.float32), "integer class labels"),
        ((4, 3, 2), np.zeros(4, np.int32), "logits of shape"),
        ((4,), np.zeros(4, np.int32), "logits of shape"),
    ],
)
def test_categorical_validation(logits_shape, y, match):
    loglik = likelihoods.categorical(lambda net, x: jnp.zeros(logits_shape))
    with pytest.raises(ValueError, match=match):
        jax.jit(loglik)({"net": {}}, (np.zeros((4, 2)), y))


def test_gaussian_fixed_noise_matches_scipy():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=5).astype(np.float32)
    params = {"net": linear_params(3, 1)}
    got = jax.jit(likelihoods.gaussian(linear, noise_std=0.3))(params, (x, y))
    mean = (x.astype(np.float64) @ params["net"]["w"] + params["net"]["b"])[:, 0]
    assert got.shape == (5,)
    np.testing.assert_allclose(got, stats.norm.logpdf(y, mean, 0.3), rtol=1e-5)


@pytest.mark.parametrize("y_shape", [(5,), (5, 1)])
@pytest.mark.parametrize("num_out", [None, 1])
def test_gaussian_sampled_noise_matches_scipy(y_shape, num_out):
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(5, 3)), rng.normal(size=y_shape)
    w = rng.normal(size=3)

    def apply(net, x):  # predictions [B] or [B, 1]
        mean = x @ net
        return mean if num_out is None else mean[:, None]

    params = {"net": w, "prior": {}, "likelihood": {"log_noise": np.log(0.7)}}
    with jax.enable_x64(True):
        got = jax.jit(likelihoods.gaussian(apply))(params, (x, y))
    assert got.shape == (5,)
    np.testing.assert_allclose(got, stats.norm.logpdf(y.reshape(5), x @ w, 0.7), rtol=1e-12)


def test_gaussian_noise_gradient():
    params = {"net": jnp.zeros(1), "likelihood": likelihoods.init_likelihood_params()}
    assert params["likelihood"]["log_noise"].dtype == jnp.float32
    loglik = likelihoods.gaussian(lambda net, x: x @ net)
    batch = (jnp.zeros((2, 1)), jnp.array([1.0, 2.0]))
    grads = jax.grad(lambda p: jnp.sum(loglik(p, batch)))(params)
    # d/d log sigma of sum log N(y; 0, sigma^2) at sigma = 1 is sum(y^2) - B = 3.
    np.testing.assert_allclose(grads["likelihood"]["log_noise"], 3.0, rtol=1e-6)


@pytest.mark.parametrize(
    ("pred_shape", "y_shape", "match"),
    [
        ((4,), (3,), r"targets y of shape \[batch\] or \[batch, 1\] with batch = 4"),
        ((4, 2), (4,), "predictions of shape"),
        ((4, 1, 1), (4,), "predictions of shape"),
        ((4,), (4, 2), "targets y of shape"),
        ((1,), (4,), "predictions of shape"),
    ],
)
def test_gaussian_validation(pred_shape, y_shape, match):
    loglik = likelihoods.gaussian(lambda net, x: jnp.zeros(pred_shape), noise_std=1.0)
    with pytest.raises(ValueError, match=match):
        jax.jit(loglik)({"net": {}}, (np.zeros((4, 2)), np.zeros(y_shape)))


def test_gaussian_sampled_noise_needs_log_noise():
    loglik = likelihoods.gaussian(linear)
    with pytest.raises(ValueError, match="log_noise"):
        loglik({"net": linear_params(2, 1)}, (np.zeros((3, 2)), np.zeros(3)))


@pytest.mark.parametrize("noise_std", [0.0, -1.0])
def test_gaussian_rejects_nonpositive_noise(noise_std):
    with pytest.raises(ValueError, match="noise_std"):
        likelihoods.gaussian(linear, noise_std=noise_std)
