"""Tests of the approximate-inference baselines (sgrld.samplers.baselines): SGD's exact steps,
vSGD's stationary spread, SWAG's moments, draws and rank check, MC dropout's thinned networks and
its training, and all of them on the engine."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.bnn import MLP, apply_fn, dropout, init_params, likelihoods
from sgrld.samplers import baselines
from sgrld.samplers.baselines.swag import SWAGMoments, collect, draw

QUADRATIC = lambda w, b: 0.5 * jnp.sum((w - b) ** 2)


def test_sgd_step_is_optax_sgd_with_momentum_and_weight_decay():
    """v ← μv + g + wd·θ, θ ← θ − lr·v, two steps by hand; the state keeps its type."""
    s = baselines.sgd(QUADRATIC, 0.1, momentum=0.5, weight_decay=0.2)
    state = s.init(jnp.array([1.0, -2.0]))
    step = jax.jit(s.step)
    w, v = np.array([1.0, -2.0]), np.zeros(2)
    for _ in range(2):
        new, info = step(jax.random.key(0), state, jnp.zeros(2))
        v = 0.5 * v + w + 0.2 * w
        w = w - 0.1 * v
        np.testing.assert_allclose(new.params, w, rtol=1e-6)
        assert jax.tree.structure(new) == jax.tree.structure(state)
        assert float(info.learning_rate) == pytest.approx(0.1) and bool(info.is_finite)
        state = new
    assert int(state.step) == 2


def test_sgd_refuses_bad_options():
    with pytest.raises(ValueError, match="momentum"):
        baselines.sgd(QUADRATIC, 0.1, momentum=1.0)
    with pytest.raises(ValueError, match="weight_decay"):
        baselines.sgd(QUADRATIC, 0.1, weight_decay=-1.0)
    with pytest.raises(ValueError, match="learning_rate"):
        baselines.sgd(QUADRATIC, -0.1)
    with pytest.raises(TypeError, match="constant"):
        baselines.vsgd(QUADRATIC, sgrld.numerics.schedules.polynomial(0.1))


@pytest.mark.statistical(seed=3)
def test_vsgd_iterates_have_the_ornstein_uhlenbeck_spread(stat_seed):
    """On ``Û/N = mean_b ½(x_i − w)²`` the iterates are an AR(1) process,
    ``w ← (1 − lr)w + lr·x̄_b``, with stationary variance ``lr·σ²/(b(2 − lr))`` (σ² the data's
    variance, sampling with replacement). 64 chains × 200 kept iterates (thin 10 ≫ the 1/lr = 5
    correlation time): the variance's relative standard error is about 0.013, the band ±8 %.

    False-failure probability: ≤ 1e-6 (6 standard errors).
    """
    x = jax.random.normal(jax.random.key(0), (128,))
    sigma2, lr, b = float(jnp.var(x)), 0.2, 4
    u = sgrld.potential(lambda w, batch: -0.5 * (batch - w) ** 2, None, num_data=128)
    batches = lambda key: x[jax.random.choice(key, 128, (b,))]
    out = sgrld.sample(
        jax.random.key(stat_seed), baselines.vsgd(u, lr), jnp.zeros(()), batches,
        num_samples=200, thin=10, burn_in=100, num_chains=64,
    )  # fmt: skip
    expected = lr * sigma2 / (b * (2 - lr))
    assert float(jnp.var(out.params)) == pytest.approx(expected, rel=0.08)


def test_swag_moments_are_those_of_the_collected_iterates():
    """Running means equal numpy's; D holds the last K deviations θ_i − θ̄_i in ring order."""
    rng = np.random.default_rng(0)
    thetas = rng.normal(size=(7, 3)).astype(np.float32)
    rank = 4
    m = SWAGMoments(jnp.int32(0), jnp.zeros(3), jnp.zeros(3), jnp.zeros((rank, 3), jnp.float32))
    for theta in thetas:
        m = collect(m, jnp.asarray(theta))
    np.testing.assert_allclose(m.mean, thetas.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.sq_mean, (thetas**2).mean(0), rtol=1e-5, atol=1e-6)
    deviations = [thetas[i] - thetas[: i + 1].mean(0) for i in range(7)]
    for i in range(3, 7):  # collection i sits in row i mod K
        np.testing.assert_allclose(m.deviations[i % rank], deviations[i], rtol=1e-5, atol=1e-6)
    assert int(m.count) == 7


@pytest.mark.statistical(seed=5)
def test_swag_draws_have_the_stated_covariance(stat_seed):
    """20,000 draws: covariance ``½Σ_diag + DDᵀ/(2(K−1))`` (entries within 0.05 of a covariance
    whose largest entry is about 2; an entry's standard error is at most ``√2·2/√20000 = 0.02``).

    False-failure probability: ≤ 1e-3 (2.5 standard errors on 6 entries, correlated).
    """
    rank = 3
    dev = jnp.array([[1.0, 0.5, 0.0], [0.0, 1.0, -1.0], [2.0, 0.0, 0.5]])
    mean, var = jnp.array([0.5, -1.0, 2.0]), jnp.array([0.4, 1.0, 0.1])
    m = SWAGMoments(jnp.int32(rank), {"w": mean}, {"w": var + mean**2}, {"w": dev})
    keys = jax.random.split(jax.random.key(stat_seed), 20_000)
    draws = np.asarray(jax.vmap(lambda k: draw(k, m)["w"])(keys))
    expected = np.diag(var) / 2 + np.asarray(dev.T @ dev) / (2 * (rank - 1))
    np.testing.assert_allclose(draws.mean(0), mean, atol=0.05)
    np.testing.assert_allclose(np.cov(draws.T), expected, atol=0.05)


def test_swag_rank_above_the_collected_iterates_is_refused():
    with pytest.raises(ValueError, match=r"rank 20 is above the number of collected iterates, 9"):
        baselines.swag(QUADRATIC, 0.1, train_steps=100, swa_start=10, collect_every=10)
    with pytest.raises(ValueError, match="rank must be an integer >= 2"):
        baselines.swag(QUADRATIC, 0.1, train_steps=100, swa_start=10, rank=1)
    with pytest.raises(ValueError, match="swa_start"):
        baselines.swag(QUADRATIC, 0.1, train_steps=100, swa_start=-1)


def test_swag_trains_then_draws_around_the_swa_mean():
    """Until ``train_steps`` the states are SGD's iterates (the same as :func:`sgd`'s); after it,
    independent draws whose mean is the SWA mean."""
    target = jnp.array([1.0, -1.0])
    batch_fn = lambda key: target + 0.3 * jax.random.normal(key, (2,))
    s = baselines.swag(QUADRATIC, 0.2, train_steps=200, swa_start=100, collect_every=2, rank=5)
    out = sgrld.sample(jax.random.key(0), s, jnp.zeros(2), batch_fn, num_samples=400, burn_in=200)
    assert int(out.state.moments.count) == 50
    draws = np.asarray(out.params)
    assert len(np.unique(draws[:, 0])) == 400  # every kept state is a new draw
    np.testing.assert_allclose(draws.mean(0), out.state.moments.mean, atol=0.05)
    sgd = sgrld.sample(jax.random.key(0), baselines.sgd(QUADRATIC, 0.2), jnp.zeros(2), batch_fn,
                       num_samples=1, burn_in=99)  # fmt: skip
    trained = sgrld.sample(jax.random.key(0), s, jnp.zeros(2), batch_fn, num_samples=1, burn_in=99)
    np.testing.assert_allclose(trained.params, sgd.params, rtol=1e-6)


def _net(features=(8,), inputs=3):
    return init_params(MLP(features, 1), jax.random.key(1), (1, inputs))


def test_thin_is_a_dropout_pass_through_the_plain_network():
    """The thinned network's output is the dropout forward pass with the masks its rows show:
    ``(relu(x W₀ + b₀) ⊙ m/(1 − p)) W₁ + b₁``; with ``drop_inputs`` the inputs' rows too."""
    net, rate = _net(), 0.5
    x = jax.random.normal(jax.random.key(2), (5, 3))
    thinned = dropout.thin(jax.random.key(3), net, rate)
    kernel, thin_kernel = net["Dense_1"]["kernel"], thinned["Dense_1"]["kernel"]
    mask = np.asarray(jnp.any(thin_kernel != 0, axis=1), np.float32)
    assert 0 < mask.sum() < len(mask)
    np.testing.assert_allclose(thin_kernel, kernel * (mask / (1 - rate))[:, None], rtol=1e-6)
    hidden = jax.nn.relu(x @ net["Dense_0"]["kernel"] + net["Dense_0"]["bias"])
    manual = (hidden * mask / (1 - rate)) @ kernel + net["Dense_1"]["bias"]
    np.testing.assert_allclose(MLP((8,), 1).apply({"params": thinned}, x), manual, rtol=1e-5)
    assert bool((thinned["Dense_0"]["kernel"] == net["Dense_0"]["kernel"]).all())
    first = net["Dense_0"]["kernel"]
    rows = np.stack([  # Dense_0's rows over 8 draws: each dropped (0) or scaled by 2
        dropout.thin(jax.random.key(k), net, rate, drop_inputs=True)["Dense_0"]["kernel"] / first
        for k in range(8)
    ])  # fmt: skip
    assert np.all(np.isclose(rows, 0.0) | np.isclose(rows, 2.0)) and np.isclose(rows, 0.0).any()
    with pytest.raises(ValueError, match="Dense_0, Dense_1"):
        dropout.thin(jax.random.key(0), {"conv": net["Dense_0"]}, rate)


def _dropout_loss(rate):
    model = dropout.DropoutMLP((8,), 1, rate, drop_inputs=True)
    make = lambda apply: sgrld.potential(likelihoods.gaussian(apply, 1.0), None, num_data=64)
    return dropout.dropout_loss(make, model), make(apply_fn(MLP((8,), 1)))


def test_mc_dropout_trains_like_sgd_then_draws_thinned_networks():
    """With p = 0 the dropout loss is the plain one, so training is SGD's step for step; after
    ``train_steps`` every state is a thinned copy of the trained network."""
    x = jax.random.normal(jax.random.key(0), (64, 3))
    batch_fn = lambda key: (x, x[:, 0] - x[:, 1])
    params = {"net": _net()}
    loss0, plain = _dropout_loss(0.0)
    s0 = dropout.mc_dropout(loss0, 0.05, train_steps=30, rate=0.0)
    trained = sgrld.sample(jax.random.key(1), s0, params, batch_fn, num_samples=1, burn_in=29)
    sgd = sgrld.sample(jax.random.key(1), baselines.sgd(plain, 0.05), params, batch_fn,
                       num_samples=1, burn_in=29)  # fmt: skip
    for a, b in zip(jax.tree.leaves(trained.params), jax.tree.leaves(sgd.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    loss, _ = _dropout_loss(0.2)
    s = dropout.mc_dropout(loss, 0.05, train_steps=30, rate=0.2, drop_inputs=True)
    out = sgrld.sample(jax.random.key(1), s, params, batch_fn, num_samples=6, burn_in=30)
    final = out.state.trained["net"]["Dense_1"]["kernel"]
    kernels = np.asarray(out.params["net"]["Dense_1"]["kernel"])[..., 0]
    for k in kernels:  # each row: dropped or scaled by 1/(1 − p)
        ratio = k / np.asarray(final)[:, 0]
        assert np.all(np.isclose(ratio, 0.0) | np.isclose(ratio, 1.25)), ratio
    assert len({tuple(k != 0) for k in kernels}) > 1


def test_mc_dropout_refuses_bad_input():
    loss, _ = _dropout_loss(0.1)
    with pytest.raises(ValueError, match="rate"):
        dropout.mc_dropout(loss, 0.1, train_steps=10, rate=1.0)
    with pytest.raises(ValueError, match="train_steps"):
        dropout.mc_dropout(loss, 0.1, train_steps=0, rate=0.1)
    with pytest.raises(ValueError, match='"net"'):
        dropout.mc_dropout(loss, 0.1, train_steps=10, rate=0.1).init(jnp.zeros(3))
