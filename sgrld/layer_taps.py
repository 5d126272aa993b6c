"""The Dense fast path of the per-example statistics: a layer's inputs ``a`` and output signals δ.

For a Flax ``nn.Dense`` layer ``out = a·W + b`` called on per-example inputs ``a`` [B, in], the
gradient of example i's log-likelihood is ``gᵢ[W] = aᵢ δᵢᵀ`` and ``gᵢ[b] = δᵢ`` with
``δᵢ = ∂ log p(yᵢ|xᵢ, θ)/∂outᵢ``. The layer's calls are intercepted
(``flax.linen.intercept_methods``): the input is recorded and a zero perturbation added to the
output, whose gradient is δ, so one forward and backward pass yields the minibatch gradient and
every layer's ``a`` and δ without rewriting the model (:func:`signals`). Used by
:mod:`sgrld.per_example`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class Tap(NamedTuple):
    """A Dense layer on the fast path: the leaf indices of its kernel and bias (``None``: none)."""

    kernel: int
    bias: int | None


def intercepted(loglik_fn, params, batch, perturbations, found):
    """``loglik_fn(params, batch)`` with every Dense call recorded in ``found`` as
    ``(tap, input, output shape)`` and, if ``perturbations`` is given, the k-th call's output
    shifted by ``perturbations[k]``."""
    import flax.linen as nn  # the fast path only: `import sgrld` stays free of Flax

    ids = {id(x): i for i, x in enumerate(jax.tree.leaves(params))}

    def interceptor(next_fun, args, kwargs, context):
        module = context.module
        if not isinstance(module, nn.Dense) or context.method_name != "__call__":
            return next_fun(*args, **kwargs)
        out = next_fun(*args, **kwargs)
        variables = module.variables.get("params", {})
        bias = variables.get("bias")
        tap = Tap(
            ids.get(id(variables.get("kernel")), -1),
            None if bias is None else ids.get(id(bias), -1),
        )
        if perturbations is not None:
            out = out + perturbations[len(found)]
        found.append((tap, args[0], out.shape))
        return out

    with nn.intercept_methods(interceptor):
        return loglik_fn(params, batch)


def dense_taps(loglik_fn, params, batch) -> tuple[list[Tap], list[tuple[int, ...]]]:
    """The Dense calls usable on the fast path and their output shapes (traced abstractly).

    A call is usable when its kernel (and bias) are leaves of ``params``, its input is
    ``[B, in]`` and its output ``[B, out]`` with B the batch size, and no other call uses them.
    """
    size = jax.tree.leaves(batch)[0].shape[0]
    found: list = []
    try:
        jax.eval_shape(lambda p, b: intercepted(loglik_fn, p, b, None, found), params, batch)
    except ImportError:  # no Flax: every leaf falls back
        return [], []
    uses: dict[int, int] = {}
    for tap, _, _ in found:
        for i in tap:
            if i is not None:
                uses[i] = uses.get(i, 0) + 1
    taps, shapes = [], []
    for tap, x, shape in found:
        leaves = [i for i in tap if i is not None]
        ok = all(i >= 0 and uses[i] == 1 for i in leaves)
        ok &= len(x.shape) == 2 and len(shape) == 2 and x.shape[0] == size == shape[0]
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


def signals(loglik_fn, prior_term, params, batch, shapes, with_grad):
    """One forward and backward pass through the taps: ``(Û/N, ∇Û/N or None, _Signals)``."""
    size = jax.tree.leaves(batch)[0].shape[0]
    zeros = [jnp.zeros(s, jnp.float32) for s in shapes]

    def objective(p, perturbations):
        found: list = []
        ll = intercepted(loglik_fn, p, batch, perturbations, found)
        inputs = [x for _, x, _ in found]
        return -jnp.mean(ll) + prior_term(p), (ll, inputs)

    argnums = (0, 1) if with_grad else 1
    (value, (ll, inputs)), grads = jax.value_and_grad(objective, argnums, has_aux=True)(
        params, zeros
    )
    g, dperts = grads if with_grad else (None, grads)
    return value, g, Signals(inputs, [-size * d for d in dperts], ll)
