"""QDOP's bias–weight pairs from the traced log-likelihood, for any model.

The names make QDOP's slots (:func:`sgrld.numerics.per_example.bias_pairs`: ``kernel``/``w`` with
the units last, ``weight`` with the units first, and ``bias``/``b`` of the same suffix); the
trace confirms each (:func:`sgrld.numerics.tap_statistics.bias_units`: the bias is added to the
kernel's product along those units). Each MLP's rows equal those of brute-force per-example
gradients (``vmap(grad)``) in float32 to 1e-5: a plain function's ``w0``/``b0``, Equinox's
``weight [out, in]``, NNX's and Linen's ``kernel [in, out]``. A pair the names make and the model
does not compute keeps DOP's rows, and a pair the model computes without the names is DOP's, each
with a :class:`~sgrld.numerics.per_example.FallbackWarning` that names them.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.bnn import adapters, likelihoods
from sgrld.numerics.per_example import FallbackWarning, bias_pairs, observation_fn
from sgrld.numerics.tap_statistics import along

B = 6


def normal(seed, *shape):
    return jax.random.normal(jax.random.key(seed), shape)


def plain_mlp():
    net = {"w0": normal(1, 4, 5), "b0": normal(2, 5), "w1": normal(3, 5, 3), "b1": normal(4, 3)}
    return net, lambda p, x: jnp.tanh(x @ p["w0"] + p["b0"]) @ p["w1"] + p["b1"]


def equinox_mlp():
    eqx = pytest.importorskip("equinox")
    return adapters.equinox(eqx.nn.MLP(4, 3, 5, 1, activation=jnp.tanh, key=jax.random.key(0)))


def nnx_mlp():
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.hidden, self.out = nnx.Linear(4, 5, rngs=rngs), nnx.Linear(5, 3, rngs=rngs)

        def __call__(self, x):
            return self.out(jnp.tanh(self.hidden(x)))

    return adapters.nnx(MLP(nnx.Rngs(0)))


def linen_mlp():
    from sgrld.bnn import MLP, apply_fn, init_params

    model = MLP(features=(5,), num_outputs=3)
    return init_params(model, jax.random.key(0), (1, 4)), apply_fn(model)


MLPS = {
    "jax": (plain_mlp, 1),
    "equinox": (equinox_mlp, 0),
    "nnx": (nnx_mlp, 1),
    "linen": (linen_mlp, 1),
}
"""Each MLP and its kernels' axis of output units."""


def brute_rows(loglik, params, batch):
    """QDOP's rows ``(1/B) Σᵢ gᵢ[kernel] · gᵢ[bias]`` (units along their axis) by ``vmap(grad)``."""
    one = lambda p, ex: loglik(p, jax.tree.map(lambda a: a[None], ex))[0]
    leaves = jax.tree.leaves(jax.vmap(jax.grad(one), (None, 0))(params, batch))
    return [
        jnp.mean(leaves[k] * along(leaves[b], 1, leaves[k].ndim - 1, axis), 0)
        for k, b, axis in bias_pairs(params)
    ]


def observed(loglik, params, batch, labels="empirical"):
    """QDOP's statistic of one minibatch (jitted) and the FallbackWarnings' messages."""
    potential = sgrld.potential(loglik, None, num_data=10)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        stat = jax.jit(observation_fn("qdiag", labels)(potential))(params, batch, jax.random.key(3))
    return stat[2], [str(w.message) for w in record if issubclass(w.category, FallbackWarning)]


@pytest.mark.parametrize("labels", ["empirical", "model"])
@pytest.mark.parametrize("name", sorted(MLPS))
def test_each_mlps_rows_come_from_the_trace_and_match_brute_force(name, labels):
    make, axis = MLPS[name]
    net, apply = make()
    loglik, params = likelihoods.categorical(apply), {"net": net}
    x, y = normal(0, B, 4), jnp.arange(B) % 3
    assert [a for _, _, a in bias_pairs(params)] == [axis, axis]
    stat, messages = observed(loglik, params, (x, y), labels)
    assert not messages
    if labels == "model":
        y = loglik.sample(jax.random.key(3), params, x)
    want = brute_rows(loglik, params, (x, y))
    assert len(stat.cross) == 2
    for got, row in zip(stat.cross, want, strict=True):
        assert got.dtype == jnp.float32 and got.shape == row.shape
        np.testing.assert_allclose(got, row, rtol=1e-5, atol=1e-5 * float(jnp.abs(row).max()))


def test_a_pair_the_names_make_and_the_model_does_not_add_keeps_dops_rows():
    net = {"w0": normal(1, 4, 3), "b0": normal(2, 3)}
    loglik = likelihoods.categorical(lambda p, x: jnp.tanh(x @ p["w0"]) + p["b0"])
    stat, messages = observed(loglik, {"net": net}, (normal(0, B, 4), jnp.arange(B) % 3))
    (message,) = messages
    assert "['net']['w0']/['net']['b0'] (axis 1) are DOP's" in message
    np.testing.assert_array_equal(stat.cross[0], jnp.zeros((4, 3)))


def test_a_pair_the_model_adds_without_the_names_is_dops_and_named():
    net = {"k": normal(1, 4, 3), "c": normal(2, 3)}
    loglik = likelihoods.categorical(lambda p, x: x @ p["k"] + p["c"])
    stat, messages = observed(loglik, {"net": net}, (normal(0, B, 4), jnp.arange(B) % 3))
    (message,) = messages
    assert "['net']['k']/['net']['c'] (axis 1) are DOP's" in message
    assert stat.cross == ()
