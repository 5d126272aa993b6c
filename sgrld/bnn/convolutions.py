"""Convolutions of the BNN stack's networks: Flax's ``nn.Conv``, computed either by XLA's
convolution or, on a CPU, as patches and one matrix product (:func:`im2col_conv`): XLA's CPU backend
runs a convolution inside a loop body (the runner's ``lax.scan`` over an epoch) far slower than at
the top level of a program (jax-ml/jax#12868), and im2col does not (:data:`CONVOLUTIONS`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import flax.linen as nn
import jax

from sgrld.numerics.im2col import im2col_patches

CONVOLUTIONS = ("auto", "xla", "im2col")
"""How :func:`conv_layer` computes a convolution (the ``conv`` attribute of :class:`CNN` and
:class:`ResNet20`, the configuration's ``model.conv``): ``"xla"`` is XLA's convolution
(``lax.conv_general_dilated``, as ``nn.Conv``), ``"im2col"`` is :func:`im2col_conv`, and
``"auto"`` is ``"im2col"`` when JAX's default backend is the CPU and ``"xla"`` on a GPU or TPU.

Why: XLA's CPU backend runs a convolution, and above all its backward pass, 12-33x slower inside a
loop body (``lax.scan``, ``while``) than the same convolution at the top level of a jitted
function (jax-ml/jax#12868, open with jaxlib 0.10.2; no XLA flag helps), and sgrld's runner runs
each epoch as one ``lax.scan``. Strided slices, a concatenation and a matrix product do not pay
that: in a scan on a CPU, an SGLD step of Li et al.'s CNN ran 17-22x faster with ``"im2col"``
(0.7-1.1x the time of XLA's convolution called step by step from Python), ResNet-20 10-25x
faster (1.3-2.5x the step-by-step time; ``benchmarks/conv_in_loop.py``,
``benchmarks/resnet_step.py``). GPU and TPU convolutions are fast in loops, and there XLA's own
convolution is kept. Both compute the same function of the same parameters (equal to float32
rounding), so checkpoints, priors and saved samples do not depend on the choice."""


def resolve_conv(conv: str) -> str:
    """The convolution :func:`conv_layer` uses for ``conv``: ``"auto"`` resolved by the backend.

    ``"auto"`` gives ``"im2col"`` when ``jax.default_backend()`` is ``"cpu"``, else ``"xla"``
    (see :data:`CONVOLUTIONS` for why); ``"xla"`` and ``"im2col"`` are returned as they are. A
    model resolves it when it is traced, so a program compiled for the default backend gets the
    convolution that is fast there.

    Args:
        conv: one of :data:`CONVOLUTIONS`.

    Returns:
        ``"xla"`` or ``"im2col"``.

    Raises:
        ValueError: ``conv`` is not one of :data:`CONVOLUTIONS`.

    Example:
        >>> resolve_conv("xla")
        'xla'
        >>> resolve_conv("auto") == ("im2col" if jax.default_backend() == "cpu" else "xla")
        True
    """
    if conv not in CONVOLUTIONS:
        raise ValueError(f"conv must be one of {', '.join(CONVOLUTIONS)}, got {conv!r}")
    if conv == "auto":
        return "im2col" if jax.default_backend() == "cpu" else "xla"
    return conv


def im2col_conv(
    lhs: jax.Array,
    rhs: jax.Array,
    window_strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: Any = None,
    feature_group_count: int = 1,
    precision: Any = None,
) -> jax.Array:
    """A channels-last convolution as patches (im2col) and one matrix product.

    For inputs ``x [B, *spatial, C]`` padded to ``x̃`` and a kernel ``w [*window, C, O]``,

        ``y[b, p, o] = Σ_{k ∈ window} Σ_c x̃[b, s ⊙ p + k, c] · w[k, c, o]``

    (``p`` an output position, ``s`` the strides): the patches ``P[b, p, (k, c)] = x̃[b, s ⊙ p +
    k, c]`` are one strided slice of ``x̃`` per window offset ``k``, concatenated on the channel
    axis, and ``y = P · reshape(w, [K·C, O])``. It is ``lax.conv_general_dilated`` with
    ``("NHWC", "HWIO", "NHWC")`` dimension numbers (or their n-D analogue), undilated and
    ungrouped, with the same signature, so ``nn.Conv`` can call it (:func:`conv_layer`). Its
    backward pass is padding, slicing and matrix products, which XLA's CPU backend runs as fast
    inside ``lax.scan`` as outside (see :data:`CONVOLUTIONS`). The patches hold ``K`` copies of
    the input (25 for a 5x5 kernel, 9 for 3x3).

    Args:
        lhs: inputs ``[B, *spatial, C]``.
        rhs: kernel ``[*window, C, O]``.
        window_strides: the strides ``s``.
        padding: ``"SAME"``, ``"VALID"`` (``lax.padtype_to_pads``) or ``(low, high)`` per spatial
            dimension.
        lhs_dilation: ``None`` or ones (dilation is not supported).
        rhs_dilation: ``None`` or ones.
        dimension_numbers: ``None`` or channels-last (``("NHWC", "HWIO", "NHWC")`` in 2-D).
        feature_group_count: 1 (grouped convolutions are not supported).
        precision: the matrix product's ``precision``.

    Returns:
        ``y [B, *out_spatial, O]``.

    Raises:
        NotImplementedError: dilation, feature groups, or other dimension numbers.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (2, 7, 7, 3))
        >>> w = jax.random.normal(jax.random.key(1), (3, 3, 3, 4))
        >>> y = im2col_conv(x, w, (2, 2), "SAME")
        >>> ref = jax.lax.conv_general_dilated(
        ...     x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        >>> y.shape, bool(jnp.allclose(y, ref, atol=1e-5))
        ((2, 4, 4, 4), True)
    """
    n = lhs.ndim - 2
    channels_last = jax.lax.ConvDimensionNumbers(
        (0, n + 1, *range(1, n + 1)), (n + 1, n, *range(n)), (0, n + 1, *range(1, n + 1))
    )
    if dimension_numbers is not None and (
        jax.lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers) != channels_last
    ):
        raise NotImplementedError(
            f"im2col_conv takes channels-last inputs and [*window, in, out] kernels, got "
            f"dimension numbers {dimension_numbers}"
        )
    for name, dilation in (("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if dilation is not None and any(d != 1 for d in dilation):
            raise NotImplementedError(f"im2col_conv has no dilation, got {name}={dilation}")
    if feature_group_count != 1:
        raise NotImplementedError(
            f"im2col_conv has no feature groups, got feature_group_count={feature_group_count}"
        )
    strides = tuple(window_strides)
    if isinstance(padding, str):
        padding = jax.lax.padtype_to_pads(lhs.shape[1:-1], rhs.shape[:n], strides, padding)
    return _im2col_jit(lhs, rhs, strides, tuple(map(tuple, padding)), precision)


@partial(jax.jit, static_argnums=(2, 3, 4))
def _im2col_jit(lhs, rhs, strides, padding, precision):
    """:func:`im2col_conv` for explicit padding, one program (called op by op, outside a jitted
    function, its slices would otherwise compile one by one)."""
    patches = im2col_patches(lhs, rhs.shape[: lhs.ndim - 2], strides, padding)
    kernel = rhs.reshape(-1, rhs.shape[-1])
    return jax.lax.dot_general(
        patches, kernel, (((patches.ndim - 1,), (0,)), ((), ())), precision=precision
    )


def _im2col() -> Callable[..., jax.Array]:
    """``nn.Conv``'s ``conv_general_dilated_cls``: called with no arguments, gives the function."""
    return im2col_conv


def conv_layer(
    features: int, kernel_size: Sequence[int], *, conv: str = "auto", **kwargs: Any
) -> nn.Conv:
    """``nn.Conv(features, kernel_size, **kwargs)``, computed as ``conv`` says.

    ``y = x ⋆ w (+ b)`` either way: with ``resolve_conv(conv) == "xla"`` the plain ``nn.Conv``
    (``lax.conv_general_dilated``), with ``"im2col"`` the same ``nn.Conv`` calling
    :func:`im2col_conv`. The module, and so its name (``Conv_0``, ...), its parameters' names,
    shapes and initialisation, is the same, so parameters, checkpoints and priors (including the
    correlated prior that reads the kernel's window) do not depend on ``conv``. Call it inside a
    module's ``nn.compact`` method, where ``nn.Conv`` would be.

    Args:
        features: output channels.
        kernel_size: the window.
        conv: one of :data:`CONVOLUTIONS`.
        **kwargs: the other arguments of ``nn.Conv`` (``strides``, ``padding``, ``use_bias``,
            ``kernel_init``, ...).

    Returns:
        The ``nn.Conv`` module.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (2, 8, 8, 3))
        >>> xla, im2col = (conv_layer(4, (3, 3), conv=c) for c in ("xla", "im2col"))
        >>> net = xla.init(jax.random.key(1), x)
        >>> jax.tree.map(jnp.shape, net)  # nn.Conv's parameters either way
        {'params': {'bias': (4,), 'kernel': (3, 3, 3, 4)}}
        >>> jax.tree.map(lambda a, b: bool((a == b).all()), net, im2col.init(jax.random.key(1), x))
        {'params': {'bias': True, 'kernel': True}}
        >>> bool(jnp.allclose(xla.apply(net, x), im2col.apply(net, x), atol=1e-5))
        True
    """
    impl = _im2col if resolve_conv(conv) == "im2col" else None
    return nn.Conv(features, tuple(kernel_size), conv_general_dilated_cls=impl, **kwargs)
