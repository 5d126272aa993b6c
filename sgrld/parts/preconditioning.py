"""Preconditioning: the drift G⁻¹g and the coloured noise G^{−1/2}ξ of a step, and safeguards.

A :data:`Precondition` maps ``(metric_state, g, ξ, Γ̂)`` to :class:`Directions`. The plain one,
:func:`by_metric`, applies the metric; a safeguard wraps it (:func:`limit_drift`), so a sampler
needs no code of its own for either. :func:`tame_gamma` bounds Γ̂'s kick by the step's noise, and
:func:`clip_drift` a frozen metric's drift.

Example:
  >>> import jax.numpy as jnp, sgrld
  >>> m = sgrld.metrics.identity()
  >>> safe = limit_drift(by_metric(m), max_norm=1.0)
  >>> d = safe(m.init(jnp.zeros(2)), jnp.array([3.0, 4.0]), jnp.zeros(2), jnp.zeros(2))
  >>> d.drift.tolist(), bool(d.fallback)
  ([0.6000000238418579, 0.800000011920929], True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.metric import Metric
from sgrld.numerics.checks import Bound
from sgrld.numerics.pytrees import PyTree, tree_vdot


class Directions(NamedTuple):
    """The preconditioned quantities of one step.

    Attributes:
      drift: ``G⁻¹g``.
      noise: ``G^{−1/2}ξ``.
      gamma: Γ̂ (``None`` without a correction).
      fallback: True where a safeguard replaced the metric.
    """

    drift: PyTree
    noise: PyTree
    gamma: PyTree | None
    fallback: jax.Array


MAX_DRIFT_NORM = Bound(0, open_low=True)
"""``max_drift_norm`` (or ``None``)."""
GAMMA_KICK_LIMIT = Bound(0, open_low=True)
"""``gamma_kick_limit`` (or ``None``)."""
FROZEN_DRIFT_LIMIT = Bound(0, open_low=True)
"""``frozen_drift_limit`` (or ``None``)."""
FROZEN_DRIFT_SDS = 10.0
""":func:`sgrld.sgrld`'s default ``frozen_drift_limit``: a frozen metric's drift step clipped at 10
noise sds along each whitened direction (each coordinate, for a diagonal metric). On the
australian 400-400 MLP (RMSprop frozen at lr 0.028) every stretch of 250 steps had a drift step
of 30 to 170 noise sds, and one of 700 took a dead unit's bias from 18 to 321 and the chain
diverged; clipped at 10 (or 3) the chains completed. At 3 the clip also bound on a fifth of the
steps on the digits (RMSprop, lr 0.00145) and the test log-likelihood fell from −0.139 to
−0.154; at 10 it bound on 2 steps in 400 epochs and gave −0.139 (RESULTS §33)."""

Precondition = Callable[[Any, PyTree, PyTree, PyTree | None], Directions]
"""``(metric_state, g, ξ, Γ̂) -> Directions``."""


def by_metric(metric: Metric) -> Precondition:
    """``Directions(G⁻¹g, G^{−1/2}ξ, Γ̂, False)`` of ``metric``."""

    def precondition(metric_state, g, xi, gamma):
        drift = metric.inv(metric_state, g)
        noise = metric.inv_sqrt(metric_state, xi)
        return Directions(drift, noise, gamma, jnp.zeros((), bool))

    return precondition


def limit_drift(precondition: Precondition, max_norm: float) -> Precondition:
    """Where ``‖G⁻¹g‖ > max_norm``, use the identity metric scaled by ``max_norm/‖g‖`` instead.

    The drift becomes ``c·g`` and the noise ``√c·ξ`` with ``c = max_norm/‖g‖`` (a constant metric,
    so Γ̂ = 0), and ``fallback`` is True. Yu et al. (App. A.4) use 1000 for Monge on the funnel.

    Args:
      precondition: the :data:`Precondition` to guard.
      max_norm: the largest drift norm accepted (> 0).

    Returns:
      The guarded :data:`Precondition`.
    """
    if not MAX_DRIFT_NORM.holds(float(max_norm)):
        raise ValueError(f"max_drift_norm must be None or {MAX_DRIFT_NORM.text()}, got {max_norm}")
    max_norm = float(max_norm)

    def guarded(metric_state, g, xi, gamma):
        d = precondition(metric_state, g, xi, gamma)
        fallback = jnp.sqrt(tree_vdot(d.drift, d.drift)) > max_norm
        c = max_norm / jnp.sqrt(tree_vdot(g, g))
        pick = lambda a, b: jax.tree.map(lambda x, y: jnp.where(fallback, x, y), a, b)
        drift = pick(jax.tree.map(lambda x: (c * x).astype(x.dtype), g), d.drift)
        noise = pick(jax.tree.map(lambda x: (jnp.sqrt(c) * x).astype(x.dtype), xi), d.noise)
        if gamma is not None:
            gamma = pick(jax.tree.map(jnp.zeros_like, gamma), gamma)
        return Directions(drift, noise, gamma, fallback)

    return guarded


def tame_gamma(gamma: PyTree, spread: PyTree, kick: jax.Array, noise: Any, limit: float) -> PyTree:
    """Γ̂ with each coordinate's kick ``k = kick·Γ̂_i`` tamed to at most ``limit`` noise sds::

        k ↦ k / (1 + |k| / (limit·σ_i)),     σ_i = noise·|(G^{−1/2}r)_i|,

    with ``spread = G^{−1/2}r`` for a Rademacher ``r`` (σ_i is the step's noise sd for a diagonal
    metric, and of its size otherwise). A kick well below the noise is unchanged (relative change
    |k|/(limit·σ_i)); a larger one is bounded by ``limit·σ_i``. As the step h → 0, k/σ = O(√h):
    the tamed step converges to the same dynamics (tamed Euler, Hutzenthaler, Jentzen & Kloeden
    2012; Brosse et al. 2019). It keeps Euler's step stable where Γ is stiff, e.g. a Fisher metric
    whose Γ ∝ ∂J/(J + ε)² is large where J ≪ ε.

    Args:
      gamma: Γ̂.
      spread: ``G^{−1/2}r``, shaped like ``gamma``.
      kick: the scale of Γ̂ in the step (``c·lr·T/N``).
      noise: the scale of ``G^{−1/2}ξ`` (a scalar, or one per leaf).
      limit: the kick's bound in noise sds (> 0).

    Example:
      >>> import jax.numpy as jnp
      >>> g = tame_gamma(jnp.array([1.0, 100.0]), jnp.ones(2), jnp.float32(0.01), 1.0, 1.0)
      >>> [round(x, 3) for x in (0.01 * g).tolist()]  # kicks 0.01 and 1 against a noise sd of 1
      [0.01, 0.5]
    """
    if jax.tree.structure(noise) != jax.tree.structure(gamma):
        noise = jax.tree.map(lambda _: noise, gamma)

    def leaf(g, r, s):
        bound = (limit * s * jnp.abs(r)).astype(g.dtype)
        k = jnp.abs(kick * g).astype(g.dtype)
        return jnp.where(k > 0, g * bound / (bound + k), g)

    return jax.tree.map(leaf, gamma, spread, noise)


def clip_drift(
    metric: Metric, metric_state: Any, drift: PyTree, g: PyTree, lr: jax.Array, noise: Any, limit
) -> tuple[PyTree, jax.Array]:
    """``(drift, clipped)``: the drift ``d = G⁻¹g`` with its step clipped to at most ``limit``
    noise sds along every whitened direction, and whether it was. In the coordinates
    ``z = G^{1/2}θ`` the step's noise is ``s·ξ`` (``s = noise``, the same sd in every direction)
    and its drift ``lr·w``, ``w = Aᵀg`` for the noise's factor A (``A Aᵀ = G⁻¹``,
    :attr:`~sgrld.metrics.Metric.whiten`; A = G^{−1/2} where it is symmetric); each ``lr·w_i``
    is clipped to ``±limit·s``::

        d ↦ A·clip(w, ±limit·s/lr)    where some |lr·w_i| > limit·s,  else d itself.

    Below the bound the drift is ``d`` as it was, bit for bit (a clip, not a taming: the steps of
    a chain in its typical set are left alone). As the step h → 0, ``lr·w`` is O(h) and ``s``
    O(√h), so the clip stops binding and the dynamics are the same. A frozen metric has no
    feedback: a coordinate whose statistic was small at the freeze (a dead unit's bias, say)
    steps ``lr·g_i/√V_i`` when its gradient grows, where an adapting RMSprop would have folded
    ``g_i²`` into ``V_i`` first. Clipped, one step moves θ by at most ``limit`` noise sds in
    each whitened direction, and a chain cannot blow up in a step. For a diagonal metric it
    clips each coordinate's step at ``limit`` times its own noise sd. Where ``s = 0`` (T = 0)
    nothing is clipped.

    Args:
      metric: the :class:`~sgrld.metrics.Metric`.
      metric_state: its state.
      drift: ``G⁻¹g``.
      g: the gradient.
      lr: the learning rate on the drift.
      noise: the scale ``s`` of ``G^{−1/2}ξ`` (a scalar, or one per leaf).
      limit: the bound in noise sds (> 0).

    Example:
      >>> import jax.numpy as jnp, sgrld
      >>> m = sgrld.metrics.identity()
      >>> g = jnp.array([1.0, -1000.0])
      >>> d, clipped = clip_drift(m, m.init(g), g, g, 0.01, 1.0, 3.0)
      >>> (0.01 * d).tolist(), bool(clipped)  # steps 0.01 and -10 against a noise sd of 1
      ([0.009999999776482582, -3.0], True)
    """
    if jax.tree.structure(noise) != jax.tree.structure(g):
        noise = jax.tree.map(lambda _: noise, g)
    w = (metric.whiten or metric.inv_sqrt)(metric_state, g)
    bounds = jax.tree.map(lambda x, s: jnp.asarray(limit * s, x.dtype), w, noise)
    over = jax.tree.map(lambda x, b: (jnp.abs(lr * x) > b) & (b > 0), w, bounds)
    clip = lambda x, b: jnp.clip(x, -b / lr, b / lr).astype(x.dtype)  # noqa: E731
    clipped = jax.tree.map(lambda x, b, o: jnp.where(o, clip(x, b), x), w, bounds, over)
    anywhere = jnp.any(jnp.stack([jnp.any(o) for o in jax.tree.leaves(over)]))
    redone = metric.inv_sqrt(metric_state, clipped)
    return jax.tree.map(lambda a, b: jnp.where(anywhere, a, b), redone, drift), anywhere
