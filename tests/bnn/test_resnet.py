"""ResNet-20 (Fortuin et al.'s "Google ResNet-20"), its batch normalisation, its configuration, and
the CIFAR-10 files it reads: checksums and layout errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sgrld.bnn import models, priors, resnet
from sgrld.data import DataError, load_dataset
from sgrld_app import config as sgrld_config
from sgrld_app.from_config import build_experiment
from tests.data.test_data import cifar_arrays, write_cifar


def random_params(model, input_shape, seed=0):
    shapes = jax.eval_shape(lambda: models.init_params(model, jax.random.key(0), input_shape))
    rng = np.random.default_rng(seed)
    return jax.tree.map(
        lambda s: jnp.asarray(rng.normal(size=s.shape) * 0.5 + 0.2, jnp.float32), shapes
    )


def conv(x, kernel, stride):
    """NHWC convolution, padded 1 on every side for 3x3 kernels and not at all for 1x1 (torch)."""
    pad = (kernel.shape[0] - 1) // 2
    return jax.lax.conv_general_dilated(
        x, kernel, (stride, stride), [(pad, pad)] * 2, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def batch_norm(x, p):
    mean, var = x.mean((0, 1, 2)), x.var((0, 1, 2))
    return (x - mean) / jnp.sqrt(var + 1e-5) * p["scale"] + p["bias"]


def reference_resnet20(net, x):
    """bnn_priors' google_resnet.ResNet(depth=20), written out layer by layer."""
    relu = jax.nn.relu
    h = relu(batch_norm(conv(x, net["Conv_0"]["kernel"], 1), net["BatchNorm_0"]))
    for i in range(9):
        b = net[f"ResidualBlock_{i}"]
        stride = 2 if i in (3, 6) else 1
        y = relu(batch_norm(conv(h, b["Conv_0"]["kernel"], stride), b["BatchNorm_0"]))
        y = batch_norm(conv(y, b["Conv_1"]["kernel"], 1), b["BatchNorm_1"])
        if "Conv_2" in b:
            h = batch_norm(conv(h, b["Conv_2"]["kernel"], stride), b["BatchNorm_2"])
        h = relu(y + h)
    return h.mean((1, 2)) @ net["Dense_0"]["kernel"] + net["Dense_0"]["bias"]


def test_resnet20_layers_and_parameter_count():
    model = resnet.ResNet20()
    net = jax.eval_shape(lambda: models.init_params(model, jax.random.key(0), (1, 32, 32, 3)))
    shapes = jax.tree.map(lambda s: s.shape, net)
    assert shapes["Conv_0"] == {"kernel": (3, 3, 3, 16)}  # convolutions have no bias
    assert shapes["ResidualBlock_2"]["Conv_1"]["kernel"] == (3, 3, 16, 16)
    assert shapes["ResidualBlock_3"]["Conv_0"]["kernel"] == (3, 3, 16, 32)
    assert shapes["ResidualBlock_3"]["Conv_2"]["kernel"] == (1, 1, 16, 32)  # the shortcut
    assert shapes["ResidualBlock_6"]["Conv_2"]["kernel"] == (1, 1, 32, 64)
    assert "Conv_2" not in shapes["ResidualBlock_4"]
    assert shapes["Dense_0"] == {"bias": (10,), "kernel": (64, 10)}
    assert sum(s.size for s in jax.tree.leaves(net)) == 272_474


def test_resnet20_forward_matches_a_layer_by_layer_reference():
    model = resnet.ResNet20(width=2, image_shape=(8, 8, 3))
    net = random_params(model, (1, 8, 8, 3))
    x = jax.random.normal(jax.random.key(1), (5, 8, 8, 3))
    logits = jax.jit(models.apply_fn(model))(net, x.reshape(5, -1))  # flat input, NHWC order
    np.testing.assert_allclose(logits, reference_resnet20(net, x), rtol=2e-4, atol=2e-4)


def test_resnet20_rejects_bad_depth_and_shapes():
    with pytest.raises(ValueError, match="6n \\+ 2"):
        models.init_params(resnet.ResNet20(depth=21), jax.random.key(0), (1, 32, 32, 3))
    with pytest.raises(ValueError, match="NHWC images"):
        models.init_params(resnet.ResNet20(), jax.random.key(0), (1, 3, 32, 32, 1))


def test_evaluation_uses_the_reference_statistics_not_the_batch():
    model = resnet.ResNet20(width=2, image_shape=(8, 8, 3))
    net = random_params(model, (1, 8, 8, 3))
    x_train = jax.random.normal(jax.random.key(2), (16, 8, 8, 3))
    x = jax.random.normal(jax.random.key(3), (4, 8, 8, 3)) * 3 + 1
    apply = jax.jit(models.evaluation_apply_fn(model, x_train, reference=10))
    full = apply(net, x)
    for i in range(4):  # alone, or next to padding, a point gets the same prediction
        np.testing.assert_allclose(apply(net, x[i : i + 1])[0], full[i], rtol=1e-5, atol=1e-5)
        padded = jnp.concatenate([x[i : i + 1], jnp.zeros((3, 8, 8, 3))])
        np.testing.assert_allclose(apply(net, padded)[0], full[i], rtol=1e-5, atol=1e-5)
    both = models.apply_fn(model)(net, jnp.concatenate([x_train[:10], x]))[10:]
    assert not np.allclose(both, full, atol=1e-3)  # training mode mixes x into the statistics
    mlp = models.MLP(features=(3,))
    assert models.evaluation_apply_fn(mlp, x_train).__qualname__.startswith("apply_fn")


def test_correlated_prior_on_resnet_kernels():
    """3x3 kernels get the correlated density, 1x1 shortcuts and the dense layer a Gaussian."""
    model = resnet.ResNet20(width=2, image_shape=(8, 8, 3))
    net = random_params(model, (1, 8, 8, 3))
    correlated = priors.conv_correlated(weight_scale=1.41).log_prob
    gaussian = priors.gaussian(weight_scale=1.41).log_prob
    block = net["ResidualBlock_3"]
    for leaf in (block["Conv_2"], net["Dense_0"], block["BatchNorm_2"]):
        np.testing.assert_allclose(correlated(leaf, {}), gaussian(leaf, {}), rtol=1e-6)
    assert abs(float(correlated(block["Conv_0"], {}) - gaussian(block["Conv_0"], {}))) > 1.0


# --------------------------------------------------------------------------- CIFAR files


def test_cifar_checksum_mismatch_names_the_file(tmp_path):
    directory = write_cifar(tmp_path, cifar_arrays(n=2))
    with pytest.raises(DataError) as info:
        load_dataset("cifar10", directory)
    message = str(info.value)
    assert f"{directory / 'data_batch_1'}: MD5 mismatch, expected c99cafc152244af7" in message
    assert "cifar-10-python.tar.gz" in message and "verify_checksums = false" in message


def test_cifar_wrong_format_names_the_file_and_the_layout(tmp_path):
    directory = write_cifar(tmp_path, cifar_arrays(n=2))
    (directory / "test_batch").write_bytes(b"\x80\x04K\x01.")  # a pickled 1, not a dict
    with pytest.raises(DataError) as info:
        load_dataset("cifar10", directory, verify=False)
    message = str(info.value)
    assert message.startswith(f"{directory / 'test_batch'}: expected a dict")
    assert "expected layout: a pickled dict {b'data': uint8 array (n, 3072)" in message
    assert "b'labels': list of n ints in [0, 10)" in message


# --------------------------------------------------------------------------- configuration


def test_resnet20_from_a_configuration(tmp_path):
    write_cifar(tmp_path, cifar_arrays(n=4))
    cfg = sgrld_config.load_config(
        None,
        [
            "data.name=cifar10",
            f"data.data_dir={tmp_path}",
            "data.verify_checksums=false",
            "data.validation_size=4",
            "data.batch_size=4",
            "model.kind=resnet20",
            "model.widths=[2]",
            "prior.kind=conv_correlated",
        ],
    )
    experiment = build_experiment(cfg)
    params = experiment.init_fn(jax.random.key(0))
    assert params["net"]["Conv_0"]["kernel"].shape == (3, 3, 3, 2)
    x_test = experiment.eval_sets["test"][0]
    assert jax.jit(experiment.predict_fn)(params, x_test[:3]).shape == (3, 10)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        (["model.widths=[16, 32]"], "resnet20 takes one width"),
        (["data.name=uci_boston"], "'resnet20' classifies images"),
        (["model.depth=12"], "model.depth: must be 6n \\+ 2"),
        (["model.kind=mlp"], "model.depth: only a resnet20 has a depth"),
    ],
)
def test_resnet20_configuration_errors(settings, match):
    with pytest.raises(sgrld_config.ConfigError, match=match):
        sgrld_config.load_config(
            None, ["model.kind=resnet20", "model.widths=[16]", "model.depth=14", *settings]
        )
