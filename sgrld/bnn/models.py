"""Flax (linen) networks of the SGRLD experiments, and helpers to initialise and apply them.

* :class:`MLP`: the 784-W-W-10 ReLU classifier of Yu et al. (2023), Sec. 4.3 (W = 400, 800, 1200);
  with :func:`regression_mlp` the same class gives a small regression network.
* :class:`CNN`: the MNIST convolutional network of Li et al. (2016), Sec. 5.

Weights use He (kaiming-normal, fan-in, ReLU gain) initialisation, ``w ~ N(0, 2/fan_in)``, like
the authors' ``he_initialize``; biases start at zero (the authors drew them from
``U(±1/sqrt(out))``). The initial point is not a prior draw.

Any Flax module, or any ``apply(net_params, x) -> outputs`` function, can be used instead of these
models: priors and likelihoods only see parameter pytrees and an apply function.

References:
    Yu, Hartmann, Williams, Klami. Scalable Stochastic Gradient Riemannian Langevin Dynamics in
    Non-Diagonal Metrics. TMLR 2023.
    Li, Chen, Carlson, Carin. Preconditioned Stochastic Gradient Langevin Dynamics for Deep Neural
    Networks. AAAI 2016.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

PyTree = Any

he_normal = nn.initializers.variance_scaling(2.0, "fan_in", "normal")
"""He / kaiming-normal initialiser: ``N(0, 2/fan_in)``, untruncated (as ``torch.nn.init``)."""


class MLP(nn.Module):
    """Fully connected ReLU network with biases.

    ``h_0 = x``, ``h_l = relu(h_{l-1} W_l + b_l)`` for each hidden width, then
    ``logits = h_L W_out + b_out``. The default is the 784-400-400-10 MNIST classifier of
    Yu et al. (2023) (478 410 parameters for 784 inputs).

    Attributes:
        features: hidden layer widths.
        num_outputs: output width (classes, or 1 for regression).

    Example:
        >>> import jax
        >>> model = MLP(features=(8,), num_outputs=3)
        >>> net = init_params(model, jax.random.key(0), (1, 5))
        >>> apply_fn(model)(net, jax.numpy.ones((2, 5))).shape
        (2, 3)
    """

    features: Sequence[int] = (400, 400)
    num_outputs: int = 10

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """Map inputs ``[..., in_features]`` (flat vectors) to outputs ``[..., num_outputs]``."""
        for width in self.features:
            x = nn.relu(nn.Dense(width, kernel_init=he_normal)(x))
        return nn.Dense(self.num_outputs, kernel_init=he_normal)(x)


def regression_mlp(width: int = 50) -> MLP:
    """Small regression network: one hidden ReLU layer and one output.

    ``f(x) = relu(x W_1 + b_1) W_2 + b_2`` with output shape ``[batch, 1]`` (the Gaussian
    likelihood squeezes the last axis).

    Args:
        width: hidden layer width.

    Returns:
        ``MLP(features=(width,), num_outputs=1)``.

    Example:
        >>> model = regression_mlp()
        >>> model.features, model.num_outputs
        ((50,), 1)
    """
    return MLP(features=(width,), num_outputs=1)


class CNN(nn.Module):
    """Convolutional classifier of Li et al. (2016) for MNIST.

    Two ``5x5`` convolutions with 32 and 64 channels, each followed by ReLU and ``2x2`` max-pooling
    (stride 2), then fully connected ReLU layers of 200 and 200 units and a linear output layer.
    Convolutions are unpadded (``"VALID"``, as in the authors' MatConvNet code), so a 28x28 image
    goes 28 -> 24 -> 12 -> 8 -> 4 and the first dense layer sees ``4·4·64 = 1024`` inputs.

    Inputs are NHWC images ``[batch, H, W, C]``; flat inputs ``[batch, prod(image_shape)]`` are
    reshaped to ``[batch, *image_shape]`` first (row-major, i.e. flattened NHWC images).

    Attributes:
        conv_features: output channels of the convolutions.
        kernel_size: convolution window.
        dense_features: widths of the hidden dense layers.
        num_outputs: number of classes.
        image_shape: ``(H, W, C)`` used to reshape flat inputs.
        padding: convolution padding, ``"VALID"`` or ``"SAME"``.

    Example:
        >>> import jax
        >>> model = CNN()
        >>> net = jax.eval_shape(lambda: init_params(model, jax.random.key(0), (1, 28, 28, 1)))
        >>> net["Dense_0"]["kernel"].shape  # 4·4·64 features after the convolutions
        (1024, 200)
        >>> jax.eval_shape(apply_fn(model), net, jax.numpy.zeros((2, 784))).shape  # flat input
        (2, 10)
    """

    conv_features: Sequence[int] = (32, 64)
    kernel_size: tuple[int, int] = (5, 5)
    dense_features: Sequence[int] = (200, 200)
    num_outputs: int = 10
    image_shape: tuple[int, int, int] = (28, 28, 1)
    padding: str = "VALID"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """Map images ``[B, H, W, C]`` or flat images ``[B, H·W·C]`` to logits ``[B, classes]``."""
        if x.ndim == 2:
            x = x.reshape((x.shape[0], *self.image_shape))
        if x.ndim != 4:
            raise ValueError(
                f"CNN expects NHWC images [B, H, W, C] or flat images [B, H*W*C], got shape "
                f"{x.shape}"
            )
        for channels in self.conv_features:
            x = nn.Conv(channels, self.kernel_size, padding=self.padding, kernel_init=he_normal)(x)
            x = nn.max_pool(nn.relu(x), window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        for width in self.dense_features:
            x = nn.relu(nn.Dense(width, kernel_init=he_normal)(x))
        return nn.Dense(self.num_outputs, kernel_init=he_normal)(x)


def init_params(model: nn.Module, key: jax.Array, input_shape: Sequence[int]) -> PyTree:
    """Initialise a Flax module and return its parameters, the ``"net"`` part of ``params``.

    ``net_params = model.init(key, zeros(input_shape))["params"]``, compiled with ``jax.jit``.
    For the models of this module that is He-normal weights and zero biases; other modules use
    their own initialisers.

    Args:
        model: a Flax linen module whose only variable collection is ``"params"``.
        key: PRNG key.
        input_shape: shape of a dummy input *batch*, e.g. ``(1, 784)`` or ``(1, 28, 28, 1)``.

    Returns:
        The parameter pytree (a nested dict of float32 arrays).

    Example:
        >>> import jax
        >>> net = init_params(MLP(features=(8,)), jax.random.key(0), (1, 784))
        >>> jax.tree.map(jax.numpy.shape, net)["Dense_0"]
        {'bias': (8,), 'kernel': (784, 8)}
    """
    return jax.jit(model.init)(key, jnp.zeros(tuple(input_shape), jnp.float32))["params"]


def apply_fn(model: nn.Module) -> Callable[[PyTree, jax.Array], jax.Array]:
    """Turn a Flax module into ``apply(net_params, x) -> outputs``, as likelihoods expect.

    ``apply(net_params, x) = model.apply({"params": net_params}, x)``.

    Args:
        model: a Flax linen module whose only variable collection is ``"params"``.

    Returns:
        The apply function.

    Example:
        >>> import jax
        >>> model, x = regression_mlp(width=4), jax.numpy.ones((5, 3))
        >>> net = init_params(model, jax.random.key(0), x.shape)
        >>> bool((apply_fn(model)(net, x) == model.apply({"params": net}, x)).all())
        True
    """
    return lambda net_params, x: model.apply({"params": net_params}, x)
