"""The "Google ResNet-20" of Fortuin et al. (2021) for CIFAR-10 (Yu et al., 2023, Sec. 4.4):
:class:`ResNet20`, its :class:`ResidualBlock` and :class:`BatchNorm`, which normalises by the
statistics of the batch itself (or of its first rows: :func:`sgrld.bnn.models.evaluation_apply_fn`
evaluates with those of fixed training images).

References:
    Fortuin, Garriga-Alonso, Ober, Wenzel, Rätsch, Turner, van der Wilk, Aitchison. Bayesian
    Neural Network Priors Revisited. ICLR 2022 (code: ``bnn_priors``, ``models/google_resnet.py``).
"""

from __future__ import annotations

from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp

from sgrld.bnn.convolutions import conv_layer
from sgrld.bnn.models import as_images, he_normal


class BatchNorm(nn.Module):
    """Batch normalisation with the statistics of the batch itself, and no running averages.

    ``y = (x − μ)/sqrt(σ² + ε)·γ + β`` per channel (last axis), with ``μ``, ``σ²`` the mean and
    biased variance over all other axes of ``x`` (``torch.nn.BatchNorm2d`` in ``train()`` mode),
    or over its first ``stats_rows`` rows only: then the other rows are normalised with the
    statistics of those, which is how :func:`evaluation_apply_fn` evaluates a network on
    statistics of fixed training inputs. ``γ`` (``scale``) starts at 1, ``β`` (``bias``) at 0.
    Keeping no running averages keeps the parameters the only state, so the network samples like
    any other (a running average would be a second, non-Langevin state per chain).

    Attributes:
        epsilon: ``ε`` (torch's default).

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[1.0], [3.0], [5.0]])
        >>> net = BatchNorm().init(jax.random.key(0), x)
        >>> BatchNorm().apply(net, x).round(3).ravel().tolist()  # μ = 3, σ² = 8/3
        [-1.225, 0.0, 1.225]
        >>> BatchNorm().apply(net, x, stats_rows=2).round(3).ravel().tolist()  # μ = 2, σ² = 1
        [-1.0, 1.0, 3.0]
    """

    epsilon: float = 1e-5

    @nn.compact
    def __call__(self, x: jax.Array, stats_rows: int | None = None) -> jax.Array:
        """Normalise ``x [..., C]`` per channel with the statistics of ``x[:stats_rows]``."""
        ref = x if stats_rows is None else x[:stats_rows]
        axes = tuple(range(x.ndim - 1))
        mean = jnp.mean(ref, axes)
        var = jnp.mean(jnp.square(ref - mean), axes)
        scale = self.param("scale", nn.initializers.ones, (x.shape[-1],), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (x.shape[-1],), jnp.float32)
        return (x - mean) * jax.lax.rsqrt(var + self.epsilon) * scale + bias


class ResidualBlock(nn.Module):
    """The basic block of :class:`ResNet20`: ``relu(BN(conv(relu(BN(conv(x))))) + shortcut(x))``.

    Both convolutions are 3x3 with padding 1 and no bias, the first with ``strides``; the shortcut
    is the identity, or, when the block changes the resolution, a 1x1 convolution with that
    stride followed by batch normalisation (bnn_priors ``BasicBlock``).

    Attributes:
        features: output channels.
        strides: stride of the first convolution and of the shortcut.
        conv: how the convolutions are computed (:data:`CONVOLUTIONS`).

    Example:
        >>> block = ResidualBlock(features=4, strides=2)
        >>> net = jax.eval_shape(block.init, jax.random.key(0), jnp.zeros((1, 8, 8, 2)))
        >>> sorted(net["params"])  # the 1x1 shortcut and its normalisation come last
        ['BatchNorm_0', 'BatchNorm_1', 'BatchNorm_2', 'Conv_0', 'Conv_1', 'Conv_2']
    """

    features: int
    strides: int = 1
    conv: str = "auto"

    @nn.compact
    def __call__(self, x: jax.Array, stats_rows: int | None = None) -> jax.Array:
        """Map ``[B, H, W, C_in]`` to ``[B, H/strides, W/strides, features]``."""
        stride = (self.strides, self.strides)
        conv = partial(
            conv_layer, self.features, conv=self.conv, use_bias=False, kernel_init=he_normal
        )
        y = conv((3, 3), strides=stride, padding=((1, 1), (1, 1)))(x)
        y = nn.relu(BatchNorm()(y, stats_rows))
        y = conv((3, 3), padding=((1, 1), (1, 1)))(y)
        y = BatchNorm()(y, stats_rows)
        if self.strides != 1 or x.shape[-1] != self.features:
            x = BatchNorm()(conv((1, 1), strides=stride, padding="VALID")(x), stats_rows)
        return nn.relu(y + x)


class ResNet20(nn.Module):
    """The "Google ResNet-20" of Fortuin et al. (2021), as Yu et al. (2023) sample it on CIFAR-10.

    A 3x3 convolution to ``width`` channels, batch normalisation and ReLU; three stacks of
    ``(depth − 2)/6`` :class:`ResidualBlock` with ``width``, ``2·width`` and ``4·width``
    channels, the second and third stacks starting with stride 2; a global average (the
    authors' ``AvgPool2d(8)`` on the 8x8 maps of a 32x32 image) and a dense layer with bias.
    Convolutions have no bias; padding is 1 on every side, as in torch (``"SAME"`` would pad a
    stride-2 convolution on one side only). This is bnn_priors' ``google_resnet.ResNet`` (from
    google-research ``cold_posterior_bnn``) with ``bn=True``, as in all of the paper's runs.

    Normalisation: :class:`BatchNorm` with the statistics of the minibatch, as the authors'
    sampler sees its network (``train()`` mode); its ``γ`` and ``β`` are sampled with the
    weights (the authors give them a flat prior; a :mod:`sgrld.bnn.priors` prior treats them
    as biases). The authors evaluate with torch's running averages, which mix the statistics of
    the last few dozen steps' parameters; here a sample is evaluated with statistics computed
    at its own parameters, on fixed training images (:func:`evaluation_apply_fn`).

    Inputs are NHWC images or flat row-major NHWC vectors (reshaped to ``image_shape``).

    Attributes:
        width: channels of the first stack (16 in the paper; 0.27 M parameters).
        depth: ``6n + 2`` layers (20: three blocks per stack).
        num_outputs: number of classes.
        image_shape: ``(H, W, C)`` used to reshape flat inputs.
        conv: how the convolutions are computed, one of :data:`CONVOLUTIONS` (``"auto"``: as
            patches and a matrix product on a CPU, where XLA's convolution is slow inside the
            runner's ``lax.scan``, jax-ml/jax#12868; XLA's convolution elsewhere). The
            parameters do not depend on it.

    Example:
        >>> from sgrld.bnn.models import apply_fn, init_params
        >>> model = ResNet20()
        >>> net = jax.eval_shape(lambda: init_params(model, jax.random.key(0), (1, 32, 32, 3)))
        >>> sum(leaf.size for leaf in jax.tree.leaves(net))
        272474
        >>> jax.eval_shape(apply_fn(model), net, jnp.zeros((2, 3072))).shape  # flat input
        (2, 10)
    """

    width: int = 16
    depth: int = 20
    num_outputs: int = 10
    image_shape: tuple[int, int, int] = (32, 32, 3)
    conv: str = "auto"

    @nn.compact
    def __call__(self, x: jax.Array, stats_rows: int | None = None) -> jax.Array:
        """Map images to logits ``[B, num_outputs]``; ``stats_rows`` as :class:`BatchNorm`."""
        if (self.depth - 2) % 6 or self.depth < 8:
            raise ValueError(
                f"ResNet depth must be 6n + 2 with n >= 1 (20, 32, ...), got {self.depth}"
            )
        x = as_images(x, self.image_shape, "ResNet20")
        x = conv_layer(
            self.width,
            (3, 3),
            conv=self.conv,
            padding=((1, 1), (1, 1)),
            use_bias=False,
            kernel_init=he_normal,
        )(x)
        x = nn.relu(BatchNorm()(x, stats_rows))
        for stack in range(3):
            for block in range((self.depth - 2) // 6):
                strides = 2 if stack > 0 and block == 0 else 1
                x = ResidualBlock(self.width * 2**stack, strides, conv=self.conv)(x, stats_rows)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_outputs, kernel_init=he_normal)(x)
