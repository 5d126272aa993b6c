"""The fast path of the per-example statistics: each Dense or Conv layer's inputs ``a`` and
output signals δ, from one forward and backward pass.

* **Dense.** For a Flax ``nn.Dense`` layer ``out = a·W + b`` called on per-example inputs
  ``a [B, in]``, the gradient of example i's log-likelihood is ``gᵢ[W] = aᵢ δᵢᵀ`` and
  ``gᵢ[b] = δᵢ`` with ``δᵢ = ∂ log p(yᵢ|xᵢ, θ)/∂outᵢ``. On inputs ``[B, *positions, in]`` (a Dense
  layer applied at every position of a sequence or an image) the gradient sums over the positions:
  ``gᵢ[W] = Σₚ aᵢₚ δᵢₚᵀ``, ``gᵢ[b] = Σₚ δᵢₚ``.
* **Conv.** A Flax ``nn.Conv`` layer (channels last, undilated, ungrouped, unmasked, with shared
  weights; ``"SAME"``, ``"VALID"`` or explicit padding) is a Dense layer at every output position
  p on the patch ``Pᵢₚ`` of the padded input under the window (:func:`sgrld.numerics.im2col.
  im2col_patches`), with the kernel ``W [*window, C, O]`` reshaped to ``[K·C, O]``:
  ``gᵢ[W] = Σₚ Pᵢₚ δᵢₚᵀ``, ``gᵢ[b] = Σₚ δᵢₚ``, whichever way the convolution itself is computed
  (XLA's or im2col, :data:`sgrld.bnn.convolutions.CONVOLUTIONS`).

The layers' calls are intercepted (``flax.linen.intercept_methods``): each input is recorded and
a zero perturbation added to each output, whose gradient is δ, so one forward and backward pass
yields the minibatch gradient and every layer's ``a`` and δ without rewriting the model
(:func:`signals`). A call is on the fast path when its parameters are leaves of ``params`` that
enter the likelihood through that call only (:func:`layer_taps`); the others are left to
:mod:`sgrld.numerics.per_example`'s ``vmap(grad)`` fallback. Used by
:mod:`sgrld.numerics.per_example`.

In a model whose layers couple the examples (batch normalisation over the minibatch, as
:class:`sgrld.bnn.ResNet20`), δᵢ is the gradient of the minibatch's summed log-likelihood at
example i's output, so ``gᵢ`` includes the coupling; the fallback instead differentiates each
example alone (a minibatch of one). Neither is the gradient of an independent example's
log-likelihood, which such a model does not have.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.numerics.im2col import im2col_patches


class ConvGeometry(NamedTuple):
    """How a Conv call forms its patches: the ``window``, ``strides`` and explicit ``padding``
    (``(low, high)`` per spatial dimension)."""

    window: tuple[int, ...]
    strides: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]


class Tap(NamedTuple):
    """A layer call on the fast path.

    Attributes:
      kernel: the leaf index of its kernel.
      bias: the leaf index of its bias (``None``: none).
      call: its position among the intercepted calls (which perturbation is its output's).
      conv: a Conv call's :class:`ConvGeometry` (``None``: a Dense call).
    """

    kernel: int
    bias: int | None
    call: int
    conv: ConvGeometry | None = None

    @property
    def leaves(self) -> tuple[int, ...]:
        """The leaf indices of its parameters."""
        return (self.kernel,) if self.bias is None else (self.kernel, self.bias)


def _as_tuple(value: int | Sequence[int] | None, n: int) -> tuple[int, ...]:
    """Flax's strides and dilations: ``None`` (ones), one int for every dimension, or n ints."""
    if value is None:
        return (1,) * n
    return (int(value),) * n if isinstance(value, int) else tuple(int(v) for v in value)


def conv_geometry(module, inputs: jax.Array) -> ConvGeometry | None:
    """The patches of an ``nn.Conv`` call on ``inputs`` [B, *spatial, C], or ``None`` when the
    call is not a Dense layer on patches (dilation, feature groups, a mask, unshared weights,
    circular/causal/reflect padding, or inputs without exactly one batch dimension)."""
    from flax.linen.linear import canonicalize_padding

    window = tuple(module.kernel_size)
    n = len(window)
    plain = (
        module.feature_group_count == 1
        and module.mask is None
        and module.shared_weights
        and inputs.ndim == n + 2
        and _as_tuple(module.input_dilation, n) == (1,) * n
        and _as_tuple(module.kernel_dilation, n) == (1,) * n
    )
    padding = canonicalize_padding(module.padding, n) if plain else None
    if padding is None or padding in ("CIRCULAR", "CAUSAL", "REFLECT"):
        return None
    strides = _as_tuple(module.strides, n)
    if isinstance(padding, str):
        padding = jax.lax.padtype_to_pads(inputs.shape[1:-1], window, strides, padding)
    return ConvGeometry(window, strides, tuple((int(lo), int(hi)) for lo, hi in padding))


def intercepted(loglik_fn, params, batch, perturbations, found):
    """``loglik_fn(params, batch)`` with every Dense and Conv call recorded in ``found`` as
    ``(tap, input, output shape)`` (the tap's leaves −1 where not leaves of ``params``) and, if
    ``perturbations`` (a dict by call position) has the call, its output shifted by it."""
    import flax.linen as nn  # the fast path only: `import sgrld` stays free of Flax

    ids = {id(x): i for i, x in enumerate(jax.tree.leaves(params))}

    def interceptor(next_fun, args, kwargs, context):
        module = context.module
        layer = isinstance(module, nn.Dense | nn.Conv) and context.method_name == "__call__"
        if not layer:
            return next_fun(*args, **kwargs)
        out = next_fun(*args, **kwargs)
        variables = module.variables.get("params", {})
        bias = variables.get("bias")
        conv = conv_geometry(module, args[0]) if isinstance(module, nn.Conv) else None
        tap = Tap(
            ids.get(id(variables.get("kernel")), -1),
            None if bias is None else ids.get(id(bias), -1),
            len(found),
            conv,
        )
        if perturbations is not None and tap.call in perturbations:
            out = out + perturbations[tap.call]
        found.append((tap, args[0], out.shape))
        return out

    with nn.intercept_methods(interceptor):
        return loglik_fn(params, batch)


def layer_taps(loglik_fn, params, batch) -> tuple[list[Tap], list[tuple[int, ...]]]:
    """The Dense and Conv calls usable on the fast path and their output shapes (traced
    abstractly).

    A call is usable when its kernel (and bias) are leaves of ``params`` that no other call uses,
    its input and output have the batch size B as their leading dimension, and (Conv) it is a
    Dense layer on patches (:func:`conv_geometry`); a Dense call's input and output have the same
    positions ``[B, *positions, ·]``.
    """
    size = jax.tree.leaves(batch)[0].shape[0]
    found: list = []
    try:
        jax.eval_shape(lambda p, b: intercepted(loglik_fn, p, b, None, found), params, batch)
    except ImportError:  # no Flax: every leaf falls back
        return [], []
    uses: dict[int, int] = {}
    for tap, _, _ in found:
        for i in tap.leaves:
            uses[i] = uses.get(i, 0) + 1
    taps, shapes = [], []
    for tap, x, shape in found:
        ok = all(i >= 0 and uses[i] == 1 for i in tap.leaves)
        ok &= len(x.shape) >= 2 and x.shape[0] == size == shape[0]
        if tap.conv is None:
            ok &= x.shape[:-1] == shape[:-1]
        if ok:
            taps.append(tap)
            shapes.append(shape)
    return taps, shapes


class Signals(NamedTuple):
    """What one pass yields: per-tap inputs ``a`` and output signals ``δ`` (per example, scaled to
    the example's own log-likelihood), and the per-example log-likelihoods."""

    inputs: list[jax.Array]
    deltas: list[jax.Array]
    loglik: jax.Array


def signals(loglik_fn, prior_term, params, batch, taps, shapes, with_grad):
    """One forward and backward pass through the taps: ``(Û/N, ∇Û/N or None, Signals)``."""
    size = jax.tree.leaves(batch)[0].shape[0]
    zeros = {tap.call: jnp.zeros(s, jnp.float32) for tap, s in zip(taps, shapes, strict=True)}

    def objective(p, perturbations):
        found: list = []
        ll = intercepted(loglik_fn, p, batch, perturbations, found)
        inputs = [found[tap.call][1] for tap in taps]
        return -jnp.mean(ll) + prior_term(p), (ll, inputs)

    argnums = (0, 1) if with_grad else 1
    (value, (ll, inputs)), grads = jax.value_and_grad(objective, argnums, has_aux=True)(
        params, zeros
    )
    g, dperts = grads if with_grad else (None, grads)
    return value, g, Signals(inputs, [-size * dperts[tap.call] for tap in taps], ll)


def per_example_kernel_grads(tap: Tap, a: jax.Array, delta: jax.Array) -> jax.Array:
    """``[B, *kernel.shape]``: ``gᵢ[W] = Σₚ aᵢₚ δᵢₚᵀ`` of a tap whose input has positions (a
    Dense call on ``[B, *positions, in]``, or a Conv call, on its patches), in float32; the
    kernel's own shape for a Conv call (``[*window, C, O]``).

    Example:
      >>> a, d = jnp.ones((2, 3, 4)), jnp.ones((2, 3, 5))
      >>> per_example_kernel_grads(Tap(0, None, 0), a, d).shape  # 3 positions summed
      (2, 4, 5)
    """
    if tap.conv is not None:
        c = tap.conv
        a = im2col_patches(a, c.window, c.strides, c.padding)
    size, out = delta.shape[0], delta.shape[-1]
    a = a.reshape(size, -1, a.shape[-1]).astype(jnp.float32)
    d = delta.reshape(size, -1, out).astype(jnp.float32)
    grads = jnp.einsum("bpi,bpo->bio", a, d)
    if tap.conv is None:
        return grads
    return grads.reshape(size, *tap.conv.window, -1, out)
