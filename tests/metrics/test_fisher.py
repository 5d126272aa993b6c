"""The Fisher metrics (DOP, QDOP, full) and their per-example statistics.

* The fast path (:mod:`sgrld.numerics.jaxpr_taps`; every framework in
  ``tests/numerics/test_jaxpr_taps.py``) and the vmap(grad) fallback give the statistics of
  brute-force per-example gradients (to float32 rounding).
* G⁻¹ and G^{-1/2} against dense matrices: QDOP's C⁻¹ has the diagonal and first row of J + εI in
  each block (Alg. 4), and A Aᵀ = C.
* Γ from the exact trace equals ``jax.jacfwd`` of the dense G⁻¹(θ), also where that G⁻¹(θ) is
  built from brute-force per-example gradients instead of the fast path; with model labels, the
  mean of Γ̂ over label draws equals the derivative of the expected statistic (5 standard errors,
  fixed seeds: a false failure has probability < 1e-5 per entry under normal errors).
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import sgrld
from sgrld.bnn import likelihoods
from sgrld.bnn.convolutions import conv_layer
from sgrld.bnn.models import MLP, apply_fn, init_params
from sgrld.numerics.per_example import FallbackWarning, QuasiDiagonal, bias_pairs, observation_fn
from sgrld.numerics.tap_statistics import along
from sgrld.parts.correction import basis_like, gamma_from_probes
from sgrld.parts.gradients import gradient_fn
from tests.helpers import cpu_env, exact_gamma_against_jacfwd

B = 6


def classifier(seed=0, num_outputs=3):
    model = MLP(features=(3,), num_outputs=num_outputs)
    params = {"net": init_params(model, jax.random.key(seed), (1, 2))}
    loglik = likelihoods.categorical(apply_fn(model))
    k1, k2 = jax.random.split(jax.random.key(seed + 1))
    batch = (jax.random.normal(k1, (B, 2)), jax.random.randint(k2, (B,), 0, num_outputs))
    prior = lambda p: -0.5 * sum(jnp.sum(x**2) for x in jax.tree.leaves(p))
    return sgrld.potential(loglik, prior, num_data=20), params, batch


def brute_grads(loglik, params, batch):
    """[B, ...] per-example gradients by vmap(grad), leaf by leaf."""
    one = lambda p, x, y: loglik(p, (x[None], y[None]))[0]
    return jax.jit(jax.vmap(jax.grad(one), in_axes=(None, 0, 0)))(params, *batch)


@partial(jax.jit, static_argnums=0)
def expected_statistic(kind, grads):
    leaves = jax.tree.leaves(grads)
    diag = jax.tree.map(lambda g: jnp.mean(g**2, 0), grads)
    if kind == "diag":
        return diag
    if kind == "full":
        flat = jnp.concatenate([g.reshape(B, -1) for g in leaves], 1)
        return flat.T @ flat / B
    pairs = bias_pairs(jax.tree.map(lambda g: g[0], grads))
    cross = tuple(
        jnp.mean(leaves[k] * along(leaves[b], 1, leaves[k].ndim - 1, axis), 0)
        for k, b, axis in pairs
    )
    return QuasiDiagonal(diag, cross)


@pytest.mark.parametrize("kind", ["diag", "qdiag", "full"])
def test_statistics_match_per_example_gradients(kind):
    potential, params, batch = classifier()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # the MLP is all on the fast path
        value, g, stat = jax.jit(observation_fn(kind, "empirical")(potential))(params, batch, None)
    ref_value, ref_g = jax.jit(jax.value_and_grad(potential))(params, batch)
    np.testing.assert_allclose(value, ref_value, rtol=1e-6)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(ref_g), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    expected = expected_statistic(kind, brute_grads(potential.loglik_fn, params, batch))
    for a, b in zip(jax.tree.leaves(stat), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_fallback_leaves_warn_and_match():
    """A Gaussian likelihood's sampled noise level is not a Dense parameter: it falls back."""
    model = MLP(features=(3,), num_outputs=1)
    params = {
        "net": init_params(model, jax.random.key(0), (1, 2)),
        "likelihood": likelihoods.init_likelihood_params(0.3),
    }
    loglik = likelihoods.gaussian(apply_fn(model))
    potential = sgrld.potential(loglik, None, num_data=10)
    batch = (
        jax.random.normal(jax.random.key(1), (B, 2)),
        jax.random.normal(jax.random.key(2), (B,)),
    )
    with pytest.warns(FallbackWarning, match="log_noise"):
        _, _, stat = observation_fn("qdiag", "empirical")(potential)(params, batch, None)
    expected = expected_statistic("qdiag", brute_grads(loglik, params, batch))
    for a, b in zip(jax.tree.leaves(stat), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_a_plain_functions_product_is_on_the_fast_path_and_a_subtracted_bias_is_not():
    loglik = lambda p, b: -0.5 * (b[1] - b[0] @ p["kernel"] - p["bias"]) ** 2
    params = {"bias": jnp.array(0.5), "kernel": jnp.array([1.0, -2.0])}
    potential = sgrld.potential(loglik, None, num_data=10)
    batch = (jax.random.normal(jax.random.key(1), (B, 2)), jnp.zeros(B))
    with pytest.warns(FallbackWarning, match=r"of \['bias'\] use"):
        _, _, stat = observation_fn("diag", "empirical")(potential)(params, batch, None)
    expected = expected_statistic("diag", brute_grads(loglik, params, batch))
    for a, b in zip(jax.tree.leaves(stat), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def random_state(kind, metric, params, seed=0):
    """A state (decay 0) whose statistic is that of random per-example gradients, so PSD."""
    flat, unravel = ravel_pytree(params)
    grads = jax.vmap(unravel)(jax.random.normal(jax.random.key(seed), (B, flat.size)))
    grads = jax.tree.map(
        lambda g: g * (1.0 + jnp.arange(g[0].size).reshape(g.shape[1:]) % 3), grads
    )
    return metric.update(metric.init(params), expected_statistic(kind, grads))


def dense(op, state, params):
    flat, unravel = ravel_pytree(params)
    eye = jnp.eye(flat.size)
    return np.asarray(jax.vmap(lambda e: ravel_pytree(op(state, unravel(e)))[0])(eye).T, np.float64)


METRICS = {
    "diag": sgrld.metrics.fisher_diag,
    "qdiag": sgrld.metrics.fisher_qdiag,
    "full": sgrld.metrics.fisher_full,
}


def units_first_params():
    """Kernels whose output units come first (Equinox's ``weight [out, in, ...]``, its
    convolution's bias ``[out, 1, 1]``) and a square ``w0`` of a plain function (units last)."""
    shapes = {"conv": ((3, 2, 2, 2), (3, 1, 1)), "out": ((2, 5), (2,))}
    keys = iter(jax.random.split(jax.random.key(4), 6))
    params = {
        name: {"weight": jax.random.normal(next(keys), w), "bias": jax.random.normal(next(keys), b)}
        for name, (w, b) in shapes.items()
    }
    return {**params, "w0": jax.random.normal(next(keys), (3, 3)), "b0": jnp.ones(3)}


@pytest.mark.parametrize(
    "kind, layout", [(kind, "linen") for kind in sorted(METRICS)] + [("qdiag", "units_first")]
)
def test_inverse_and_root_against_dense_matrices(kind, layout):
    eps = 0.1
    params = classifier()[1] if layout == "linen" else units_first_params()
    assert len(bias_pairs(params)) == (2 if layout == "linen" else 3)
    metric = METRICS[kind](eps=eps, decay=0.0)
    state = random_state(kind, metric, params)
    c = dense(metric.inv, state, params)
    a = dense(metric.inv_sqrt, state, params)
    np.testing.assert_allclose(c, c.T, atol=1e-5)
    np.testing.assert_allclose(a @ a.T, c, rtol=1e-4, atol=1e-6)
    g = np.linalg.inv(c)  # the metric G itself
    flat_stat = state.stat
    if kind == "full":
        np.testing.assert_allclose(
            g, np.asarray(flat_stat) + eps * np.eye(len(g)), rtol=1e-3, atol=1e-4
        )
        return
    diag = ravel_pytree(flat_stat.diag if kind == "qdiag" else flat_stat)[0]
    np.testing.assert_allclose(np.diag(g), np.asarray(diag) + eps, rtol=1e-3)
    if kind == "diag":
        np.testing.assert_allclose(g, np.diag(np.diag(g)), atol=1e-5)
        return
    # QDOP: within each unit's block, G's first row (bias–weight) is J's; nothing else is kept.
    index = np.arange(len(g))
    leaves = jax.tree.leaves(params)
    offsets = np.cumsum([0] + [x.size for x in leaves])
    for (k, b, axis), row in zip(bias_pairs(params), flat_stat.cross, strict=True):
        kernel_idx = np.moveaxis(
            index[offsets[k] : offsets[k + 1]].reshape(leaves[k].shape), axis, -1
        )
        for j in range(leaves[b].size):
            got = g[offsets[b] + j, kernel_idx[..., j].ravel()]
            want = np.moveaxis(np.asarray(row), axis, -1)[..., j].ravel()
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)


def dense_inv_of_theta(metric, potential, batch, unravel, key=None):
    """θ ↦ the dense G⁻¹ of the metric whose statistic is this batch's (decay 0: S = s(θ))."""
    grad_fn = gradient_fn(potential, True, metric)

    def fn(flat):
        params = unravel(flat)
        state = metric.update(metric.init(params), grad_fn(params, batch, key)[2])
        eye = jnp.eye(flat.size)
        return jax.vmap(lambda e: ravel_pytree(metric.inv(state, unravel(e)))[0])(eye).T

    return fn


@pytest.mark.parametrize("kind", sorted(METRICS))
def test_exact_gamma_equals_jacfwd_of_the_dense_metric(kind):
    potential, params, batch = classifier(seed=3)
    metric = METRICS[kind](eps=0.05, decay=0.0)
    flat, unravel = ravel_pytree(params)
    jac = jax.jit(jax.jacfwd(dense_inv_of_theta(metric, potential, batch, unravel)))(flat)
    expected = jnp.einsum("ijj->i", jac)  # Γ_i = Σ_j ∂(G⁻¹)_ij/∂θ_j
    grad_fn = partial(gradient_fn(potential, True, metric), batch=batch, key=None)
    correction = sgrld.parts.correction.exact(warmup=0)
    estimate = jax.jit(lambda p, state: correction.estimate(None, grad_fn, p, metric, state))
    est = estimate(params, metric.init(params))
    got = ravel_pytree(est.gamma)[0]
    assert float(jnp.abs(expected).max()) > 1e-3  # Γ is not trivially zero here
    np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2e-4 * float(jnp.abs(expected).max()))


@pytest.mark.parametrize("kind", sorted(METRICS))
def test_exact_gamma_equals_jacfwd_of_brute_force_statistics(kind):
    # An independent reference: G⁻¹(θ) from brute-force per-example gradients (vmap(grad)), not
    # the statistic's fast path that the test above differentiates on both sides.
    potential, params, batch = classifier(seed=5)
    metric = METRICS[kind](eps=0.05, decay=0.0)
    expected, got = exact_gamma_against_jacfwd(
        metric,
        potential,
        params,
        batch,
        lambda p: expected_statistic(kind, brute_grads(potential.loglik_fn, p, batch)),
    )
    assert float(jnp.abs(expected).max()) > 1.0  # Γ is not trivially zero here
    np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2e-4 * float(jnp.abs(expected).max()))


def expected_model_statistic(kind, potential, params, x, num_classes):
    """The true Fisher's statistic: the average over ỹ ~ p_θ(·|x) of the label's outer products."""
    probs = jax.nn.softmax(apply_fn(MLP(features=(3,), num_outputs=num_classes))(params["net"], x))
    per_class = [
        brute_grads(potential.loglik_fn, params, (x, jnp.full((B,), c))) for c in range(num_classes)
    ]
    weighted = [
        jax.tree.map(
            lambda g, c=c: g * jnp.sqrt(probs[:, c]).reshape((B,) + (1,) * (g.ndim - 1)), grads
        )
        for c, grads in enumerate(per_class)
    ]
    stats = [expected_statistic(kind, w) for w in weighted]
    return jax.tree.map(lambda *xs: sum(xs), *stats)


@pytest.mark.statistical(seed=0)
@pytest.mark.parametrize("kind", ["diag", "qdiag"])
def test_model_label_gamma_is_unbiased(kind, stat_seed):
    """Γ̂ with ỹ ~ p_θ: its mean over draws is Σ_j ∂_j F(E_ỹ s(θ))_ij, the score term included.

    False-failure probability: ≤ 1.2e-5 per kind (21 parameters' means over 4,000 label draws,
    near normal, at 5 standard errors).
    """
    num_classes, draws = 3, 4000
    potential, params, batch = classifier(seed=5, num_outputs=num_classes)
    metric = METRICS[kind](labels="model", eps=0.05, decay=0.0)
    flat, unravel = ravel_pytree(params)

    def expected_inv(theta):
        p = unravel(theta)
        stat = expected_model_statistic(kind, potential, p, batch[0], num_classes)
        state = metric.init(p)._replace(stat=stat)
        eye = jnp.eye(theta.size)
        return jax.vmap(lambda e: ravel_pytree(metric.inv(state, unravel(e)))[0])(eye).T

    expected = jnp.einsum("ijj->i", jax.jit(jax.jacfwd(expected_inv))(flat))
    stat = jax.jit(lambda p: expected_model_statistic(kind, potential, p, batch[0], num_classes))(
        params
    )
    state = metric.init(params)._replace(stat=stat)
    observe = gradient_fn(potential, True, metric)
    basis = basis_like(params)

    def one(key):
        observation, linear = jax.linearize(lambda p: observe(p, batch, key)[2], params)
        hz = jax.vmap(linear)(basis)
        gamma = gamma_from_probes(metric, state, observation, basis, hz, reduce="sum")
        return ravel_pytree(gamma)[0]

    gammas = jax.lax.map(one, jax.random.split(jax.random.key(stat_seed), draws), batch_size=500)
    mean, se = gammas.mean(0), gammas.std(0) / np.sqrt(draws)
    z = np.abs(np.asarray(mean - expected)) / np.maximum(np.asarray(se), 1e-6)
    assert z.max() < 5, (
        z.max(),
        np.asarray(expected)[np.argmax(z)],
        np.asarray(mean)[np.argmax(z)],
    )
    # Without the score term the mean misses it: the test can tell the two apart.
    assert float(jnp.abs(expected).max()) > 10 * float(se.max())


def test_model_labels_need_a_likelihood_that_samples():
    loglik = lambda p, b: -0.5 * (b[1] - b[0] * p) ** 2
    potential = sgrld.potential(loglik, None, num_data=4)
    sampler = sgrld.sgrld(
        potential, sgrld.metrics.fisher_diag(labels="model"), learning_rate=0.1, num_data=4
    )
    with pytest.raises(ValueError, match="lambda.*cannot sample"):
        sampler.step(jax.random.key(0), sampler.init(jnp.zeros(())), (jnp.ones(2), jnp.ones(2)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"labels": "true"}, "labels must be one of"),
        ({"eps": -1.0}, "eps must be >= 0"),
        ({"decay": 1.0}, r"decay must lie in \[0, 1\)"),
        ({"decay": "sqrt"}, "inverse_sqrt"),
    ],
)
@pytest.mark.parametrize("kind", sorted(METRICS))
def test_bad_arguments_are_named(kind, kwargs, match):
    with pytest.raises(ValueError, match=match):
        METRICS[kind](**kwargs)


def test_fisher_metrics_need_a_potential():
    sampler_args = {"learning_rate": 0.1, "num_data": 4}
    with pytest.raises(TypeError, match="sgrld.potential"):
        sgrld.sgrld(lambda p, b: jnp.sum(p**2), sgrld.metrics.fisher_diag(), **sampler_args)


@pytest.mark.parametrize("kind", sorted(METRICS))
def test_a_non_finite_statistic_is_skipped_and_counted(kind):
    _, params, _ = classifier()
    metric = METRICS[kind](decay=0.5)
    state = random_state(kind, metric, params)
    bad = jax.tree.map(lambda x: jnp.full_like(x, jnp.inf), state.stat)
    after = metric.update(state, bad)
    assert int(after.fallbacks) == int(state.fallbacks) + 1
    for a, b in zip(jax.tree.leaves(after.stat), jax.tree.leaves(state.stat), strict=True):
        np.testing.assert_array_equal(a, b)
    v = jax.tree.map(jnp.ones_like, params)
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(metric.inv(after, v)))


def test_inverse_sqrt_decay_is_the_papers_rate():
    metric = sgrld.metrics.fisher_full(decay="inverse_sqrt", eps=0.0)
    state = metric.init(jnp.zeros(1))
    for value in (4.0, 1.0, 7.0):  # γ_t = 1/√t: S_1 = 4, S_2 = 4 + (1 − 4)/√2, ...
        state = metric.update(state, jnp.array([[value]]))
    s1 = 4.0
    s2 = (1 - 1 / np.sqrt(2)) * s1 + 1 / np.sqrt(2)
    s3 = (1 - 1 / np.sqrt(3)) * s2 + 7 / np.sqrt(3)
    np.testing.assert_allclose(float(state.stat[0, 0]), s3, rtol=1e-6)
    assert metric.warmup == sgrld.metrics.metric.INVERSE_SQRT_WARMUP


@pytest.mark.parametrize("kind", sorted(METRICS))
def test_leaves_the_likelihood_ignores_get_the_identity(kind):
    """A hierarchical prior's scale has no Fisher information: statistic 1, no fallback warning."""
    potential, params, batch = classifier()
    params = {**params, "prior": {"scale": jnp.array([0.3, 2.0])}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        _, _, stat = observation_fn(kind, "empirical")(potential)(params, batch, None)
    expected = expected_statistic(kind, brute_grads(potential.loglik_fn, params, batch))
    if kind == "full":
        idx = [ravel_pytree(params)[0].size - 2, ravel_pytree(params)[0].size - 1]  # "prior" last
        expected = expected.at[idx, idx].set(1.0)
    elif kind == "diag":
        expected["prior"]["scale"] = jnp.ones(2)
    else:
        expected.diag["prior"]["scale"] = jnp.ones(2)
    for a, b in zip(jax.tree.leaves(stat), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("conv", ["im2col", "xla"])
@pytest.mark.parametrize("kind", ["diag", "qdiag"])
def test_a_cnn_is_all_on_the_fast_path(kind, conv):
    """Its convolutions' per-example gradients come from their patches, whichever way the
    convolution is computed."""
    from sgrld.bnn.models import CNN

    model = CNN(
        conv_features=(2,),
        kernel_size=(3, 3),
        dense_features=(4,),
        image_shape=(6, 6, 1),
        conv=conv,
    )
    params = {"net": init_params(model, jax.random.key(0), (1, 6, 6, 1))}
    loglik = likelihoods.categorical(apply_fn(model))
    potential = sgrld.potential(loglik, None, num_data=10)
    batch = (jax.random.normal(jax.random.key(1), (B, 36)), jnp.arange(B) % 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        _, _, stat = jax.jit(observation_fn(kind, "empirical")(potential))(params, batch, None)
    expected = expected_statistic(kind, brute_grads(loglik, params, batch))
    for a, b in zip(jax.tree.leaves(stat), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


class Layers(nn.Module):
    """Strided SAME and unbiased VALID convolutions, a Dense layer at every position, a Dense
    layer called twice (its parameters fall back) and a flat Dense output."""

    @nn.compact
    def __call__(self, x):
        h = conv_layer(3, (3, 3), conv="im2col", strides=(2, 1), padding="SAME")(x)
        h = conv_layer(2, (2, 2), conv="xla", padding="VALID", use_bias=False)(jnp.tanh(h))
        h = nn.Dense(3)(jnp.tanh(h))
        shared = nn.Dense(3)
        h = shared(jnp.tanh(h)) + shared(jnp.sin(h))
        return nn.Dense(1)(h.reshape(h.shape[0], -1))[:, 0]


def test_strided_padded_convolutions_positions_and_a_shared_layer_match_brute_force():
    """A layer called twice once shifted the other calls' perturbations (an IndexError)."""
    model = Layers()
    x = jax.random.normal(jax.random.key(0), (B, 7, 5, 2))
    params = model.init(jax.random.key(1), x)["params"]
    loglik = lambda p, b: -0.5 * (b[1] - model.apply({"params": p}, b[0])) ** 2
    potential = sgrld.potential(loglik, None, num_data=10)
    batch = (x, jax.random.normal(jax.random.key(2), (B,)))
    with pytest.warns(FallbackWarning) as record:
        _, _, stat = observation_fn("qdiag", "empirical")(potential)(params, batch, None)
    (message,) = {str(w.message) for w in record}
    assert "['Dense_1']" in message and "['Conv" not in message and "['Dense_0']" not in message
    expected = expected_statistic("qdiag", brute_grads(loglik, params, batch))
    for a, b in zip(jax.tree.leaves(stat), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kind", sorted(METRICS))
def test_a_statistic_of_the_first_examples_and_a_gradient_of_all(kind):
    potential, params, batch = classifier()
    value, g, stat = observation_fn(kind, "empirical", examples=2)(potential)(params, batch, None)
    first = jax.tree.map(lambda a: a[:2], batch)
    grads = brute_grads(potential.loglik_fn, params, first)
    expected = expected_statistic(kind, jax.tree.map(lambda x: jnp.concatenate([x] * 3), grads))
    for a, b in zip(jax.tree.leaves(stat), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    ref_value, ref_g = jax.jit(jax.value_and_grad(potential))(params, batch)
    np.testing.assert_allclose(value, ref_value, rtol=1e-6)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(ref_g), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="exceeds the minibatch"):
        observation_fn(kind, "model", examples=B + 1)(potential)(params, batch, jax.random.key(0))
    with pytest.raises(ValueError, match="examples must be None or a positive integer"):
        METRICS[kind](examples=0)


CHAINS_TOML = """
[data]
name = "digits"
batch_size = 100
[model]
widths = [16]
[sampler]
metric = "fisher_full"
learning_rate = 0.001
[run]
epochs = 2
burn_in = 20
thin = 2
chains = 2
"""


@pytest.mark.long
def test_a_fisher_full_run_of_two_chains_does_not_deadlock(tmp_path):
    """``sgrld run`` of the full Fisher metric on two chains returns (a subprocess: a hang fails).

    Before ``one_matrix_at_a_time``, a step's vmapped ``G⁻¹g`` and ``G^{-1/2}ξ`` were two batched
    ``trsm`` calls that XLA's CPU runtime ran at once; on a 2-core machine they deadlocked in the
    first epoch (3 of 3 runs of this configuration; 25 s with the fix).
    """
    (tmp_path / "run.toml").write_text(CHAINS_TOML)
    done = subprocess.run(
        [sys.executable, "-m", "sgrld", "run", "run.toml", "--out", "out"],
        cwd=tmp_path,
        env=cpu_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "completed 2 epochs" in done.stdout


def test_an_observation_that_overflows_the_averages_dtype_is_skipped():
    """The check is of the observation in the average's dtype: 1e5 is finite in float32 and
    inf in a float16 average, so it is skipped and counted, not averaged in."""
    metric = sgrld.metrics.fisher_diag(decay=0.5)
    state = metric.init({"w": jnp.zeros(3, jnp.float16)})
    after = metric.update(state, {"w": jnp.array([1.0, 1e5, 1.0], jnp.float32)})
    assert int(after.fallbacks) == 1 and after.stat["w"].dtype == jnp.float16
    np.testing.assert_array_equal(after.stat["w"], state.stat["w"])
    kept = metric.update(state, {"w": jnp.array([1.0, 3.0, 1.0], jnp.float32)})
    assert int(kept.fallbacks) == 0 and kept.stat["w"].tolist() == [1.0, 2.0, 1.0]
