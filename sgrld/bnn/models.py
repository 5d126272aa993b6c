"""Flax (linen) networks of the SGRLD experiments, and helpers to initialise and apply them.

* :class:`MLP`: the 784-W-W-10 ReLU classifier of Yu et al. (2023), Sec. 4.3 (W = 400, 800, 1200);
  with :func:`regression_mlp` the same class gives a small regression network.
* :func:`logistic_regression`: one ``nn.Dense(1)``, the logit of Bayesian logistic regression.
* :class:`CNN`: the MNIST convolutional network of Li et al. (2016), Sec. 5.
* :class:`~sgrld.bnn.resnet.ResNet20` (:mod:`sgrld.bnn.resnet`): the "Google ResNet-20" of
  Fortuin et al. (2021) for CIFAR-10 (Yu et al., Sec. 4.4), with batch normalisation over the
  batch; :func:`evaluation_apply_fn` evaluates it with statistics of a fixed set of training
  images.

Convolutions are Flax's ``nn.Conv``, computed by XLA or as patches and one matrix product
(:mod:`sgrld.bnn.convolutions`).

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
    Fortuin, Garriga-Alonso, Ober, Wenzel, Rätsch, Turner, van der Wilk, Aitchison. Bayesian
    Neural Network Priors Revisited. ICLR 2022 (code: ``bnn_priors``, ``models/google_resnet.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from sgrld.bnn.convolutions import conv_layer
from sgrld.numerics.pytrees import PyTree

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


def logistic_regression() -> nn.Dense:
    """The linear logit of logistic regression: one Flax ``nn.Dense(1)``.

    ``z = x·w + b`` with parameters ``{"kernel": [d, 1], "bias": [1]}`` (``d`` input features),
    the layer that the Fisher metrics' per-example fast path (:mod:`sgrld.numerics.jaxpr_taps`)
    and QDOP's bias–weight blocks know. With :func:`sgrld.bnn.likelihoods.bernoulli` it is
    Bayesian logistic regression. Initialised as the other models: He-normal ``w``, ``b = 0``.

    Returns:
        ``nn.Dense(1, kernel_init=he_normal)``.

    Example:
        >>> import jax
        >>> net = init_params(logistic_regression(), jax.random.key(0), (1, 14))
        >>> jax.tree.map(jax.numpy.shape, net)
        {'bias': (1,), 'kernel': (14, 1)}
    """
    return nn.Dense(1, kernel_init=he_normal)


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
        conv: how the convolutions are computed, one of :data:`CONVOLUTIONS` (``"auto"``: as
            patches and a matrix product on a CPU, where XLA's convolution is slow inside the
            runner's ``lax.scan``, jax-ml/jax#12868; XLA's convolution elsewhere). The
            parameters do not depend on it.

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
    conv: str = "auto"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """Map images ``[B, H, W, C]`` or flat images ``[B, H·W·C]`` to logits ``[B, classes]``."""
        x = conv_stack(self, as_images(x, self.image_shape, "CNN"))
        for width in self.dense_features:
            x = nn.relu(nn.Dense(width, kernel_init=he_normal)(x))
        return nn.Dense(self.num_outputs, kernel_init=he_normal)(x)


def conv_stack(cnn: CNN, x: jax.Array) -> jax.Array:
    """The convolutional part of a :class:`CNN` (or a module with its ``conv_features``,
    ``kernel_size``, ``padding`` and ``conv``), called inside that module's ``nn.compact`` method:
    per entry of ``conv_features``, ``maxpool₂ₓ₂(relu(conv(x)))`` (:func:`conv_layer`), then
    flattened to ``[B, features]``.

    Example:
        >>> import flax.linen as nn, jax, jax.numpy as jnp
        >>> class Features(CNN):
        ...     @nn.compact
        ...     def __call__(self, x):
        ...         return conv_stack(self, x)
        >>> x = jnp.zeros((2, 28, 28, 1))
        >>> net = Features().init(jax.random.key(0), x)["params"]
        >>> sorted(net), Features().apply({"params": net}, x).shape  # 4·4·64 features
        (['Conv_0', 'Conv_1'], (2, 1024))
    """
    for channels in cnn.conv_features:
        x = conv_layer(
            channels, cnn.kernel_size, conv=cnn.conv, padding=cnn.padding, kernel_init=he_normal
        )(x)
        x = nn.max_pool(nn.relu(x), window_shape=(2, 2), strides=(2, 2))
    return x.reshape((x.shape[0], -1))


def as_images(x: jax.Array, image_shape: tuple[int, int, int], name: str) -> jax.Array:
    """NHWC images from ``[B, H, W, C]`` or flat ``[B, H·W·C]`` inputs (row-major NHWC)."""
    if x.ndim == 2:
        x = x.reshape((x.shape[0], *image_shape))
    if x.ndim != 4:
        raise ValueError(
            f"{name} expects NHWC images [B, H, W, C] or flat images [B, H*W*C], got shape "
            f"{x.shape}"
        )
    return x


BN_REFERENCE = 500
"""Training inputs whose statistics :func:`evaluation_apply_fn` normalises with."""


def evaluation_apply_fn(
    model: nn.Module, x_train: Any, reference: int = BN_REFERENCE
) -> Callable[[PyTree, jax.Array], jax.Array]:
    """The ``apply(net_params, x)`` that scores a network on held-out inputs.

    :func:`apply_fn` for a network without batch normalisation. A network whose call takes
    ``stats_rows`` (batch normalisation over the batch, :class:`~sgrld.bnn.resnet.ResNet20`)
    normalises every input by the statistics of the first ``reference`` training inputs at the
    same parameters: ``apply(net, x) = f_net([x_ref; x], stats from x_ref)[len(x_ref):]``, one
    forward pass, so a prediction depends on its own input alone (not on the other inputs of
    its evaluation batch, nor on padding). It costs ``reference`` more rows per call.

    Args:
        model: a Flax module.
        x_train: training inputs (the reference are its first ``reference`` rows).
        reference: how many.

    Returns:
        The apply function.

    Example:
        >>> from sgrld.bnn.resnet import ResNet20
        >>> model, x = ResNet20(width=2), jnp.ones((6, 8, 8, 3))
        >>> net = init_params(model, jax.random.key(0), x.shape)
        >>> apply = evaluation_apply_fn(model, x, reference=4)
        >>> bool(jnp.allclose(apply(net, x[:1]), apply(net, x)[:1], atol=1e-6))
        True
    """
    if "stats_rows" not in inspect.signature(model.__call__).parameters:
        return apply_fn(model)
    ref = jnp.asarray(x_train[:reference])
    rows = len(ref)

    def apply(net_params: PyTree, x: jax.Array) -> jax.Array:
        both = jnp.concatenate([ref.astype(x.dtype), x])
        return model.apply({"params": net_params}, both, stats_rows=rows)[rows:]

    return apply


def init_params(model: nn.Module, key: jax.Array, input_shape: Sequence[int]) -> PyTree:
    """Initialise a Flax module and return its parameters, the ``"net"`` part of ``params``.

    ``net_params = model.init(key, zeros(input_shape))["params"]``, compiled with ``jax.jit``
    once per model and input shape (a module that cannot be hashed is traced at every call).
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
    shape = tuple(int(d) for d in input_shape)
    try:
        hash(model)
    except TypeError:  # a field that cannot be hashed (a list, a dict): no cache
        return jax.jit(model.init)(key, jnp.zeros(shape, jnp.float32))["params"]
    return _init(model, key, shape)


@partial(jax.jit, static_argnums=(0, 2))
def _init(model: nn.Module, key: jax.Array, shape: tuple[int, ...]) -> PyTree:
    return model.init(key, jnp.zeros(shape, jnp.float32))["params"]


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
