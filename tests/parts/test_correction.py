"""The Γ correction: Hutchinson's estimate against the exact trace and against jax.jacfwd."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import sgrld
from sgrld.parts import correction as corr
from tests.helpers import METRICS, adapted_state, random_tree
from tests.samplers.test_sampler import batch, init_params, quartic_potential

ADAPTIVE = [name for name in sorted(METRICS) if name != "identity"]


def reference_gamma(metric, metric_state, grad_fn, params):
    """Γ_i = Σ_j ∂_j (G⁻¹)_ij of the limiting metric F(S_t + s(g(θ')) − s(g(θ))), by jax.jacfwd."""
    flat, unravel = ravel_pytree(params)
    s0 = metric.statistic(grad_fn(params))

    def dense_inv(theta_flat):
        s = metric.statistic(grad_fn(unravel(theta_flat)))
        stat = jax.tree.map(lambda a, b, c: a + b - c, metric_state.stat, s, s0)
        st = metric_state._replace(stat=stat)
        return jax.vmap(lambda e: ravel_pytree(metric.inv(st, unravel(e)))[0])(jnp.eye(flat.size)).T

    jac = jax.jit(jax.jacfwd(dense_inv))(flat)  # [i, j, k] = ∂_k (G⁻¹)_ij; one compilation
    return np.asarray(jnp.einsum("ijj->i", jac), np.float64)


@pytest.mark.parametrize("name", ADAPTIVE)
def test_exact_step_adds_reference_gamma(name):
    """End to end: (step with "exact") − (step without) = c·(lr/N)·T·Γ, Γ from jax.jacfwd."""
    potential = quartic_potential(num_data=10)
    lr, temperature, scale = 1.0, 1.5, 0.7
    kw = dict(learning_rate=lr, num_data=10, temperature=temperature, correction_warmup=0)
    plain = sgrld.sgrld(potential, METRICS[name](), correction="none", **kw)
    exact = sgrld.sgrld(
        potential, METRICS[name](), correction="exact", correction_scale=scale, **kw
    )
    state = plain.init(init_params())
    plain_step = jax.jit(plain.step)  # compiled once for its four steps
    for k in range(3):  # adapt the statistic to the path first
        state, _ = plain_step(jax.random.key(k), state, batch(k))
    b = batch(7)
    without, _ = plain_step(jax.random.key(5), state, b)
    with_gamma, info = jax.jit(exact.step)(jax.random.key(5), state, b)
    gamma = (ravel_pytree(with_gamma.params)[0] - ravel_pytree(without.params)[0]) / (
        scale * lr / 10 * temperature
    )
    grad_fn = lambda p: jax.grad(potential)(p, b)
    reference = reference_gamma(METRICS[name](), with_gamma.metric_state, grad_fn, state.params)
    assert np.abs(reference).max() > 1e-2  # the test has something to detect
    np.testing.assert_allclose(gamma, reference, rtol=2e-3, atol=2e-3 * np.abs(reference).max())
    np.testing.assert_allclose(float(info.gamma_norm), np.linalg.norm(reference), rtol=2e-3)


@pytest.mark.statistical(seed=0)
@pytest.mark.parametrize("name", ADAPTIVE)
def test_hutchinson_mean_matches_exact_trace(name, stat_seed):
    """The mean of Γ̂ over 4,000 Rademacher probes is the exact-trace Γ.

    False-failure probability: ≤ 5.2e-6 per metric (9 components at 5 standard errors; means of
    4,000 bounded probes, near normal).
    """
    metric = METRICS[name]()
    potential = quartic_potential(num_data=10)
    params = init_params()
    b = batch(3)
    grad_fn = lambda p: jax.grad(potential)(p, b)
    metric_state, _ = adapted_state(metric, params, num_updates=3)
    g = jax.jit(grad_fn)(params)
    metric_state = jax.jit(metric.update)(metric_state, g)
    hvp = lambda z: jax.jvp(grad_fn, (params,), (z,))[1]

    def gamma(z, reduce):
        return corr.gamma_from_probes(metric, metric_state, g, z, jax.vmap(hvp)(z), reduce=reduce)

    exact = jax.jit(lambda z: ravel_pytree(gamma(z, "sum"))[0])(corr.basis_like(params))
    n = 4000
    z = corr.rademacher_like(jax.random.key(stat_seed), params, n)
    per_probe = jax.jit(
        jax.vmap(lambda z1: ravel_pytree(gamma(jax.tree.map(lambda x: x[None], z1), "mean"))[0])
    )(z)
    mean, se = per_probe.mean(0), per_probe.std(0) / np.sqrt(n)
    np.testing.assert_allclose(
        exact, reference_gamma(metric, metric_state, grad_fn, params), rtol=2e-3, atol=1e-4
    )
    assert np.all(np.abs(mean - exact) <= 5 * se + 1e-6), np.max(np.abs(mean - exact) / se)
    assert np.any(se > 0)  # probes do vary (not an exact identity by accident)


def test_one_dimensional_closed_forms():
    """RMSprop and Monge Γ by hand in 1-D: U = θ⁴/4 + θ²/2, so g = θ³ + θ and g′ = 3θ² + 1."""
    theta, decay, eps, alpha2, g_prev = 0.8, 0.9, 0.1, 2.0, 0.5
    g, dg = theta**3 + theta, 3 * theta**2 + 1
    potential = lambda p, b: 0.25 * p**4 + 0.5 * p**2
    # RMSprop: S_t = EMA of g², F(S) = 1/(√S + eps), Γ = F′(S_t)·2g·g′
    s = decay * (1 - decay) * g_prev**2 + (1 - decay) * g**2
    rmsprop = -1 / (2 * np.sqrt(s) * (np.sqrt(s) + eps) ** 2) * 2 * g * dg
    # Monge: m_t = EMA of g, F(m) = 1/(1 + α²m²), Γ = F′(m_t)·g′
    m = decay * (1 - decay) * g_prev + (1 - decay) * g
    monge = -2 * alpha2 * m / (1 + alpha2 * m**2) ** 2 * dg
    cases = [
        (sgrld.metrics.rmsprop(decay, eps), rmsprop),
        (sgrld.metrics.monge(alpha2, decay), monge),
    ]
    for metric, expected in cases:
        with_gamma = sgrld.sgrld(
            potential,
            metric,
            learning_rate=1.0,
            num_data=1,
            correction="exact",
            correction_warmup=0,
        )
        without = sgrld.sgrld(potential, metric, learning_rate=1.0, num_data=1)
        state = with_gamma.init(jnp.asarray(theta))
        state = state._replace(metric_state=metric.update(state.metric_state, jnp.asarray(g_prev)))
        a, _ = with_gamma.step(jax.random.key(0), state, None)
        b, _ = without.step(jax.random.key(0), state, None)
        np.testing.assert_allclose(float(a.params - b.params), expected, rtol=1e-4)


def test_correction_scale_zero_equals_none_and_is_linear():
    potential = quartic_potential()
    outs = {}
    for scale in (0.0, 0.5, 1.0):
        s = sgrld.sgrld(
            potential,
            sgrld.metrics.monge(),
            learning_rate=0.5,
            num_data=10,
            correction="hutchinson",
            correction_scale=scale,
            correction_warmup=0,
        )
        state = s.init(init_params())
        outs[scale] = ravel_pytree(s.step(jax.random.key(1), state, batch())[0].params)[0]
    none = sgrld.sgrld(potential, sgrld.metrics.monge(), learning_rate=0.5, num_data=10)
    base = ravel_pytree(none.step(jax.random.key(1), none.init(init_params()), batch())[0].params)[
        0
    ]
    np.testing.assert_array_equal(outs[0.0], base)
    np.testing.assert_allclose(outs[1.0] - base, 2 * (outs[0.5] - base), rtol=1e-3, atol=1e-7)
    assert np.abs(outs[1.0] - base).max() > 1e-4


def test_bad_correction_arguments():
    potential = quartic_potential()
    with pytest.raises(ValueError, match="correction"):
        sgrld.sgrld(
            potential, sgrld.metrics.monge(), learning_rate=0.1, num_data=10, correction="hutch"
        )
    with pytest.raises(ValueError, match="num_probes"):
        sgrld.sgrld(
            potential,
            sgrld.metrics.monge(),
            learning_rate=0.1,
            num_data=10,
            correction="hutchinson",
            num_probes=0,
        )


def test_correction_waits_for_the_metric_warmup():
    potential = quartic_potential()
    metric = sgrld.metrics.rmsprop(decay=0.9)
    assert metric.warmup == 30
    sampler = sgrld.sgrld(
        potential, metric, learning_rate=0.01, num_data=10, correction="hutchinson"
    )
    state = sampler.init(init_params())
    step = jax.jit(sampler.step)  # one compilation, not 32 steps dispatched op by op
    norms = []
    for k in range(32):
        state, info = step(jax.random.key(k), state, batch(k))
        norms.append(float(info.gamma_norm))
    assert all(n == 0 for n in norms[:30]) and norms[30] > 0 and norms[31] > 0


@pytest.mark.parametrize("block_size", [3, 128])
def test_shampoo_fast_tangent_equals_the_composed_derivatives(block_size):
    """Shampoo's eigenbasis ``inv_grad_tangent`` = the generic jvp(statistic) then inv_tangent.

    Leaves cover padded blocks (7 = 3 + 3 + 1), merged dimensions, a 3-factor tensor, a vector
    and a scalar, with roots refreshed from a statistic that has distinct eigenvalues.
    """
    metric = sgrld.metrics.shampoo(decay=0.5, eps=1e-3, update_every=1, block_size=block_size)
    params = {
        "w": jnp.zeros((5, 7)),
        "conv": jnp.zeros((4, 2, 3, 5)),
        "b": jnp.zeros((6,)),
        "s": jnp.zeros(()),
    }
    state, grads = adapted_state(metric, params, num_updates=4)
    v, dg = (random_tree(k, params) for k in jax.random.split(jax.random.key(1)))
    g = grads[-1]

    @jax.jit  # each side one compilation, not dispatched op by op
    def composed_fn(state, v, g, dg):
        _, dstat = jax.jvp(metric.statistic, (g,), (dg,))
        return ravel_pytree(sgrld.metrics.inv_tangent(metric, state, v, dstat))[0]

    composed = composed_fn(state, v, g, dg)
    fast = jax.jit(lambda *a: ravel_pytree(metric.inv_grad_tangent(*a))[0])(state, v, g, dg)
    assert float(jnp.abs(composed).max()) > 1e-2
    np.testing.assert_allclose(
        fast, composed, rtol=1e-4, atol=1e-4 * float(jnp.abs(composed).max())
    )


@pytest.mark.parametrize("name", ["monge", "rmsprop"])
def test_auto_correction_is_gamma_before_the_freeze_for_monge_only(name):
    """``correction="auto"`` (the default) steps as ``"hutchinson"`` while Monge adapts before a
    freeze, and as ``"none"`` for every other metric and once frozen; Monge's Γ moves the step."""
    potential = quartic_potential(num_data=10)
    kw = dict(learning_rate=1.0, num_data=10, correction_warmup=0, adapt_until=2)
    make = lambda mode: sgrld.sgrld(potential, METRICS[name](), correction=mode, **kw)  # noqa: E731
    default, gamma, plain = make("auto"), make("hutchinson"), make("none")
    state = default.init(init_params())
    flat = lambda s: np.asarray(ravel_pytree(s.params)[0])  # noqa: E731
    for step in range(3):  # two adapting steps, then one frozen
        key, b = jax.random.key(step), batch(step)
        out = flat(jax.jit(default.step)(key, state, b)[0])
        expected = gamma if name == "monge" and step < 2 else plain
        np.testing.assert_array_equal(out, flat(jax.jit(expected.step)(key, state, b)[0]))
        if name == "monge" and step < 2:
            assert np.abs(out - flat(jax.jit(plain.step)(key, state, b)[0])).max() > 1e-6
        state = jax.jit(plain.step)(key, state, b)[0]
