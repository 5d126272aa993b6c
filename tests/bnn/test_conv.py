"""Convolutions as im2col (``conv="im2col"``) against XLA's (``"xla"``, Flax's ``nn.Conv``):
the same parameters, outputs, gradients and SGLD samples, for the shapes of ``CNN`` and
``ResNet20``; ``"auto"``'s choice by backend; ``model.conv`` in configurations.

Tolerance: both compute the same float32 sums of ``window·channels`` products (up to 5·5·32 =
800 here) in a different order, so they differ by rounding, a few float32 ulps of the largest
partial sums; ``rtol = 1e-5`` with ``atol = 1e-5·max|reference|`` (about 80 ulps of the largest
value) allows that and nothing of the size of a wrong offset, stride or padding (an O(1)
relative error).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.bnn import convolutions, likelihoods, models, priors, resnet
from sgrld_app import config as sgrld_config
from sgrld_app.config.registries import CONVOLUTIONS
from sgrld_app.data_and_model import _model

RTOL = 1e-5


def assert_close(actual, reference, rtol=RTOL):
    """Equal to float32 rounding: leaf by leaf, ``atol`` relative to the reference's largest."""
    for a, b in zip(jax.tree.leaves(actual), jax.tree.leaves(reference), strict=True):
        b = np.asarray(b)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * float(np.abs(b).max()))


def parameters(model, input_shape, seed=0):
    """Random parameters of the model's shapes (numpy draws: no compiled ``init``)."""
    shapes = jax.eval_shape(lambda: models.init_params(model, jax.random.key(0), input_shape))
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda s: jnp.asarray(rng.normal(size=s.shape) * 0.3, s.dtype), shapes)


def lax_conv(x, w, strides, padding):
    return jax.lax.conv_general_dilated(
        x, w, strides, padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


# (input, kernel, strides, padding): CNN's 5x5 VALID layers on MNIST, a SAME one with a stride,
# ResNet20's 3x3 (padding 1, strides 1 and 2) and 1x1 shortcut (VALID, stride 2) convolutions.
SHAPES = {
    "cnn-conv0": ((3, 28, 28, 1), (5, 5, 1, 32), (1, 1), "VALID"),
    "cnn-conv1": ((3, 12, 12, 32), (5, 5, 32, 64), (1, 1), "VALID"),
    "same-stride2": ((3, 9, 9, 3), (3, 3, 3, 4), (2, 2), "SAME"),
    "resnet-3x3": ((3, 32, 32, 3), (3, 3, 3, 16), (1, 1), ((1, 1), (1, 1))),
    "resnet-3x3-stride2": ((3, 32, 32, 16), (3, 3, 16, 32), (2, 2), ((1, 1), (1, 1))),
    "resnet-1x1-stride2": ((3, 16, 16, 32), (1, 1, 32, 64), (2, 2), "VALID"),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_im2col_conv_and_its_gradients_equal_xla_convolution(name):
    x_shape, w_shape, strides, padding = SHAPES[name]
    kx, kw, kc = jax.random.split(jax.random.key(0), 3)
    x, w = jax.random.normal(kx, x_shape), jax.random.normal(kw, w_shape)

    def outputs_and_gradients(conv):
        y, vjp = jax.vjp(lambda a, b: conv(a, b, strides, padding), x, w)
        return y, vjp(jax.random.normal(kc, y.shape))

    y, grads = jax.jit(lambda: outputs_and_gradients(convolutions.im2col_conv))()
    y_ref, grads_ref = jax.jit(lambda: outputs_and_gradients(lax_conv))()
    assert y.shape == y_ref.shape
    assert_close(y, y_ref)
    assert_close(grads, grads_ref)


def test_im2col_conv_rejects_what_it_does_not_compute():
    x, w = jnp.ones((1, 5, 5, 2)), jnp.ones((3, 3, 2, 4))
    with pytest.raises(NotImplementedError, match="dilation"):
        convolutions.im2col_conv(x, w, (1, 1), "SAME", rhs_dilation=(2, 2))
    with pytest.raises(NotImplementedError, match="feature_group_count=2"):
        convolutions.im2col_conv(x, w, (1, 1), "SAME", feature_group_count=2)
    with pytest.raises(NotImplementedError, match="channels-last"):
        convolutions.im2col_conv(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))


MODELS = {
    "cnn": (lambda conv: models.CNN(dense_features=(16,), conv=conv), (4, 28, 28, 1)),
    "resnet": (
        lambda conv: resnet.ResNet20(width=4, depth=8, image_shape=(16, 16, 3), conv=conv),
        (4, 16, 16, 3),
    ),
}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_models_have_the_same_parameters_outputs_and_gradients_with_either_convolution(kind):
    build, shape = MODELS[kind]
    xla, im2col = build("xla"), build("im2col")
    trees = [
        jax.eval_shape(lambda m=m: models.init_params(m, jax.random.key(0), (1, *shape[1:])))
        for m in (xla, im2col)
    ]
    assert trees[0] == trees[1]  # names, shapes and dtypes (nn.Conv initialises them alike)
    net = parameters(xla, (1, *shape[1:]))
    x = jax.random.normal(jax.random.key(1), shape)
    y = jnp.arange(shape[0]) % 10

    def value_and_grad(model):
        loglik = likelihoods.categorical(models.apply_fn(model))
        loss = lambda p: -jnp.mean(loglik({"net": p}, (x, y)))
        return jax.jit(lambda p: (models.apply_fn(model)(p, x), jax.grad(loss)(p)))(net)

    assert_close(value_and_grad(im2col), value_and_grad(xla))


@pytest.mark.slow
def test_sgld_samples_of_a_cnn_are_the_same_with_either_convolution():
    """Ten SGLD steps in one ``lax.scan`` (the engine's), the correlated prior on the kernels:
    the same samples to ``rtol = 1e-4`` (the gradients' rounding differences, 1e-5, carried
    through ten steps)."""
    kx, ky, k_run = jax.random.split(jax.random.key(3), 3)
    data = (jax.random.normal(kx, (32, 100)), jax.random.randint(ky, (32,), 0, 10))
    prior = priors.conv_correlated()
    samples = {}
    for conv in ("xla", "im2col"):
        model = models.CNN(
            conv_features=(4, 8),
            kernel_size=(3, 3),
            dense_features=(16,),
            image_shape=(10, 10, 1),
            conv=conv,
        )
        net = parameters(model, (1, 10, 10, 1))
        loglik = likelihoods.categorical(models.apply_fn(model))
        potential = sgrld.potential(loglik, priors.logprior_fn(prior), num_data=32)
        sampler = sgrld.sgrld(potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=32)
        params = {"net": net, "prior": prior.init(net)}
        batch_fn = sgrld.chains.sampling.minibatch_fn(data, 8)
        samples[conv] = sgrld.sample(k_run, sampler, params, batch_fn, num_samples=5, thin=2)
    moved = jax.tree.map(lambda s: s[-1] - s[0], samples["xla"].params)
    assert all(float(jnp.abs(d).max()) > 1e-3 for d in jax.tree.leaves(moved))
    assert_close(samples["im2col"].params, samples["xla"].params, rtol=1e-4)


def test_auto_is_im2col_on_cpu_and_xla_elsewhere(monkeypatch):
    assert CONVOLUTIONS == convolutions.CONVOLUTIONS
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert convolutions.resolve_conv("auto") == "im2col"
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert convolutions.resolve_conv("auto") == "xla"
    assert convolutions.resolve_conv("im2col") == "im2col"
    with pytest.raises(ValueError, match="conv must be one of auto, xla, im2col, got 'fast'"):
        models.init_params(models.CNN(conv="fast"), jax.random.key(0), (1, 28, 28, 1))


def test_model_conv_in_a_configuration():
    config = sgrld_config.load_config(None, ["model.kind=resnet20", "model.widths=[4]"])
    assert config.model.conv == "auto"
    for kind, widths in (("cnn", "[8]"), ("resnet20", "[4]")):
        overrides = [f"model.kind={kind}", f"model.widths={widths}", "model.conv=im2col"]
        config = sgrld_config.load_config(None, overrides)
        assert _model(config, None, 10).conv == "im2col"  # a registry set: no data needed
    with pytest.raises(sgrld_config.ConfigError, match="model.conv: unknown value 'im2co'"):
        sgrld_config.load_config(None, ["model.kind=cnn", "model.conv=im2co"])
    with pytest.raises(sgrld_config.ConfigError, match="model.conv: only a cnn or a resnet20"):
        sgrld_config.load_config(None, ["model.conv=xla"])
