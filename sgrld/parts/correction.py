"""The correction term Γ(θ) of Riemannian Langevin dynamics, for every metric.

SGRLD targets ``p(θ)`` only if its drift includes ``Γ_i(θ) = Σ_j ∂(G⁻¹)_ij / ∂θ_j``
(Ma et al., 2015); the published adaptive samplers drop it and are biased (Rensmeyer & Niggemann).
Every metric here is ``G⁻¹ = F(S)`` with ``S`` a moving average of a statistic ``s(g(θ))``; its
limiting metric is ``F(s(θ))``, whose Γ is, for a probe ``z`` with ``E[z zᵀ] = I``,

    Γ = E_z[ D_S[F(S)·z] ( D_θ s · z ) ],       D_θ s · z = s′(g) · (H z),

with ``H z`` one Hessian-vector product (a forward-over-reverse JVP of the gradient). Evaluating
``D_S F`` at the current average ``S_t`` rather than through it is Rensmeyer & Niggemann's
``1/(1 − decay)`` rescaling done exactly: differentiating through the average sees only a
``(1 − decay)`` share.

A :class:`Correction` is a part of a sampler: it owns the gradient evaluation (with the
Hessian-vector products it needs), the update of the metric's statistic, the reduction over probes
and the warm-up. Three exist (:data:`MODES`, the ``correction`` argument of :func:`sgrld.sgrld`):

* :func:`none`: Γ dropped, the samplers as published; one gradient.
* :func:`hutchinson`: the estimator above with Rademacher probes (unbiased; one probe costs about
  one extra forward-over-reverse pass).
* :func:`exact`: the full trace over the D basis vectors; D passes, for small problems and tests.

The derivative ``D_S[F(S)·z]`` along ``s′(g)·(H z)`` is the composition of two JVPs, unless the
metric supplies it directly (``Metric.inv_grad_tangent``: Shampoo, in its factors' eigenbases).

Example:
  >>> import jax, jax.numpy as jnp, sgrld
  >>> metric = sgrld.metrics.rmsprop()
  >>> params = jnp.array([0.5, -1.0])
  >>> grad_fn = lambda p: (jnp.sum(p**2), 2 * p, 2 * p)   # (potential, gradient, metric gradient)
  >>> out = hutchinson().estimate(jax.random.key(0), grad_fn, params, metric, metric.init(params))
  >>> out.gamma.shape, int(out.metric_state.count)
  ((2,), 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from sgrld.metrics.metric import Metric, MetricState, inv_tangent, vanishes_in_the_typical_set
from sgrld.numerics.checks import Bound
from sgrld.numerics.noise import rademacher
from sgrld.numerics.pytrees import PyTree
from sgrld.parts import share as shares

GradFn = Callable[[PyTree], tuple[jax.Array, PyTree, PyTree]]
"""``params -> (Û/N, ∇Û/N, the gradient the metric's statistic is computed from)``."""
MODES = ("none", "hutchinson", "exact")
"""The correction modes, by name; ``None`` is accepted as ``"none"``, and :func:`sgrld.sgrld`
also takes :data:`AUTO` (:func:`resolved_mode`)."""
AUTO = "auto"
"""``correction_scale="auto"``: the share of Γ estimated online (:mod:`sgrld.parts.share`);
``correction="auto"``: the mode :func:`resolved_mode` chooses."""


class Estimate(NamedTuple):
    """What a correction returns for one step.

    Attributes:
      value: Û(θ)/N on the step's batch.
      grad: ∇Û(θ)/N.
      metric_state: the metric's state with the step's gradient folded in (``S_t``).
      gamma: Γ̂(θ), shaped like the parameters (zeros without a correction or before warm-up).
      share: the share's moments (:class:`sgrld.parts.share.ShareState`) with θ_t folded in, for
        ``scale="auto"``; ``()`` otherwise.
    """

    value: jax.Array
    grad: PyTree
    metric_state: MetricState
    gamma: PyTree
    share: PyTree = ()


class Correction(NamedTuple):
    """A correction mode: ``estimate(key, grad_fn, params, metric, metric_state, share=())
    -> Estimate``.

    Attributes:
      mode: its name in :data:`MODES`.
      scale: c, the share of Γ the integrator adds (1: correct, 0: dropped; 1 with ``adaptive``,
        whose share is in Γ̂ itself).
      estimate: the gradient, the updated metric state and Γ̂ of one step.
      adaptive: Γ̂ carries the online share ĉ (``scale="auto"``); ``estimate`` then takes and
        returns the share's moments.
    """

    mode: str
    scale: float
    estimate: Callable[..., Estimate]
    adaptive: bool = False


def rademacher_like(key: jax.Array, tree: PyTree, num: int) -> PyTree:
    """``num`` Rademacher (±1) probes shaped like ``tree``, stacked on a leading axis.

    The signs of ``jax.random.rademacher`` with one subkey per leaf, drawn by
    :func:`sgrld.numerics.noise.rademacher` (the same numbers, the hash unrolled).
    """
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, len(leaves))
    return treedef.unflatten(
        [
            rademacher(k, (num, *jnp.shape(x)), dtype=x.dtype)
            for k, x in zip(keys, leaves, strict=True)
        ]
    )


def basis_like(tree: PyTree) -> PyTree:
    """The D standard basis vectors of the flattened ``tree``, stacked on a leading axis."""
    flat, unravel = ravel_pytree(tree)
    return jax.vmap(unravel)(jnp.eye(flat.size, dtype=flat.dtype))


def gamma_from_probes(
    metric: Metric,
    metric_state: MetricState,
    metric_grads: PyTree,
    z: PyTree,
    hz: PyTree,
    *,
    reduce: str,
) -> PyTree:
    """Γ from probes ``z`` and the Hessian-vector products ``hz`` of the metric's gradient.

    Args:
      metric: the metric.
      metric_state: its state after folding in the current gradient (``S_t``).
      metric_grads: the gradient the statistic is computed from.
      z: probes stacked on a leading axis.
      hz: ``H z`` for each probe (same stacking).
      reduce: ``"mean"`` (Hutchinson) or ``"sum"`` (exact trace over a basis).

    Returns:
      Γ, shaped like the parameters.
    """
    if metric.statistic is None:
        return jax.tree.map(jnp.zeros_like, metric_grads)

    def one(z1, hz1):
        if metric.inv_grad_tangent is not None:
            return metric.inv_grad_tangent(metric_state, z1, metric_grads, hz1)
        _, dstat = jax.jvp(metric.statistic, (metric_grads,), (hz1,))
        return inv_tangent(metric, metric_state, z1, dstat)

    if jax.tree.leaves(z)[0].shape[0] == 1:  # no vmap of one: it transposes Shampoo's blocks
        return one(jax.tree.map(lambda x: x[0], z), jax.tree.map(lambda x: x[0], hz))
    per_probe = jax.vmap(one)(z, hz)
    combine = jnp.mean if reduce == "mean" else jnp.sum
    return jax.tree.map(lambda x: combine(x, axis=0), per_probe)


def none() -> Correction:
    """No correction: one gradient, the metric updated with it, Γ̂ = 0 (the published samplers)."""

    def estimate(key, grad_fn, params, metric, metric_state, share=()):
        del key
        value, g, gm = grad_fn(params)
        zeros = jax.tree.map(jnp.zeros_like, params)
        return Estimate(value, g, metric.update(metric_state, gm), zeros, share)

    return Correction("none", 0.0, estimate)


NUM_PROBES = Bound(1)
"""``num_probes``, an integer."""
WARMUP = Bound(0)
"""``correction_warmup``, an integer (or ``None``)."""


def _check_probes(num_probes: int) -> int:
    if int(num_probes) != num_probes or not NUM_PROBES.holds(num_probes):
        raise ValueError(f"num_probes must be an integer {NUM_PROBES.text()}, got {num_probes!r}")
    return int(num_probes)


def _check_warmup(warmup: int | None) -> int | None:
    if warmup is not None and (int(warmup) != warmup or not WARMUP.holds(warmup)):
        raise ValueError(
            f"correction_warmup must be None or an integer {WARMUP.text()}, got {warmup!r}"
        )
    return None if warmup is None else int(warmup)


def _check_scale(scale: float | str) -> float | str:
    if scale == AUTO:
        return AUTO
    if isinstance(scale, str) or not math.isfinite(float(scale)):
        raise ValueError(f"correction_scale must be finite or {AUTO!r}, got {scale!r}")
    return float(scale)


def _share_probes(metric: Metric, share: PyTree, params: PyTree, z: PyTree):
    """``(ĉ⊙z, share)``: the probes scaled by the share with θ_t folded in (``scale="auto"``).
    A metric that is no moving average (``Metric.decay`` is ``None``) is a function of θ: its
    share is 1, the probes and the moments are left as they are (``share_value`` gives 1)."""
    if metric.decay is None:
        return z, share
    share = shares.share_update(share, params, decay=metric.decay, order=metric.statistic_order)
    c = shares.share_value(share)
    return jax.tree.map(lambda ci, zi: (ci * zi).astype(zi.dtype), c, z), share


def _probed(
    mode: str,
    draw: Callable[[jax.Array, PyTree], PyTree],
    reduce: str,
    scale: float | str,
    warmup: int | None,
) -> Correction:
    """A correction from probes ``draw(key, params)``, stacked on a leading axis.

    Γ̂ is zero until the metric has made ``warmup`` updates (``None``: the metric's own warm-up,
    :attr:`sgrld.metrics.Metric.warmup`), since ``D_S F`` at a statistic still near its initial
    value is far from the derivative of the limiting metric. With ``scale="auto"`` the
    Hessian-vector products are taken along ``ĉ⊙z`` (:mod:`sgrld.parts.share`).
    """
    warmup = _check_warmup(warmup)
    adaptive = _check_scale(scale) == AUTO

    def estimate(key, grad_fn, params, metric, metric_state, share=()):
        z = draw(key, params)
        tangents = z
        if adaptive:
            tangents, share = _share_probes(metric, share, params, z)
        if jax.tree.leaves(z)[0].shape[0] == 1:  # one forward-over-reverse pass
            first = jax.tree.map(lambda x: x[0], tangents)
            primal, tangent = jax.jvp(grad_fn, (params,), (first,))
            hz = jax.tree.map(lambda x: x[None], tangent[2])
        else:
            primal, linear = jax.linearize(grad_fn, params)
            hz = jax.vmap(lambda v: linear(v)[2])(tangents)
        value, g, gm = primal
        metric_state = metric.update(metric_state, gm)
        gamma = gamma_from_probes(metric, metric_state, gm, z, hz, reduce=reduce)
        steps = metric.warmup if warmup is None else warmup
        if steps:
            warm = metric_state.count > steps
            gamma = jax.tree.map(lambda x: jnp.where(warm, x, jnp.zeros_like(x)), gamma)
        return Estimate(value, g, metric_state, gamma, share)

    return Correction(mode, 1.0 if adaptive else float(scale), estimate, adaptive)


def hutchinson(
    num_probes: int = 1,
    *,
    scale: float | str = 1.0,
    warmup: int | None = None,
    probe_fn: Callable[[jax.Array, PyTree, int], PyTree] = rademacher_like,
) -> Correction:
    """Γ̂ = mean over ``num_probes`` Rademacher probes z of ``D_S[F(S)·z](s′(g)·Hz)`` (unbiased).

    Args:
      num_probes: probes per step; one costs about one extra forward-over-reverse pass.
      scale: c, the share of Γ applied; ``"auto"``: the share ĉ estimated online, per leaf
        (:mod:`sgrld.parts.share`).
      warmup: metric updates before Γ̂ is applied (``None``: the metric's warm-up).
      probe_fn: ``(key, params, num) -> probes`` with ``E[z zᵀ] = I``, stacked on a leading axis.

    Returns:
      The :class:`Correction`.
    """
    num = _check_probes(num_probes)
    return _probed("hutchinson", lambda key, p: probe_fn(key, p, num), "mean", scale, warmup)


def exact(*, scale: float | str = 1.0, warmup: int | None = None) -> Correction:
    """Γ as the full trace over the D basis vectors (D Hessian-vector products): small problems.

    Args:
      scale: c, the share of Γ applied, or ``"auto"`` (:func:`hutchinson`).
      warmup: metric updates before Γ is applied (``None``: the metric's warm-up).

    Returns:
      The :class:`Correction`.
    """
    return _probed("exact", lambda key, p: basis_like(p), "sum", scale, warmup)


def resolved_mode(mode: str | None, metric: Metric | None, adapt_until: object) -> str:
    """``mode`` (``None``: ``"none"``), :data:`AUTO` resolved: ``"hutchinson"`` where the metric
    adapts before a freeze (``adapt_until`` not ``None``) and its statistic is the mean gradient
    (:func:`~sgrld.metrics.metric.vanishes_in_the_typical_set`: Monge's), ``"none"`` elsewhere.

    Without Γ an adapting metric samples ``p·G^{1−c}`` (c = 0; Rensmeyer & Niggemann), which
    weights the regions where G is large; Monge's ``G = I + α² m mᵀ`` grows with the squared
    gradient, so before the freeze the chains drift towards large gradients. On the digits'
    horseshoe MLP (Monge, α² 0.1, lr 0.0583, seed 0) the potential climbed from −130 to 1,262
    over 480 steps and the run diverged at step 493, before the freeze at 750; with Γ before the
    freeze it completed (test log-likelihood −0.109; RESULTS §33). The other metrics'
    statistics (squared or per-example gradients) ran without the drift at their chosen rates,
    and keep Γ off by default: Γ costs about one more pass a step while it is on.

    Example:
      >>> import sgrld
      >>> m = sgrld.metrics.monge()
      >>> resolved_mode("auto", m, "auto"), resolved_mode("auto", m, None)
      ('hutchinson', 'none')
      >>> resolved_mode("auto", sgrld.metrics.rmsprop(), 750), resolved_mode("exact", m, None)
      ('none', 'exact')
    """
    if mode != AUTO:
        return "none" if mode is None else mode
    adapting = isinstance(metric, Metric) and adapt_until is not None and adapt_until != 0
    return "hutchinson" if adapting and vanishes_in_the_typical_set(metric) else "none"


def from_mode(
    mode: str | None,
    *,
    scale: float | str = 1.0,
    num_probes: int = 1,
    warmup: int | None = None,
) -> Correction:
    """The correction named ``mode`` (one of :data:`MODES`, or ``None`` for ``"none"``).

    Example:
      >>> from_mode("hutchinson", num_probes=2).mode
      'hutchinson'
    """
    mode = "none" if mode is None else mode
    warmup = _check_warmup(warmup)
    scale = _check_scale(scale)
    _check_probes(num_probes)
    if mode not in MODES:
        raise ValueError(f"correction must be one of {MODES} (or None), got {mode!r}")
    if mode == "hutchinson":
        return hutchinson(num_probes, scale=scale, warmup=warmup)
    if mode == "exact":
        return exact(scale=scale, warmup=warmup)
    return none()
