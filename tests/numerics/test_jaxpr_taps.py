"""The per-example statistics from the traced log-likelihood (:mod:`sgrld.numerics.jaxpr_taps`).

Every statistic (DOP's diagonal, QDOP's with its bias–weight rows, the full matrix), with the
data's labels and with labels drawn from the model, equals that of brute-force per-example
gradients (``vmap(grad)``) to float32 rounding: for dense layers, convolutions (SAME, VALID,
strided, channels first), a layer at several positions, a bias-free layer, a scale, a model with
shared weights (only those fall back), and each framework's MLP and CNN (plain JAX, Flax Linen,
Flax NNX, Equinox, Haiku). Also under jit and vmap over chains, and Γ against ``jax.jacfwd``.

The tests run in float64 (where a library creates float32 parameters, they stay so), so that
1e-5 separates an error of the statistic from the summation order's rounding.
"""

from __future__ import annotations

import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.bnn import adapters, likelihoods
from sgrld.numerics.per_example import FallbackWarning, QuasiDiagonal, bias_pairs, observation_fn
from sgrld.numerics.tap_statistics import along
from tests.helpers import exact_gamma_against_jacfwd

B = 5
KINDS = ("diag", "qdiag", "full")
FISHER = {
    "diag": sgrld.metrics.fisher_diag,
    "qdiag": sgrld.metrics.fisher_qdiag,
    "full": sgrld.metrics.fisher_full,
}


@pytest.fixture(autouse=True)
def float64():
    with jax.enable_x64(True):
        yield


def reference(kind, loglik, params, batch):
    """The statistic of ``kind`` from ``vmap(grad)`` per-example gradients."""
    one = lambda p, ex: loglik(p, jax.tree.map(lambda a: a[None], ex))[0]
    grads = jax.vmap(jax.grad(one), (None, 0))(params, batch)
    leaves, treedef = jax.tree.flatten(grads)
    diag = treedef.unflatten([jnp.mean(g**2, 0) for g in leaves])
    if kind == "diag":
        return diag
    if kind == "full":
        flat = jnp.concatenate([g.reshape(B, -1) for g in leaves], 1)
        return flat.T @ flat / B
    cross = tuple(
        jnp.mean(leaves[k] * along(leaves[b], 1, leaves[k].ndim - 1, axis), 0)
        for k, b, axis in bias_pairs(params)
    )
    return QuasiDiagonal(diag, cross)


def check(kind, labels, apply, net, x, fallback=()):
    """The statistic of a classifier ``apply`` against :func:`reference`; ``fallback``: the
    leaves' names that the warning must list (none: no warning)."""
    loglik = likelihoods.categorical(apply)
    params = {"net": net}
    y = jnp.arange(B) % 3
    key = jax.random.key(7)
    potential = sgrld.potential(loglik, None, num_data=10)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        observe = jax.jit(observation_fn(kind, labels)(potential))
        _, _, stat = observe(params, (x, y), key)
    messages = [str(w.message) for w in record if issubclass(w.category, FallbackWarning)]
    if not fallback:
        assert not messages
    else:
        (message,) = messages
        named = message.split(" use the vmap")[0].split(" of ", 1)[1].split(", ")
        assert sorted(named) == sorted(fallback)
    if labels == "model":
        y = loglik.sample(key, params, x)
    expected = reference(kind, loglik, params, (x, y))
    for got, want in zip(jax.tree.leaves(stat), jax.tree.leaves(expected), strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * float(jnp.abs(want).max()))


def normal(seed, *shape):
    return jax.random.normal(jax.random.key(seed), shape)


def dense_net():
    return {"w1": normal(1, 4, 6), "b1": normal(2, 6), "w2": normal(3, 6, 3), "b2": normal(4, 3)}


def dense(p, x):
    return jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def conv_net(layout):
    kernel = normal(1, 3, 3, 2, 4) if layout == "NHWC" else normal(1, 4, 2, 3, 3)
    name = "kernel" if layout == "NHWC" else "weight"  # QDOP's units last, first
    return {name: kernel, "bias": normal(2, 4), "out": normal(3, 4 * 3 * 2, 3)}


def conv(padding, strides, layout, p, x):
    """A convolution (channels last or first), a bias, a max-pool, a dense layer."""
    spec = ("NHWC", "HWIO", "NHWC") if layout == "NHWC" else ("NCHW", "OIHW", "NCHW")
    kernel = p["kernel"] if layout == "NHWC" else p["weight"]
    h = jax.lax.conv_general_dilated(x, kernel, strides, padding, dimension_numbers=spec)
    channels = (1, 1, 1, 4) if layout == "NHWC" else (1, 4, 1, 1)
    h = jax.nn.relu(h + p["bias"].reshape(channels))
    window = (1, 2, 2, 1) if layout == "NHWC" else (1, 1, 2, 2)
    h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, window, window, "VALID")
    return h.reshape(h.shape[0], -1)[:, : 4 * 3 * 2] @ p["out"]


@pytest.mark.parametrize("labels", ["empirical", "model"])
@pytest.mark.parametrize("kind", KINDS)
def test_dense_layers(kind, labels):
    check(kind, labels, dense, dense_net(), normal(0, B, 4))


@pytest.mark.parametrize(
    "padding, strides, layout",
    [("SAME", (1, 1), "NHWC"), ("VALID", (1, 1), "NHWC"), ("SAME", (2, 1), "NCHW")],
)
@pytest.mark.parametrize("labels", ["empirical", "model"])
@pytest.mark.parametrize("kind", KINDS)
def test_convolutions(kind, labels, padding, strides, layout):
    x = normal(0, B, 8, 7, 2) if layout == "NHWC" else normal(0, B, 2, 8, 7)
    check(kind, labels, partial(conv, padding, strides, layout), conv_net(layout), x)


def positions(p, x):
    """A bias-free dense layer at every position of ``x [B, P, in]``, a scale, a dense output."""
    h = jnp.tanh(jnp.einsum("bpi,io->bpo", x, p["w"]) * p["scale"])
    return h.sum(1) @ p["out"]


@pytest.mark.parametrize("labels", ["empirical", "model"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_bias_free_layer_at_several_positions_and_a_scale(kind, labels):
    net = {"w": normal(1, 4, 5), "scale": normal(2, 5), "out": normal(3, 5, 3)}
    check(kind, labels, positions, net, normal(0, B, 6, 4))


def shared(p, x):
    """``tied`` at two places: it falls back, the other leaves do not."""
    h = jnp.tanh(x @ p["tied"] + p["shift"])
    return jnp.tanh(h @ p["tied"]) @ p["out"]


@pytest.mark.parametrize("labels", ["empirical", "model"])
@pytest.mark.parametrize("kind", KINDS)
def test_shared_weights_fall_back_alone(kind, labels):
    net = {"tied": normal(1, 4, 4), "shift": normal(2, 4), "out": normal(3, 4, 3)}
    check(kind, labels, shared, net, normal(0, B, 4), fallback=("['net']['tied']",))


def embedding(p, x):
    """A table looked up by the integer inputs (a gather: it falls back), then a dense layer."""
    return jnp.tanh(p["table"][x].sum(1)) @ p["out"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_embedding_falls_back_alone(kind):
    net = {"table": normal(1, 6, 4), "out": normal(2, 4, 3)}
    x = jnp.arange(2 * B).reshape(B, 2) % 6
    check(kind, "empirical", embedding, net, x, fallback=("['net']['table']",))


def layer_norm(p, x):
    """A dense layer, a layer normalisation's scale and offset over each example's features."""
    h = x @ p["w"]
    h = (h - h.mean(-1, keepdims=True)) * jax.lax.rsqrt(h.var(-1, keepdims=True) + 1e-5)
    return jnp.tanh(h * p["scale"] + p["offset"]) @ p["out"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_normalisation_of_each_example(kind):
    net = {
        "w": normal(1, 4, 5),
        "scale": normal(2, 5),
        "offset": normal(3, 5),
        "out": normal(4, 5, 3),
    }
    check(kind, "empirical", layer_norm, net, normal(0, B, 4))


def linen_models():
    from sgrld.bnn import CNN, MLP, apply_fn, init_params

    cnn = CNN(conv_features=(3,), kernel_size=(3, 3), dense_features=(4,), image_shape=(8, 8, 1))
    mlp = MLP(features=(5,), num_outputs=3)
    return [
        (apply_fn(mlp), init_params(mlp, jax.random.key(0), (1, 4)), normal(0, B, 4)),
        (apply_fn(cnn), init_params(cnn, jax.random.key(0), (1, 8, 8, 1)), normal(0, B, 8, 8, 1)),
    ]


def nnx_models():
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.hidden, self.out = nnx.Linear(4, 5, rngs=rngs), nnx.Linear(5, 3, rngs=rngs)

        def __call__(self, x):
            return self.out(nnx.relu(self.hidden(x)))

    class CNN(nnx.Module):
        def __init__(self, rngs):
            self.conv = nnx.Conv(1, 3, (3, 3), strides=2, rngs=rngs)
            self.out = nnx.Linear(4 * 4 * 3, 3, rngs=rngs)

        def __call__(self, x):
            h = nnx.relu(self.conv(x))
            return self.out(h.reshape(h.shape[0], -1))

    mlp, cnn = adapters.nnx(MLP(nnx.Rngs(0))), adapters.nnx(CNN(nnx.Rngs(0)))
    return [(*mlp[::-1], normal(0, B, 4)), (*cnn[::-1], normal(0, B, 8, 8, 1))]


def equinox_models():
    import equinox as eqx

    key1, key2 = jax.random.split(jax.random.key(0))

    class CNN(eqx.Module):
        conv: eqx.nn.Conv2d
        out: eqx.nn.Linear

        def __call__(self, x):
            return self.out(jax.nn.relu(self.conv(x)).ravel())

    mlp = adapters.equinox(eqx.nn.MLP(4, 3, 5, 1, key=key1))
    conv = eqx.nn.Conv2d(1, 3, 3, stride=2, padding=1, key=key1)
    cnn = adapters.equinox(CNN(conv, eqx.nn.Linear(3 * 4 * 4, 3, key=key2)))
    return [(*mlp[::-1], normal(0, B, 4)), (*cnn[::-1], normal(0, B, 1, 8, 8))]


def haiku_models():
    import haiku as hk

    def cnn(x):
        h = jax.nn.relu(hk.Conv2D(3, 3, stride=2)(x))
        return hk.Linear(3)(h.reshape(h.shape[0], -1))

    x_mlp, x_cnn = normal(0, B, 4), normal(0, B, 8, 8, 1)
    mlp = hk.transform(lambda x: hk.nets.MLP([5, 3])(x))
    return [
        (*adapters.haiku(mlp, jax.random.key(0), x_mlp)[::-1], x_mlp),
        (*adapters.haiku(hk.transform(cnn), jax.random.key(0), x_cnn)[::-1], x_cnn),
    ]


FRAMEWORKS = {
    "linen": linen_models,
    "nnx": nnx_models,
    "equinox": equinox_models,
    "haiku": haiku_models,
}


@pytest.mark.parametrize("labels", ["empirical", "model"])
@pytest.mark.parametrize("kind", ["diag", "qdiag"])
@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_each_frameworks_mlp_and_cnn(framework, kind, labels):
    for apply, net, x in FRAMEWORKS[framework]():
        check(kind, labels, apply, net, x)


@pytest.mark.parametrize("kind", KINDS)
def test_chains_in_vmap_under_jit(kind):
    loglik = likelihoods.categorical(dense)
    potential = sgrld.potential(loglik, None, num_data=10)
    nets = [dense_net(), jax.tree.map(lambda a: 0.5 * a + 0.1, dense_net())]
    batch = (normal(0, B, 4), jnp.arange(B) % 3)
    observe = observation_fn(kind, "empirical")(potential)
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *({"net": n} for n in nets))
    stats = jax.jit(jax.vmap(observe, (0, None, None)))(stacked, batch, None)[2]
    for chain, net in enumerate(nets):
        expected = reference(kind, loglik, {"net": net}, batch)
        got = jax.tree.map(lambda a, c=chain: a[c], stats)
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * float(jnp.abs(b).max()))


@pytest.mark.parametrize("kind", KINDS)
def test_exact_gamma_equals_jacfwd_of_brute_force_statistics(kind):
    """Γ differentiates the statistic forward over reverse through the traced program."""
    metric = FISHER[kind](eps=0.05, decay=0.0)
    loglik = likelihoods.categorical(positions)
    potential = sgrld.potential(loglik, None, num_data=10)
    net = {"w": normal(1, 2, 3), "scale": normal(2, 3), "out": normal(3, 3, 3)}
    params, batch = {"net": net}, (normal(0, B, 4, 2), jnp.arange(B) % 3)
    expected, got = exact_gamma_against_jacfwd(
        metric, potential, params, batch, lambda p: reference(kind, loglik, p, batch)
    )
    assert float(jnp.abs(expected).max()) > 1e-2  # Γ is not trivially zero here
    np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2e-4 * float(jnp.abs(expected).max()))


def batch_norm(p, x, copies=False):
    """A dense layer, a normalisation over the minibatch, its scale and offset, a dense output;
    ``copies``: each example with its own copy of every parameter (a leading axis)."""
    dense = (lambda a, w: jnp.einsum("bi,bio->bo", a, w)) if copies else jnp.matmul
    h = dense(x, p["w"])
    h = (h - h.mean(0)) * jax.lax.rsqrt(h.var(0) + 1e-5)
    return dense(jnp.tanh(h * p["scale"] + p["offset"]), p["out"])


def test_a_normalisation_over_the_minibatch_couples_the_examples():
    """δᵢ is the minibatch log-likelihood's gradient at example i's output, so each example's
    gradient is that of its own copy of the parameters in the coupled minibatch."""
    net = {
        "w": normal(1, 4, 5),
        "scale": normal(2, 5),
        "offset": normal(3, 5),
        "out": normal(4, 5, 3),
    }
    x, y = normal(0, B, 4), jnp.arange(B) % 3
    potential = sgrld.potential(likelihoods.categorical(batch_norm), None, num_data=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        stat = jax.jit(observation_fn("diag", "empirical")(potential))({"net": net}, (x, y), None)[
            2
        ]
    copies_loglik = likelihoods.categorical(partial(batch_norm, copies=True))
    copies = jax.tree.map(lambda a: jnp.broadcast_to(a, (B, *a.shape)), net)
    grads = jax.grad(lambda c: copies_loglik({"net": c}, (x, y)).sum())(copies)
    for name, g in grads.items():
        want = jnp.mean(g**2, 0)
        np.testing.assert_allclose(
            stat["net"][name], want, rtol=1e-5, atol=1e-6 * float(want.max())
        )
