"""Per-example outer products of the log-likelihood's gradient: the Fisher metrics' statistics.

For a minibatch of B examples with per-example gradients ``gᵢ = ∇ log p(ỹᵢ|xᵢ, θ)`` the Fisher
metrics (:mod:`sgrld.metrics.fisher`) average::

    diag:  (1/B) Σᵢ gᵢ ⊙ gᵢ                                   (DOP)
    cross: (1/B) Σᵢ gᵢ[bias_j] · gᵢ[kernel[..., j]]           (QDOP's bias–weight row, per unit j)
    full:  (1/B) Σᵢ gᵢ gᵢᵀ                                     (the full Fisher, small models)

with ``ỹᵢ = yᵢ`` (``labels="empirical"``, the OP variant) or ``ỹᵢ ~ p_θ(ỹ|xᵢ)`` (``"model"``, the
true Fisher). The observation function of a Fisher metric computes them in the same pass as the
minibatch gradient of the potential:

* **Products, shifts and scales of parameters (fast path).** The log-likelihood is traced and
  its parameters' uses found (:mod:`sgrld.numerics.jaxpr_taps`): a leaf that enters once, as an
  operand of a matrix product (a dense layer, of any library or none) or the kernel of an
  undilated, ungrouped convolution, or as a shift or scale broadcast over the examples (a bias,
  a normalisation's scale), reached through reshapes and transposes. A zero perturbation added
  to each such product's output has the output's cotangent δ as its gradient, so the minibatch
  gradient, each product's input ``a`` and δ come from one forward and backward pass; a dense
  layer's diagonal is then ``(a²)ᵀ(δ²)/B`` and its bias–weight row ``aᵀ(δ²)/B``, and a layer at
  several positions (a convolution, on its patches) forms its ``[B, *kernel.shape]`` per-example
  gradients in one product of the weight gradient's FLOPs
  (:mod:`sgrld.numerics.tap_statistics`). The full statistic forms every such leaf's
  per-example gradients so and multiplies them.
* **QDOP's bias–weight pairs:** the metric's state holds a row for each kernel and bias that
  their names pair (:func:`bias_pairs`: ``kernel``/``w`` with the output units last, Equinox's
  ``weight`` with them first); the trace confirms each pair, the bias added to the kernel's
  product along those units (:func:`~sgrld.numerics.tap_statistics.bias_units`). A pair it does
  not confirm, and one it finds that the names do not make, are DOP's, with a warning.
* **Every other leaf (fallback):** ``jax.vmap(jax.grad)`` of the per-example log-likelihood with
  respect to those leaves only: B per-example gradients in memory (B × the leaves' size) and about
  B single-example backward passes. A metric that falls back says so once, naming the leaves
  (a :class:`FallbackWarning`).

Parameters the log-likelihood does not depend on (a hierarchical prior's scales, found in its jaxpr)
carry no Fisher information; their statistic is held at 1, J₀'s value, so the metric is the
identity (SGLD) on them.

With model labels the statistic's expectation over ỹ depends on θ through p_θ as well; each
example's term carries the weight ``exp(ℓᵢ − stop_gradient(ℓᵢ)) = 1`` (ℓᵢ = log p(ỹᵢ|xᵢ, θ)),
whose derivative adds the score-function term ``term · ∇ℓᵢ``, so the Γ correction differentiates
the expected statistic without bias. Drawing ỹ costs one more forward pass and δ one more
backward pass.

Example:
  >>> import jax.numpy as jnp, sgrld
  >>> loglik = lambda p, b: -0.5 * (b[1] - (b[0] @ p["kernel"] + p["bias"])[:, 0]) ** 2
  >>> u = sgrld.potential(loglik, None, num_data=2)
  >>> params = {"bias": jnp.zeros(1), "kernel": jnp.ones((1, 1))}
  >>> batch = (jnp.array([[1.0], [2.0]]), jnp.zeros(2))
  >>> value, g, diag = observation_fn("diag", "empirical")(u)(params, batch, None)
  >>> diag["kernel"].item()  # mean over examples of (x·(y − x·w))² = (1 + 16) / 2
  8.5
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld.numerics.jaxpr_taps import find_taps, signals, trace
from sgrld.numerics.pytrees import PyTree
from sgrld.numerics.tap_statistics import (
    along,
    at_least_float32,
    bias_pairs,
    bias_units,
    tap_grads,
    tap_terms,
)

KINDS = ("diag", "qdiag", "full")
LABELS = ("empirical", "model")


class FallbackWarning(UserWarning):
    """Some parameters' per-example statistics use the ``vmap(grad)`` fallback."""


class QuasiDiagonal(NamedTuple):
    """QDOP's statistic: the diagonal (shaped like the parameters) and, per bias–kernel pair of
    :func:`bias_pairs`, the bias–weight row shaped like the kernel."""

    diag: PyTree
    cross: tuple[jax.Array, ...]


def unused_leaves(loglik_fn, params, batch) -> set[int]:
    """Indices of the leaves the log-likelihood does not depend on (e.g. a hierarchical prior's
    scales): a backward scan of its jaxpr for the variables its output needs. Conservative: a
    nested call that uses any input counts as using all of them."""
    from jax.extend.core import Var

    jaxpr = jax.make_jaxpr(lambda p: loglik_fn(p, batch))(params).jaxpr
    live = {v for v in jaxpr.outvars if isinstance(v, Var)}
    for eqn in reversed(jaxpr.eqns):
        if any(v in live for v in eqn.outvars):
            live.update(v for v in eqn.invars if isinstance(v, Var))
    return {i for i, v in enumerate(jaxpr.invars) if v not in live}


def _per_example_grads(loglik_fn, params, batch, indices):
    """``[B, *leaf.shape]``: each example's log-likelihood gradient for the leaves ``indices``."""
    leaves, treedef = jax.tree.flatten(params)

    def one(sub, example):
        full = list(leaves)
        for i, v in zip(indices, sub, strict=True):
            full[i] = v
        single = jax.tree.map(lambda a: a[None], example)
        return loglik_fn(treedef.unflatten(full), single)[0]

    return jax.vmap(jax.grad(one), in_axes=(None, 0))([leaves[i] for i in indices], batch)


def _mean(w, a):
    """``(1/B) Σᵢ wᵢ aᵢ`` over the leading axis."""
    return jnp.einsum("b,b...->...", w, a) / a.shape[0]


def _label_weights(loglik_fn, params, batch):
    """Per-example weights ``exp(ℓᵢ − stop_gradient(ℓᵢ))``: value 1, derivative ∇ℓᵢ."""
    ll = loglik_fn(params, batch)
    return jnp.exp(ll - jax.lax.stop_gradient(ll))


def _sampled_batch(loglik_fn, params, batch, key):
    """``(x, ỹ)`` with ``ỹ ~ p_θ(ỹ|x)`` drawn by the likelihood's ``sample(key, params, x)``."""
    sample = getattr(loglik_fn, "sample", None)
    if sample is None:
        raise ValueError(
            f'labels="model" draws ỹ ~ p_θ(ỹ|x), but the likelihood {loglik_fn!r} cannot sample: '
            "use a likelihood of sgrld.bnn.likelihoods (categorical, gaussian), give yours a "
            'sample(key, params, x) method, or use labels="empirical"'
        )
    if not isinstance(batch, tuple) or len(batch) != 2:
        raise ValueError(f'labels="model" needs batches (x, y); got {type(batch).__name__}')
    x, _ = batch
    return x, jax.lax.stop_gradient(sample(key, jax.lax.stop_gradient(params), x))


def _fallback_terms(kind, grads, w, indices, pairs):
    """Diagonal entries and cross rows from per-example gradients ``grads`` of ``indices``."""
    by_leaf = dict(zip(indices, grads, strict=True))
    diag = {i: _mean(w, jnp.square(at_least_float32(g))) for i, g in by_leaf.items()}
    cross = {}
    if kind == "qdiag":
        for k, b, axis in pairs:
            if k in by_leaf and b in by_leaf:
                gk, gb = by_leaf[k], along(by_leaf[b], 1, by_leaf[k].ndim - 1, axis)
                cross[(k, b, axis)] = _mean(w, at_least_float32(gk * gb))
    return diag, cross


def _warn_fallback(params, indices) -> None:
    """Say once which leaves the fast path could not see."""
    if not indices:
        return
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
    names = ", ".join(paths[i] for i in indices)
    warnings.warn(  # once per message: the warning's location is fixed
        f"per-example statistics (Fisher metrics, i-SGD, SGHMC's B̂) of {names} use the vmap(grad) "
        "fallback (B per-example gradients in memory): those leaves do not enter the "
        "log-likelihood once, as a dense layer's or an (undilated, ungrouped) convolution's "
        "kernel, or as a shift or scale broadcast over the examples",
        FallbackWarning,
        stacklevel=1,
    )


def _assemble(kind, params, diag, cross, pairs):
    """The observation of ``kind`` from diagonal entries and cross rows by leaf/pair."""
    leaves, treedef = jax.tree.flatten(params)
    diag_tree = treedef.unflatten([diag[i].astype(x.dtype) for i, x in enumerate(leaves)])
    if kind == "diag":
        return diag_tree
    rows = tuple(cross[p].astype(leaves[p[0]].dtype) for p in pairs)
    return QuasiDiagonal(diag_tree, rows)


def observation_fn(
    kind: str, labels: str, examples: int | None = None
) -> Callable[[Any], Callable]:
    """The :attr:`~sgrld.metrics.Metric.observation_fn` of a Fisher metric.

    Args:
      kind: ``"diag"``, ``"qdiag"`` (:class:`QuasiDiagonal`) or ``"full"`` (a [D, D] matrix over
        the flattened parameters).
      labels: ``"empirical"`` (ỹ = y) or ``"model"`` (ỹ ~ p_θ(ỹ|x); the likelihood needs a
        ``sample(key, params, x)`` method).
      examples: average the outer products of the minibatch's first ``examples`` examples only
        (``None``: all). Minibatches are random, so this is an unbiased, cheaper and noisier
        statistic; the gradient still uses the whole minibatch.

    Returns:
      ``potential -> fn`` with ``fn(params, batch, key) -> (Û/N, ∇Û/N, statistic)``.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if labels not in LABELS:
        raise ValueError(f"labels must be one of {LABELS}, got {labels!r}")
    if examples is not None and (
        isinstance(examples, bool) or int(examples) != examples or examples < 1
    ):
        raise ValueError(f"examples must be None or a positive integer, got {examples!r}")

    def bind(potential):
        def observe(params, batch, key):
            if labels == "empirical":
                return _observe(kind, potential, params, batch, examples)
            value, g = jax.value_and_grad(potential)(params, batch)
            first = _first(batch, examples)
            sampled = _sampled_batch(potential.loglik_fn, params, first, key)
            return _observe(kind, potential, params, sampled, None, (value, g))

        return observe

    return bind


def gradient_variance(potential) -> Callable:
    """``(params, batch) -> (Û/N, ∇Û/N, V̂)``: V̂ = s²/B per coordinate (float32), an unbiased
    estimate of the variance of the minibatch-mean gradient from its B per-example gradients
    (s² their sample variance; the prior's term is the same in every minibatch), computed from
    the per-example squares of the same pass as the gradient (DOP's statistic: the fast path,
    else the ``vmap(grad)`` fallback). Leaves the likelihood does not see get 0.

    Used by i-SGD's noise estimate and SGHMC's B̂.

    Example:
      >>> import jax.numpy as jnp, flax.linen as nn, sgrld
      >>> layer = nn.Dense(1)
      >>> loglik = lambda p, b: -0.5 * (b[1] - layer.apply({"params": p}, b[0])[:, 0]) ** 2
      >>> u = sgrld.potential(loglik, None, num_data=10)
      >>> params = {"bias": jnp.zeros(1), "kernel": jnp.zeros((1, 1))}
      >>> v = gradient_variance(u)(params, (jnp.ones((2, 1)), jnp.array([0.0, 2.0])))[2]
      >>> v["bias"].item()  # per-example gradients 0 and 2: s² = 2, B = 2
      1.0

    Raises:
      TypeError: ``potential`` is not built by :func:`sgrld.potential` (no per-example
        log-likelihoods).
    """
    if not hasattr(potential, "loglik_fn"):
        raise TypeError(
            "per-example gradient variances need a potential built by sgrld.potential(...) "
            "(per-example log-likelihoods)"
        )
    observe = observation_fn("diag", "empirical")(potential)

    def fn(params, batch):
        size = jax.tree.leaves(batch)[0].shape[0]
        if size < 2:
            raise ValueError("per-example gradient variances need minibatches of >= 2 examples")
        value, g, second = observe(params, batch, None)
        g_prior = jax.grad(potential.prior_term)(params)
        unseen = unused_leaves(potential.loglik_fn, params, batch)

        def variance(i, g, gp, m2):  # the likelihood's mean gradient is g − gp
            mean = at_least_float32(g) - at_least_float32(gp)
            var = jnp.maximum(at_least_float32(m2) - jnp.square(mean), 0.0) / (size - 1)
            return jnp.zeros_like(var) if i in unseen else var

        leaves, treedef = jax.tree.flatten(g)
        rows = zip(leaves, jax.tree.leaves(g_prior), jax.tree.leaves(second), strict=True)
        return value, g, treedef.unflatten([variance(i, *row) for i, row in enumerate(rows)])

    return fn


def _first(batch, examples):
    """The first ``examples`` examples of ``batch`` (all of them for ``None``)."""
    size = jax.tree.leaves(batch)[0].shape[0]
    if examples is None:
        return batch
    if examples > size:
        raise ValueError(f"examples={examples} exceeds the minibatch's {size} examples")
    return jax.tree.map(lambda a: a[:examples], batch)


def _fast_taps(kind, loglik_fn, params, batch, pairs):
    """The traced program and its taps (:mod:`sgrld.numerics.jaxpr_taps`) whose parameters the
    statistic takes from ``a`` and δ; for QDOP, only those that hold their whole bias–kernel
    pair."""
    size = jax.tree.leaves(batch)[0].shape[0]
    program = trace(loglik_fn, params, batch)
    taps = find_taps(program, len(jax.tree.leaves(params)), size)
    if kind == "qdiag":
        leaves = {t.leaf for t in taps}
        broken = {i for p in pairs if not set(p[:2]) <= leaves for i in p[:2]}
        taps = [t for t in taps if t.leaf not in broken]
    return program, taps


def _traced_pairs(kind, program, taps, params, pairs):
    """The ``pairs`` (:func:`bias_pairs`) of two taps that the trace confirms
    (:func:`~sgrld.numerics.tap_statistics.bias_units`); a warning names the others (their rows
    stay 0: DOP on those units) and the trace's pairs that the names do not make."""
    if kind != "qdiag":
        return []
    traced, leaves = bias_units(program, taps), {t.leaf for t in taps}
    on_taps = [p for p in pairs if {p[0], p[1]} <= leaves]
    named = {(k, b) for k, b, _ in pairs}
    wrong = [p for p in on_taps if p not in traced] + [p for p in traced if p[:2] not in named]
    if wrong:
        paths = [
            jax.tree_util.keystr(q) for q, _ in jax.tree_util.tree_flatten_with_path(params)[0]
        ]
        names = ", ".join(f"{paths[k]}/{paths[b]} (axis {a})" for k, b, a in sorted(wrong))
        warnings.warn(  # once per message: the warning's location is fixed
            f"QDOP's bias–weight rows of {names} are DOP's: the traced log-likelihood does not "
            "add that bias to that kernel's product along that axis, or the names do not pair "
            "them (a kernel kernel/w/weight and a bias bias/b with the same suffix)",
            FallbackWarning,
            stacklevel=1,
        )
    return [p for p in on_taps if p in traced]


def _observe(kind, potential, params, batch, examples, computed=None):
    """``(Û/N, ∇Û/N, statistic)``. ``computed``: ``(Û/N, ∇Û/N)`` of the data's minibatch when
    ``batch`` holds model labels ỹ (already cut to the statistic's examples); else ``None`` and
    the gradient comes from the pass that yields δ, over the whole ``batch``."""
    loglik_fn = potential.loglik_fn
    leaves = jax.tree.leaves(params)
    pairs = bias_pairs(params)
    program, taps = _fast_taps(kind, loglik_fn, params, batch, pairs)
    covered = {t.leaf for t in taps}
    unseen = unused_leaves(loglik_fn, params, batch) - covered
    rest = [i for i in range(len(leaves)) if i not in covered | unseen]
    _warn_fallback(params, rest)
    model = computed is not None
    sig = None
    if taps:
        v, grad, sig = signals(program, taps, potential.prior_term, params, batch, not model)
        value, g = computed if model else (v, grad)
        w = jnp.exp(sig.loglik - jax.lax.stop_gradient(sig.loglik)) if model else None
    else:
        value, g = computed if model else jax.value_and_grad(potential)(params, batch)
        w = _label_weights(loglik_fn, params, batch) if model else None
    stat_batch = _first(batch, examples)
    size = jax.tree.leaves(stat_batch)[0].shape[0]
    w = jnp.ones((size,), jnp.float32) if w is None else w[:size]
    grads = _per_example_grads(loglik_fn, params, stat_batch, rest) if rest else []
    full_size = jax.tree.leaves(batch)[0].shape[0]
    if kind == "full":
        by_leaf = dict(zip(rest, grads, strict=True))
        by_leaf.update(tap_grads(program, taps, sig, full_size, size))
        return value, g, _full(params, by_leaf, w)
    diag, cross = ({}, {})
    if taps:
        traced = _traced_pairs(kind, program, taps, params, pairs)
        diag, cross = tap_terms(kind == "qdiag", program, taps, sig, w, full_size, size, traced)
    more_diag, more_cross = _fallback_terms(kind, grads, w, rest, pairs)
    diag.update(more_diag)
    diag.update({i: jnp.ones(jnp.shape(leaves[i]), jnp.float32) for i in unseen})
    cross.update(more_cross)
    cross.update(
        {p: jnp.zeros(jnp.shape(leaves[p[0]]), jnp.float32) for p in pairs if p not in cross}
    )
    return value, g, _assemble(kind, params, diag, cross, pairs)


def _full(params, by_leaf, w):
    """``(1/B) Σᵢ wᵢ gᵢ gᵢᵀ`` over the flattened parameters from the per-example gradients
    ``[B, *leaf]`` by leaf index (taps' and fallback's); leaves not in ``by_leaf`` (unseen by the
    likelihood) get the identity's rows and columns."""
    leaves = jax.tree.leaves(params)
    size = w.shape[0]
    cols = [
        at_least_float32(by_leaf[i].reshape(size, -1))
        if i in by_leaf
        else jnp.zeros((size, jnp.size(x)), jnp.float32)
        for i, x in enumerate(leaves)
    ]
    flat = jnp.concatenate(cols, axis=1)
    seen = jnp.concatenate([jnp.full(c.shape[1], i in by_leaf) for i, c in enumerate(cols)])
    stat = jnp.einsum("b,bi,bj->ij", w, flat, flat) / size + jnp.diag(jnp.where(seen, 0.0, 1.0))
    return stat.astype(full_dtype(params))


def full_dtype(params: PyTree) -> jnp.dtype:
    """The full statistic's dtype: the flattened parameters', at least float32.

    Example:
      >>> import jax.numpy as jnp
      >>> full_dtype({"a": jnp.ones(2, jnp.bfloat16), "b": jnp.ones(1, jnp.float16)})
      dtype('float32')
    """
    return jnp.promote_types(jnp.result_type(*jax.tree.leaves(params)), jnp.float32)
