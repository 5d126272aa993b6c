"""SGRLD in every metric: vmapped chains, the T = 0 limit, the noise covariance, the metric frozen
after adapt_until, schedules and the drift fallback (the contract:
tests/samplers/test_contract.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from tests.helpers import METRICS, adapted_state, dense, small_params

CONFIGS = (
    [(name, None) for name in sorted(METRICS)]
    + [(name, "hutchinson") for name in sorted(METRICS) if name != "identity"]
    + [("adam_sgld", None), ("monge", "parts")]
)


def quartic_potential(num_data=10):
    """A non-Gaussian per-datum potential on the small_params tree (data: a [B, 2] batch)."""

    def loglik(params, batch):
        w, b, s = params["w"], params["b"], params["s"]
        pred = batch[:, :1] @ w[:1, :2] + b + s * batch[:, 1:]
        return -0.5 * jnp.sum((pred - 1.0) ** 2, axis=1) - 0.1 * jnp.sum(w**4)

    return sgrld.potential(
        loglik, lambda p: -0.5 * sum(jnp.sum(x**2) for x in jax.tree.leaves(p)), num_data
    )


def batch(seed=0, size=5):
    return jax.random.normal(jax.random.key(seed), (size, 2))


def make(name, correction, **kw):
    """A sampler of the contract: sgrld(...), Adam-SGLD, or one assembled from parts."""
    kw.setdefault("learning_rate", 0.05)
    if name == "adam_sgld":
        return sgrld.adam_sgld(quartic_potential(), num_data=10, **kw)
    if correction == "parts":  # exact Γ, a drift limit and an injected noise draw
        return sgrld.samplers.sampler.riemannian_langevin(
            quartic_potential(),
            METRICS[name](),
            num_data=10,
            correction=sgrld.parts.correction.exact(warmup=0),
            integrator=sgrld.parts.integrators.euler_maruyama(
                noise_fn=sgrld.numerics.noise.normal_like
            ),
            max_drift_norm=1e3,
            **kw,
        )
    return sgrld.sgrld(
        quartic_potential(), METRICS[name](), num_data=10, correction=correction, **kw
    )


def init_params():
    return jax.tree.map(lambda x: x + 0.3, small_params())


@pytest.mark.parametrize("name,correction", CONFIGS)
def test_vmap_over_chains_equals_single_chains(name, correction):
    sampler = make(name, correction)
    states = jax.vmap(sampler.init)(
        jax.tree.map(lambda x: jnp.stack([x, x + 0.1, x - 0.2]), init_params())
    )
    keys = jax.random.split(jax.random.key(0), 3)
    batched, _ = jax.jit(jax.vmap(sampler.step, in_axes=(0, 0, None)))(keys, states, batch())
    for c in range(3):
        single, _ = jax.jit(sampler.step)(
            keys[c], jax.tree.map(lambda x, c=c: x[c], states), batch()
        )
        for a, b in zip(
            jax.tree.leaves(single.params), jax.tree.leaves(batched.params), strict=True
        ):
            np.testing.assert_allclose(a, b[c], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_temperature_zero_is_preconditioned_gradient_step(name):
    sampler = make(name, "hutchinson", temperature=0.0, learning_rate=0.05)
    metric = METRICS[name]()
    potential = quartic_potential()
    params = init_params()
    state = sampler.init(params)
    step = jax.jit(sampler.step)  # compiled once for its four steps
    for k in range(3):
        state, _ = step(jax.random.key(k), state, batch(k))
    new, _ = step(jax.random.key(9), state, batch(9))

    @jax.jit  # the reference step: one compilation, not dispatched op by op
    def reference(state, b):
        g = jax.grad(potential)(state.params, b)
        ms = metric.update(state.metric_state, g)
        return jax.tree.map(lambda x, d: x - 0.05 * d, state.params, metric.inv(ms, g))

    expected = reference(state, batch(9))
    for a, b in zip(jax.tree.leaves(new.params), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.statistical(seed=0)
@pytest.mark.parametrize("name", sorted(METRICS))
def test_noise_covariance_at_zero_gradient(name, stat_seed):
    """Cov(Δθ) = 2·h·T·G⁻¹ with h = lr/N, for a frozen metric and a flat potential.

    Every entry within 5 standard errors of the Wishart spread (n = 40,000 draws: near normal).
    False-failure probability: ≤ 2.6e-5 per metric (45 distinct entries of the symmetric 9 × 9
    covariance at 5σ).
    """
    lr, num_data, temperature, n = 0.3, 10, 2.0, 40_000
    flat = lambda params, b: (
        0.0 * jnp.sum(b) + sum(0.0 * jnp.sum(x) for x in jax.tree.leaves(params))
    )
    metric = METRICS[name]()
    params = small_params()
    metric_state, _ = adapted_state(metric, params, num_updates=4)
    sampler = sgrld.sgrld(
        flat, metric, learning_rate=lr, num_data=num_data, temperature=temperature, adapt_until=0
    )
    state = sampler.init(params)._replace(metric_state=metric_state)
    keys = jax.random.split(jax.random.key(stat_seed), n)
    moved, _ = jax.jit(jax.vmap(sampler.step, in_axes=(0, None, None)))(keys, state, batch())
    delta = np.asarray(
        jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(moved.params), np.float64
    )
    cov = delta.T @ delta / n  # the mean is exactly 0
    expected = (
        2 * lr / num_data * temperature * dense(lambda v: metric.inv(metric_state, v), params)
    )
    se = np.sqrt((np.outer(np.diag(expected), np.diag(expected)) + expected**2) / n)
    assert np.all(np.abs(cov - expected) < 5 * se + 1e-9), np.max(np.abs(cov - expected) / se)


def test_info_reports_nonfinite_leaf():
    sampler = make("identity", None)
    params = init_params()
    params["b"] = params["b"].at[0].set(jnp.nan)
    _, info = sampler.step(jax.random.key(0), sampler.init(params), batch())
    assert not bool(info.is_finite)
    names = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
    assert names[int(info.nonfinite_leaf)] == "['b']"


def test_adapt_until_freezes_metric():
    sampler = make("rmsprop", "hutchinson", adapt_until=2, correction_warmup=0)
    state = sampler.init(init_params())
    infos = []
    for k in range(4):
        state, info = sampler.step(jax.random.key(k), state, batch(k))
        infos.append(info)
    assert int(state.metric_state.count) == 2
    assert float(infos[1].gamma_norm) > 0 and float(infos[3].gamma_norm) == 0


def test_adapt_until_over_vmapped_chains_matches_single_chains():
    """Chains at different steps (one adapting, one frozen) step exactly as they would alone, and
    the vmapped step keeps a real branch (not a select that runs both paths for every chain)."""
    sampler = make("rmsprop", "hutchinson", adapt_until=2, correction_warmup=0)
    params = init_params()
    states = [sampler.init(params), sampler.init(params)._replace(step=jnp.int32(2))]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *states)
    keys = jax.random.split(jax.random.key(3), 2)
    step = jax.vmap(sampler.step, in_axes=(0, 0, None))
    assert "cond[" in str(jax.make_jaxpr(step)(keys, stacked, batch()))
    new, info = step(keys, stacked, batch())
    for c in range(2):
        alone, alone_info = sampler.step(keys[c], states[c], batch())
        jax.tree.map(
            lambda a, b, c=c: np.testing.assert_allclose(a[c], b, rtol=1e-5, atol=1e-7),
            (new, info),
            (alone, alone_info),
        )
    assert float(info.gamma_norm[0]) > 0 and float(info.gamma_norm[1]) == 0


def test_schedule_learning_rate():
    sampler = make("identity", None, learning_rate=lambda t: 0.1 / (1.0 + t))
    state = sampler.init(init_params())
    _, info0 = sampler.step(jax.random.key(0), state, batch())
    state = state._replace(step=jnp.asarray(9, jnp.int32))
    _, info9 = sampler.step(jax.random.key(0), state, batch())
    np.testing.assert_allclose([info0.learning_rate, info9.learning_rate], [0.1, 0.01], rtol=1e-6)


def test_max_drift_norm_fallback_is_scaled_identity():
    potential = quartic_potential()
    sampler = sgrld.sgrld(
        potential,
        sgrld.metrics.monge(),
        learning_rate=0.1,
        num_data=10,
        temperature=0.0,
        max_drift_norm=1e-3,
    )
    state = sampler.init(init_params())
    new, info = sampler.step(jax.random.key(0), state, batch())
    g = jax.grad(potential)(state.params, batch())
    norm = float(jnp.sqrt(sum(jnp.sum(x**2) for x in jax.tree.leaves(g))))
    assert bool(info.drift_fallback)
    expected = jax.tree.map(lambda x, d: x - 0.1 * 1e-3 / norm * d, state.params, g)
    for a, b in zip(jax.tree.leaves(new.params), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
