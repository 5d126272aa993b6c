"""Models: output shapes, parameter counts, forward pass, He initialisation, CNN inputs."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sgrld.bnn import models


def num_params(tree) -> int:
    return sum(leaf.size for leaf in jax.tree.leaves(tree))


def param_shapes(model, input_shape):
    """Parameter shapes, traced with ``jax.eval_shape`` (no random numbers, no compilation)."""
    return jax.eval_shape(lambda: models.init_params(model, jax.random.key(0), input_shape))


def random_params(model, input_shape, seed=0):
    """Cheap random parameters of the right shapes (drawn with numpy)."""
    rng = np.random.default_rng(seed)
    return jax.tree.map(
        lambda s: jnp.asarray(rng.normal(size=s.shape) * 0.1, jnp.float32),
        param_shapes(model, input_shape),
    )


@pytest.mark.parametrize(
    ("width", "count"),
    [(400, 784 * 400 + 400 + 400 * 400 + 400 + 400 * 10 + 10), (800, 1_276_810), (1200, 2_395_210)],
)
def test_mlp_parameter_count_matches_yu_et_al(width, count):
    shapes = param_shapes(models.MLP(features=(width, width)), (1, 784))
    assert num_params(shapes) == count
    assert shapes["Dense_0"]["kernel"].shape == (784, width)
    assert shapes["Dense_2"]["bias"].shape == (10,)


def test_default_mlp_is_784_400_400_10():
    assert num_params(param_shapes(models.MLP(), (1, 784))) == 478_410


def test_mlp_forward_matches_numpy():
    model = models.MLP()
    net = random_params(model, (1, 784))
    x = np.random.default_rng(1).uniform(size=(3, 784)).astype(np.float32)
    logits = jax.jit(models.apply_fn(model))(net, x)
    assert logits.shape == (3, 10) and logits.dtype == jnp.float32
    h = x.astype(np.float64)
    for layer in ("Dense_0", "Dense_1"):
        h = np.maximum(h @ net[layer]["kernel"] + net[layer]["bias"], 0.0)
    expected = h @ net["Dense_2"]["kernel"] + net["Dense_2"]["bias"]
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)


def test_init_params_is_he_normal_with_zero_biases():
    net = models.init_params(models.MLP(features=(300,)), jax.random.key(0), (1, 200))
    kernel = np.asarray(net["Dense_0"]["kernel"])
    assert kernel.shape == (200, 300) and kernel.dtype == np.float32
    # He normal: std sqrt(2/fan_in); 60 000 draws give a standard error of 0.3%.
    assert kernel.std() == pytest.approx(math.sqrt(2 / 200), rel=0.02)
    assert np.abs(kernel).max() > 3.5 * math.sqrt(2 / 200)  # a plain normal, not truncated at 2σ
    assert not np.any(net["Dense_0"]["bias"]) and not np.any(net["Dense_1"]["bias"])


def test_regression_mlp():
    model = models.regression_mlp()
    net = random_params(model, (1, 3))
    assert num_params(net) == 3 * 50 + 50 + 50 + 1
    assert jax.jit(models.apply_fn(model))(net, jnp.ones((7, 3))).shape == (7, 1)


def test_cnn_architecture_of_li_et_al():
    shapes = param_shapes(models.CNN(), (1, 28, 28, 1))
    assert shapes["Conv_0"]["kernel"].shape == (5, 5, 1, 32)
    assert shapes["Conv_1"]["kernel"].shape == (5, 5, 32, 64)
    # VALID convolutions and 2x2 pooling: 28 -> 24 -> 12 -> 8 -> 4, so 4*4*64 dense inputs.
    assert shapes["Dense_0"]["kernel"].shape == (4 * 4 * 64, 200)
    assert shapes["Dense_1"]["kernel"].shape == (200, 200)
    assert shapes["Dense_2"]["kernel"].shape == (200, 10)
    assert num_params(shapes) == 832 + 51_264 + 205_000 + 40_200 + 2_010


def test_cnn_accepts_nhwc_and_flat_input():
    model = models.CNN()
    net = random_params(model, (1, 28, 28, 1))
    images = np.random.default_rng(1).uniform(size=(2, 28, 28, 1)).astype(np.float32)
    apply = jax.jit(models.apply_fn(model))
    logits = apply(net, images)
    assert logits.shape == (2, 10)
    assert np.all(np.isfinite(logits)) and np.ptp(logits) > 0
    np.testing.assert_array_equal(apply(net, images.reshape(2, 784)), logits)


def test_cnn_rejects_other_ranks():
    model = models.CNN()
    shapes = param_shapes(model, (1, 28, 28, 1))
    with pytest.raises(ValueError, match="NHWC"):
        jax.eval_shape(models.apply_fn(model), shapes, jax.ShapeDtypeStruct((28, 28, 1), "f4"))


class _ListWidths(nn.Module):
    """A module with a list field: it cannot be hashed, so init_params cannot cache it."""

    widths: list

    @nn.compact
    def __call__(self, x):
        for w in self.widths:
            x = nn.Dense(w)(x)
        return x


@pytest.mark.parametrize("model", [models.MLP(features=(8, 4)), _ListWidths(widths=[8, 4])])
def test_init_params_equals_the_jitted_init_and_caches_equal_models(model):
    key = jax.random.key(7)
    expected = jax.jit(model.init)(key, jnp.zeros((1, 12), jnp.float32))["params"]
    for _ in range(2):  # the second call of a hashable model reuses the compiled init
        got = models.init_params(model, key, (1, 12))
        assert jax.tree.all(jax.tree.map(lambda a, b: bool((a == b).all()), got, expected))
    with pytest.raises(TypeError):
        hash(_ListWidths(widths=[8]))
