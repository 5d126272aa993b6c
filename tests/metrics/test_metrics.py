"""Each metric's G⁻¹ and G^{-1/2} against dense matrices built independently with numpy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import sgrld
from sgrld.metrics.shampoo import block_plan, from_blocks, to_blocks
from sgrld.numerics.linalg import power_from_eigh, power_tangent, ridged_eigh, ridged_eighs
from tests.helpers import METRICS, adapted_state, dense, small_params


def ema(values, decay, start):
    s = start
    for v in values:
        s = decay * s + (1 - decay) * v
    return s


def flat(tree):
    return np.asarray(ravel_pytree(tree)[0], np.float64)


def sym_power(mat, p):
    lam, q = np.linalg.eigh(mat)
    return (q * lam**p) @ q.T


@pytest.mark.parametrize("name", sorted(METRICS))
def test_inv_sqrt_twice_is_inv(name):
    metric = METRICS[name]()
    params = small_params()
    state, _ = adapted_state(metric, params)
    g_inv = dense(lambda v: metric.inv(state, v), params)
    a = dense(lambda v: metric.inv_sqrt(state, v), params)
    np.testing.assert_allclose(a @ a.T, g_inv, rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(g_inv, g_inv.T, rtol=1e-4, atol=1e-6)
    assert np.linalg.eigvalsh(g_inv).min() > 0


def test_identity_dense():
    metric = sgrld.metrics.identity()
    params = small_params()
    state, _ = adapted_state(metric, params)
    np.testing.assert_array_equal(dense(lambda v: metric.inv(state, v), params), np.eye(9))


def test_rmsprop_dense():
    metric = sgrld.metrics.rmsprop(decay=0.9, eps=1e-3)
    params = small_params()
    state, grads = adapted_state(metric, params)
    v = ema([flat(g) ** 2 for g in grads], 0.9, np.zeros(9))
    expected = np.diag(1 / (np.sqrt(v) + 1e-3))
    np.testing.assert_allclose(dense(lambda x: metric.inv(state, x), params), expected, rtol=1e-5)


def test_wenzel_dense_and_refresh_period():
    metric = sgrld.metrics.wenzel(decay=0.9, eps=1e-3, update_every=2)
    params = small_params()
    state, grads = adapted_state(metric, params, num_updates=5)
    # Refreshes after updates 2 and 4: the scales are those of the EMA after 4 updates.
    leaves = jax.tree.leaves(params)
    v4 = [
        ema([np.asarray(jax.tree.leaves(g)[i], np.float64) ** 2 for g in grads[:4]], 0.9, 1.0)
        for i in range(len(leaves))
    ]
    sigma = np.array([np.sqrt(1e-3 + np.mean(v)) for v in v4])
    scale = sigma.min() / sigma
    expected = np.concatenate([np.full(x.size, s) for x, s in zip(leaves, scale, strict=True)])
    np.testing.assert_allclose(
        np.diag(dense(lambda x: metric.inv(state, x), params)), expected, rtol=1e-5
    )
    fresh = metric.init(params)
    np.testing.assert_array_equal(dense(lambda x: metric.inv(fresh, x), params), np.eye(9))


def test_monge_dense():
    metric = sgrld.metrics.monge(alpha2=0.7, decay=0.8)
    params = small_params()
    state, grads = adapted_state(metric, params)
    m = ema([flat(g) for g in grads], 0.8, np.zeros(9))
    g = np.eye(9) + 0.7 * np.outer(m, m)
    np.testing.assert_allclose(
        dense(lambda x: metric.inv(state, x), params), np.linalg.inv(g), rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(
        dense(lambda x: metric.inv_sqrt(state, x), params), sym_power(g, -0.5), rtol=1e-5, atol=1e-7
    )


def test_monge_at_alpha2_zero_is_the_identity_and_takes_no_gamma():
    """α² = 0 is G = I: the factory gives the identity (no statistic), so a sampler under
    ``correction="auto"`` computes no Γ and steps as SGLD, bit for bit; a traced α² (a sweep's
    per-chain value) keeps Monge's form, whose step at 0 is the same."""
    metric = sgrld.metrics.monge(alpha2=0.0)
    assert metric.statistic is None
    u = lambda p, batch: 0.5 * jnp.sum(jnp.square(p - batch))  # noqa: E731
    params, key = jnp.arange(3.0), jax.random.key(0)
    zero = sgrld.sgrld(u, metric, learning_rate=0.1, num_data=1, adapt_until=10)
    assert zero.adaptation.correction == "none"
    sgld = sgrld.sgrld(u, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
    step = lambda s: s.step(key, s.init(params), jnp.ones(3))[0].params  # noqa: E731
    np.testing.assert_array_equal(step(zero), step(sgld))
    traced = jax.jit(lambda a: sgrld.metrics.monge(alpha2=a).inv(
        sgrld.metrics.monge(alpha2=a).init(params), params))(0.0)
    np.testing.assert_array_equal(traced, params)


def test_monge_zero_momentum_is_identity_and_finite():
    metric = sgrld.metrics.monge(alpha2=1.0)
    params = small_params()
    state = metric.init(params)  # m = 0: the paper's f_{-1/2} divides by ||m||^2
    np.testing.assert_array_equal(dense(lambda x: metric.inv_sqrt(state, x), params), np.eye(9))


def shampoo_reference(grads_2d, decay, eps, row_blocks, col_blocks, num_rows, num_cols):
    """Dense G⁻¹ and G^{-1/2} of Shampoo on a matrix, block by block, with numpy."""
    d = num_rows * num_cols
    inv, inv_sqrt = np.zeros((d, d)), np.zeros((d, d))
    for rows in row_blocks:
        for cols in col_blocks:
            blocks = [g[np.ix_(rows, cols)] for g in grads_2d]
            left = ema([b @ b.T for b in blocks], decay, eps * np.eye(len(rows)))
            right = ema([b.T @ b for b in blocks], decay, eps * np.eye(len(cols)))
            factors = []
            for h in (left, right):
                lam, q = np.linalg.eigh(h)
                lam = np.maximum(lam, 0) + eps * lam.max()
                factors.append((q, lam))
            idx = (np.asarray(rows)[:, None] * num_cols + np.asarray(cols)[None, :]).ravel()
            for out, p in ((inv, -0.25), (inv_sqrt, -0.125)):
                (ql, ll), (qr, lr) = factors
                out[np.ix_(idx, idx)] = np.kron((ql * ll**p) @ ql.T, (qr * lr**p) @ qr.T)
    return inv, inv_sqrt


def partition(n, num_blocks):
    size = -(-n // num_blocks)
    return [list(range(i, min(i + size, n))) for i in range(0, n, size)]


@pytest.mark.parametrize(
    "shape,block_size,merged,num_blocks",
    [((5, 7), 4, (5, 7), (2, 2)), ((2, 3, 10), 8, (6, 10), (1, 2)), ((4, 6), 5, (4, 6), (1, 2))],
)
def test_shampoo_dense_blocked_and_merged(shape, block_size, merged, num_blocks):
    plan = block_plan(shape, block_size)
    assert plan.merged == merged and plan.num_blocks == num_blocks
    decay, eps = 0.8, 1e-3
    metric = sgrld.metrics.shampoo(decay=decay, eps=eps, update_every=1, block_size=block_size)
    params = jnp.zeros(shape, jnp.float32)
    state, grads = adapted_state(metric, params, num_updates=4)
    r, c = merged
    grads_2d = [np.asarray(g, np.float64).reshape(r, c) for g in grads]
    inv, inv_sqrt = shampoo_reference(
        grads_2d, decay, eps, partition(r, num_blocks[0]), partition(c, num_blocks[1]), r, c
    )
    np.testing.assert_allclose(
        dense(lambda x: metric.inv(state, x), params), inv, rtol=2e-3, atol=1e-4
    )
    np.testing.assert_allclose(
        dense(lambda x: metric.inv_sqrt(state, x), params), inv_sqrt, rtol=2e-3, atol=1e-4
    )


def test_shampoo_vector_is_blockwise_full_matrix_rmsprop():
    decay, eps = 0.8, 1e-3
    metric = sgrld.metrics.shampoo(decay=decay, eps=eps, update_every=1, block_size=4)
    params = jnp.zeros((7,), jnp.float32)
    state, grads = adapted_state(metric, params, num_updates=6)
    expected = np.zeros((7, 7))
    for idx in partition(7, 2):
        h = ema(
            [np.outer(np.asarray(g)[idx], np.asarray(g)[idx]) for g in grads],
            decay,
            eps * np.eye(len(idx)),
        )
        lam, q = np.linalg.eigh(h)
        lam = np.maximum(lam, 0) + eps * lam.max()
        expected[np.ix_(idx, idx)] = (q * lam**-0.5) @ q.T
    np.testing.assert_allclose(
        dense(lambda x: metric.inv(state, x), params), expected, rtol=2e-3, atol=1e-4
    )


def test_shampoo_identity_before_first_refresh_and_own_counter():
    metric = sgrld.metrics.shampoo(update_every=3)
    params = jnp.zeros((3, 3))
    state, _ = adapted_state(metric, params, num_updates=2)
    np.testing.assert_array_equal(dense(lambda x: metric.inv(state, x), params), np.eye(9))
    state = metric.update(state, jnp.ones((3, 3)))
    assert int(state.count) == 3
    assert not np.allclose(dense(lambda x: metric.inv(state, x), params), np.eye(9))


@pytest.mark.parametrize("name", ["shampoo", "wenzel"])
def test_refresh_stays_a_branch_under_vmap(name):
    """Over vmapped chains the periodic refresh is a ``cond``, not a ``select`` of both branches.

    (A ``select`` would run Shampoo's eigendecompositions for every chain at every step.) The
    chains' states after 5 updates with period 3 equal those of unbatched updates, also when the
    chains' counters differ (chain 1 starts one update ahead, so they are due at different steps).
    """
    make = {"shampoo": sgrld.metrics.shampoo, "wenzel": sgrld.metrics.wenzel}[name]
    metric = make(update_every=3)
    params = {"w": jnp.zeros((3, 4)), "b": jnp.zeros(4)}
    chains = 2
    grads = jax.tree.map(
        lambda x: jax.random.normal(jax.random.key(0), (5, chains, *x.shape)), params
    )
    states = jax.vmap(metric.init)(jax.tree.map(lambda x: jnp.stack([x] * chains), params))
    states = states._replace(count=jnp.arange(chains, dtype=jnp.int32))
    update = jax.vmap(metric.update)
    jaxpr = jax.make_jaxpr(update)(states, jax.tree.map(lambda g: g[0], grads))
    assert "cond[" in str(jaxpr)
    batched, unbatched = jax.jit(update), jax.jit(metric.update)  # each compiled once
    for t in range(5):
        states = batched(states, jax.tree.map(lambda g, t=t: g[t], grads))
    for c in range(chains):
        single = metric.init(params)._replace(count=jnp.int32(c))
        for t in range(5):
            single = unbatched(single, jax.tree.map(lambda g, t=t, c=c: g[t, c], grads))
        jax.tree.map(
            lambda a, b, c=c: np.testing.assert_allclose(a[c], b, rtol=1e-5, atol=1e-6),
            states,
            single,
        )


def test_small_matrix_merges_into_one_factor():
    assert block_plan((4, 6), 128).merged == (24,)
    assert block_plan((5, 5, 1, 32), 128).merged == (25, 32)


def test_blocks_round_trip():
    x = jnp.arange(2 * 3 * 10, dtype=jnp.float32).reshape(2, 3, 10)
    plan = block_plan(x.shape, 8)
    blocks = to_blocks(x, plan)
    assert blocks.shape == (1, 2, 6, 5)
    np.testing.assert_array_equal(from_blocks(blocks, plan), x)


@pytest.mark.parametrize("spectrum", [[4.0, 1.0, 0.25], [2.0, 2.0, 2.0], [9.0, 9.0, 1e-3]])
def test_matrix_power_known_spectrum(spectrum):
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))
    lam = np.array(spectrum)
    h = jnp.asarray((q * lam) @ q.T, jnp.float32)
    qq, ll, ok = ridged_eigh(h, eps=0.0)
    assert bool(ok)
    for p in (-0.25, -0.125, -0.5):
        np.testing.assert_allclose(
            power_from_eigh(qq, ll, p), (q * lam**p) @ q.T, rtol=2e-3, atol=1e-4
        )


def test_matrix_power_zero_block_stays_finite():
    q, lam, ok = ridged_eigh(jnp.zeros((1, 4, 4)), eps=1e-8)
    root = power_from_eigh(q, lam, -0.25)
    assert bool(ok.all()) and bool(jnp.all(jnp.isfinite(root)))


def test_daleckii_krein_against_finite_differences():
    rng = np.random.default_rng(1)
    with jax.enable_x64(True):
        for spectrum in ([3.0, 1.0, 0.5, 0.1], [2.0, 2.0, 1.0, 1.0]):
            q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
            h = (q * np.array(spectrum)) @ q.T
            e = rng.normal(size=(4, 4))
            e = e + e.T
            qq, ll, _ = ridged_eigh(jnp.asarray(h), eps=0.0)
            t = 1e-6
            numeric = (sym_power(h + t * e, -0.25) - sym_power(h - t * e, -0.25)) / (2 * t)
            np.testing.assert_allclose(
                power_tangent(qq, ll, -0.25, jnp.asarray(e)), numeric, rtol=1e-5, atol=1e-7
            )


def test_daleckii_krein_includes_the_ridge_derivative():
    """At eps > 0 the map is ``H ↦ (H + eps·λ_max(H)·I)^p``; its derivative includes the ridge's.

    Central differences of that map in float64 (λ_max simple, so it is differentiable). Without the
    ridge term the tangent is off by about ``eps·|p|·λ^{p−1}·q_maxᵀ E q_max`` (asserted below).
    """
    rng = np.random.default_rng(2)
    eps, p = 0.1, -0.25

    def ridged_power(h):
        lam = np.linalg.eigvalsh(h)
        return sym_power(h + eps * lam[-1] * np.eye(len(h)), p)

    with jax.enable_x64(True):
        q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
        h = (q * np.array([3.0, 1.0, 0.5, 0.1])) @ q.T
        e = rng.normal(size=(4, 4))
        e = e + e.T
        qq, ll, _ = ridged_eigh(jnp.asarray(h), eps=eps)
        t = 1e-6
        numeric = (ridged_power(h + t * e) - ridged_power(h - t * e)) / (2 * t)
        tangent = power_tangent(qq, ll, p, jnp.asarray(e), eps)
        np.testing.assert_allclose(tangent, numeric, rtol=1e-5, atol=1e-7)
        no_ridge_term = power_tangent(qq, ll, p, jnp.asarray(e), 0.0)
        assert np.abs(no_ridge_term - numeric).max() > 1e-3


def test_ridged_eighs_equal_separate_decompositions():
    rng = np.random.default_rng(3)
    mats = []
    for shape in [(3, 5, 5), (2, 4, 4), (1, 1)]:
        a = rng.normal(size=shape)
        mats.append(jnp.asarray(a @ np.swapaxes(a, -1, -2), jnp.float32))
    for (q, lam, ok), mat in zip(ridged_eighs(mats, 1e-3), mats, strict=True):
        q0, lam0, ok0 = ridged_eigh(mat, 1e-3)
        np.testing.assert_array_equal(lam, lam0)
        np.testing.assert_array_equal(q, q0)
        np.testing.assert_array_equal(ok, ok0)


def test_shampoo_root_fallback_keeps_previous_roots():
    metric = sgrld.metrics.shampoo(update_every=1, block_size=8)
    params = jnp.zeros((3, 3))
    state, _ = adapted_state(metric, params, num_updates=3)
    before = dense(lambda x: metric.inv(state, x), params)
    bad = metric.update(state, jnp.full((3, 3), jnp.nan))
    assert int(bad.fallbacks) == 2  # both Kronecker factors kept their roots
    np.testing.assert_array_equal(dense(lambda x: metric.inv(bad, x), params), before)


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: sgrld.metrics.rmsprop(decay=1.0), "decay"),
        (lambda: sgrld.metrics.monge(decay=-0.1), "decay"),
        (lambda: sgrld.metrics.shampoo(decay=float("nan")), "decay"),
        (lambda: sgrld.metrics.wenzel(update_every=0), "update_every"),
        (lambda: sgrld.metrics.rmsprop(eps=-1.0), "eps"),
        (lambda: sgrld.metrics.monge(alpha2=-1.0), "alpha2"),
        (lambda: sgrld.metrics.shampoo(block_size=0), "block_size"),
    ],
)
def test_bad_hyperparameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()


REFRESH_SCRIPT = """
import jax, sgrld
shapes = {"w1": (784, 400), "b1": (400,), "w2": (400, 400), "b2": (400,), "w3": (400, 10)}
params = {k: jax.random.normal(jax.random.key(i), s) for i, (k, s) in enumerate(shapes.items())}
metric = sgrld.metrics.shampoo(update_every=1, block_size=128)
state, update = metric.init(params), jax.jit(metric.update)
for i in range(20):
    state = jax.block_until_ready(update(state, jax.tree.map(lambda x: x * (1 + i), params)))
print("fallbacks", int(state.fallbacks))
"""


@pytest.mark.long
def test_shampoo_refresh_of_many_factors_does_not_deadlock():
    """A refresh of an MLP's factors in one jitted call returns (a subprocess, so a hang fails).

    Before ``ridged_eighs`` ran the batched eighs one after the other, XLA's CPU runtime ran
    several at once and, on a 2-core machine, deadlocked in the first call (3 of 3 runs).
    """
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", REFRESH_SCRIPT], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "fallbacks 0" in done.stdout
