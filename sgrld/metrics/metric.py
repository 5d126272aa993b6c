"""The metric interface shared by every Riemannian metric, and the moving-average builder.

A *metric* G(θ) enters SGRLD only through two operators: the preconditioner ``inv(state, v) = G⁻¹v``
and the noise factor ``inv_sqrt(state, ξ) = G^{-1/2}ξ``. Every adaptive metric of this library is a
function of an exponential moving average (EMA) ``S`` of a gradient *statistic* ``s(g)``
(g² for RMSprop and Wenzel, g for Monge, the Kronecker factors for Shampoo)::

    S_t = decay · S_{t-1} + (1 - decay) · s(g_t),        G⁻¹ = F(S_t),

or, with ``decay="inverse_sqrt"`` (Marceau-Caron & Ollivier's γ_t = 1/√t), the weight ``1/√t`` on
the t-th statistic instead of ``1 − decay``.

Because the state exposes ``S`` (``state.stat``) and ``inv`` is a differentiable function of it, the
correction term Γ (``sgrld.parts.correction``) is derived for every metric by one generic routine:
the directional derivative of ``S ↦ F(S)·z`` (:func:`inv_tangent`). Metrics that cache quantities
derived from ``S`` (Wenzel's scales, Shampoo's roots) mark the cache with :func:`cached`, whose
derivative is that of the map that produced it. A metric may also supply that derivative, composed
with the statistic's, in a cheaper form (``Metric.inv_grad_tangent``; Shampoo does, in the
eigenbases of its factors); it must equal the composition, and the tests check that it does.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld.numerics.checks import Bound, is_traced
from sgrld.numerics.over_chains import branch_over_chains
from sgrld.numerics.pytrees import PyTree


class Metric(NamedTuple):
    """A Riemannian metric as SGRLD uses it (all functions pure and jit-able).

    Attributes:
      init: ``init(params) -> state``.
      update: ``update(state, grads) -> state``: fold one observation (by default the minibatch-mean
        gradient) into the statistic.
      inv: ``inv(state, v) -> G⁻¹ v`` for a pytree ``v`` shaped like the parameters.
      inv_sqrt: ``inv_sqrt(state, xi) -> G^{-1/2} xi``; ``inv_sqrt`` applied twice equals ``inv``
        (for non-symmetric factors, ``A Aᵀ = G⁻¹``).
      statistic: ``statistic(grads) -> s(g)``, the quantity averaged in ``state.stat``; ``None``
        for a metric that does not depend on θ (Γ = 0).
      warmup: updates after which the average has forgotten its initial value (``⌈3/(1 − decay)⌉``,
        95% of its weight on data, and at least one refresh); the Γ correction starts then, since
        before it ``D_S F`` at a statistic still near its initial value (0 for RMSprop) is far
        from the derivative of the limiting metric, and can be huge.
      inv_grad_tangent: optional ``inv_grad_tangent(state, v, grads, dgrads)``, the same value
        as ``inv_tangent(metric, state, v, jvp(statistic, grads, dgrads))`` (the derivative of
        the preconditioner along a change of the gradient) computed faster; ``None``: the Γ
        correction composes the two derivatives.
      observation_fn: optional ``observation_fn(potential) -> fn`` with
        ``fn(params, batch, key) -> (Û/N, ∇Û/N, observation)``, for a metric whose statistic is not
        a function of the minibatch-mean gradient (the Fisher metrics: per-example outer products).
        It computes the observation in the same pass as the gradient; ``update`` and ``statistic``
        then take that observation, and Γ differentiates it along the probe like a gradient.
        ``None``: the observation is the mean gradient.
      decay: the average's decay (a float or :data:`INVERSE_SQRT`; ``None`` for a metric that is
        no moving average); the adaptive share of Γ (:mod:`sgrld.parts.share`) averages θ with it.
      statistic_order: 1 for a statistic that is about linear in θ near the mode (Monge's g, the
        Fisher metrics' per-example terms), 2 for one that vanishes there quadratically (the
        minibatch-mean g² of RMSprop, Wenzel, Shampoo): the order of the share's feature, and the
        mark of a metric no continuous Γ makes exact (:mod:`sgrld.samplers.guarantee`).
      with_stat: ``with_stat(state, stat) -> state``: the state with its statistic replaced and
        its cache refreshed from it (:func:`freeze`); ``None``: ``state._replace(stat=stat)``.
      floor: ``floor(stat, share) -> stat`` raised to at least ``share`` times its scale (e.g.
        :func:`leaf_mean_floor`), for a statistic whose small values make large steps (RMSprop's
        g², the Fisher metrics' J); :func:`freeze` applies it. ``None``: no floor.
      whiten: ``whiten(state, v) -> Aᵀv`` for a metric whose ``inv_sqrt`` applies a factor A
        that is not symmetric (``A Aᵀ = G⁻¹``: QDOP's, the full Fisher's), so that
        ``inv_sqrt(whiten(v)) = inv(v)`` and ``whiten`` maps a gradient to the coordinates
        where the noise is white (:func:`sgrld.parts.preconditioning.clip_drift`). ``None``:
        ``inv_sqrt`` is the symmetric root, and whitens.
      searched_option: ``(name, values, value -> metric)``: an option of the metric's factory
        that was not given, which a ``learning_rate="auto"`` search chooses beside the rate
        (Monge's α²: :data:`sgrld.metrics.monge.SEARCHED_ALPHA2`); with a number for the rate,
        the metric is as it is (the option's published default). ``None``: nothing to choose.
    """

    init: Callable[[PyTree], Any]
    update: Callable[[Any, PyTree], Any]
    inv: Callable[[Any, PyTree], PyTree]
    inv_sqrt: Callable[[Any, PyTree], PyTree]
    statistic: Callable[[PyTree], PyTree] | None
    warmup: int = 0
    inv_grad_tangent: Callable[[Any, PyTree, PyTree, PyTree], PyTree] | None = None
    observation_fn: Callable[[Callable], Callable] | None = None
    decay: float | str | None = None
    statistic_order: int = 1
    with_stat: Callable[[Any, PyTree], Any] | None = None
    floor: Callable[[PyTree, Any], PyTree] | None = None
    whiten: Callable[[Any, PyTree], PyTree] | None = None
    searched_option: tuple[str, tuple[float, ...], Callable[[float], Metric]] | None = None


class MetricState(NamedTuple):
    """State of a moving-average metric.

    Attributes:
      count: int32 number of updates folded in (the metric's own step counter).
      stat: the EMA ``S`` of the statistic.
      cache: quantities derived from ``S`` at the last refresh (``()`` if none).
      fallbacks: int32 cumulative number of refreshes that failed (non-finite result) and kept the
        previous cache instead.
    """

    count: jax.Array
    stat: PyTree
    cache: PyTree
    fallbacks: jax.Array


def vanishes_in_the_typical_set(metric: Metric) -> bool:
    """Whether the metric's statistic is about 0 where the chains sample: a moving average of the
    mean gradient (Monge's; order 1, no per-example observation). Far from there it grows with the
    gradient: the learning-rate search tries such a metric at its initial statistic
    (:func:`sgrld.chains.rate_grid.stability_rate`; warmed at the start of the README's
    regression, the grid's top rate was 91 and the chosen 0.375 inflated the posterior's sd
    3.9-fold), and its adapting phase takes Γ by default
    (:func:`sgrld.parts.correction.resolved_mode`).

    Example:
      >>> import sgrld
      >>> [vanishes_in_the_typical_set(m) for m in (sgrld.metrics.monge(), sgrld.metrics.rmsprop())]
      [True, False]
    """
    return (
        metric.statistic is not None
        and metric.statistic_order == 1
        and metric.observation_fn is None
    )


INVERSE_SQRT = "inverse_sqrt"
"""The decay schedule of Marceau-Caron & Ollivier (2017): the t-th statistic gets weight 1/√t."""
INVERSE_SQRT_WARMUP = 50
"""Updates before Γ under :data:`INVERSE_SQRT`: the first update already forgets ``S_0`` (weight 1),
so the warm-up only lets the average of 1/√t-weighted statistics settle over a few dozen batches."""


DECAY = Bound(0, 1, open_high=True)
"""A moving average's ``decay`` (also SGHMC's ``noise_decay`` and Adam-SGLD's)."""


def check_decay(decay: float | str, name: str = "decay") -> float | str:
    """Return ``decay`` as a float in :data:`DECAY`, or :data:`INVERSE_SQRT`; else raise
    ``ValueError``."""
    if isinstance(decay, str):
        if decay != INVERSE_SQRT:
            raise ValueError(
                f"{name} must be a float {DECAY.text()} or {INVERSE_SQRT!r}, got {decay!r}"
            )
        return decay
    decay = float(decay)
    if not DECAY.holds(decay):
        raise ValueError(f"{name} must lie {DECAY.text()}, got {decay}")
    return decay


def ema_step(decay: float | str, count: jax.Array, old: jax.Array, new: jax.Array) -> jax.Array:
    """``decay·old + (1 − decay)·new``, or with :data:`INVERSE_SQRT` the ``count``-th weight 1/√t:
    ``(1 − 1/√t)·old + new/√t``; in ``old``'s dtype.

    Example:
      >>> ema_step("inverse_sqrt", jnp.int32(4), jnp.float32(1.0), jnp.float32(3.0)).item()
      2.0
    """
    new = new.astype(old.dtype)
    if decay == INVERSE_SQRT:
        w = jax.lax.rsqrt(count.astype(jnp.float32)).astype(old.dtype)
        return (1 - w) * old + w * new
    return decay * old + (1.0 - decay) * new


def _warmup(decay: float | str) -> int:
    """Updates until the average holds 95% of its weight on data (``⌈3/(1 − decay)⌉``)."""
    if decay == INVERSE_SQRT:
        return INVERSE_SQRT_WARMUP
    return math.ceil(3.0 / (1.0 - decay) - 1e-9)


def check_nonnegative(value: float, name: str) -> float:
    """Return ``value`` as a float, or raise ``ValueError`` if it is negative or NaN (a traced
    value, :func:`sgrld.numerics.checks.is_traced`, is returned as it is)."""
    if is_traced(value):
        return value
    value = float(value)
    if not value >= 0.0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def ema_metric(
    *,
    statistic: Callable[[PyTree], PyTree],
    init_stat: Callable[[PyTree], PyTree],
    decay: float,
    inv: Callable[[PyTree, PyTree, PyTree], PyTree],
    inv_sqrt: Callable[[PyTree, PyTree, PyTree], PyTree],
    init_cache: Callable[[PyTree], PyTree] = lambda params: (),
    refresh: Callable[[PyTree, PyTree], tuple[PyTree, jax.Array]] | None = None,
    update_every: int = 1,
    inv_grad_tangent: Callable[[PyTree, PyTree, PyTree, PyTree], PyTree] | None = None,
    observation_fn: Callable[[Callable], Callable] | None = None,
    skip_nonfinite: bool = False,
    statistic_order: int = 1,
    floor: Callable[[PyTree, Any], PyTree] | None = None,
    whiten: Callable[[PyTree, PyTree, PyTree], PyTree] | None = None,
) -> Metric:
    """Build a :class:`Metric` whose state is an EMA of ``statistic``.

    Args:
      statistic: ``s(g)``.
      init_stat: ``params -> S_0``.
      decay: EMA decay in [0, 1), or :data:`INVERSE_SQRT`.
      inv: ``(stat, cache, v) -> G⁻¹ v``.
      inv_sqrt: ``(stat, cache, xi) -> G^{-1/2} xi``.
      init_cache: ``params -> cache_0``.
      refresh: ``(stat, old_cache) -> (cache, num_failed)``, run every ``update_every`` updates.
      update_every: refresh period, counted by the metric's own counter.
      inv_grad_tangent: optional ``(cache, v, grads, dgrads) -> D_S[F(S) v][D s(g)[dg]]``
        (:attr:`Metric.inv_grad_tangent`), for a metric that computes it faster than the
        composition of the two derivatives.
      observation_fn: :attr:`Metric.observation_fn` (``None``: the statistic of the mean gradient).
      skip_nonfinite: an update whose statistic is not finite keeps the previous average and
        counts one fallback (``state.fallbacks``), instead of poisoning the average.
      statistic_order: :attr:`Metric.statistic_order`.
      floor: :attr:`Metric.floor`.
      whiten: ``(stat, cache, v) -> Aᵀv`` (:attr:`Metric.whiten`; ``None``: ``inv_sqrt`` is
        symmetric).

    Returns:
      The metric.
    """
    decay = check_decay(decay)
    if int(update_every) < 1:
        raise ValueError(f"update_every must be a positive integer, got {update_every}")
    update_every = int(update_every)

    init = functools.partial(_ema_init, init_stat, init_cache)
    update = functools.partial(_ema_update, statistic, decay, refresh, update_every, skip_nonfinite)
    return Metric(
        init=init,
        update=update,
        inv=lambda state, v: inv(state.stat, state.cache, v),
        inv_sqrt=lambda state, xi: inv_sqrt(state.stat, state.cache, xi),
        statistic=statistic,
        inv_grad_tangent=None
        if inv_grad_tangent is None
        else lambda state, v, g, dg: inv_grad_tangent(state.cache, v, g, dg),
        warmup=max(_warmup(decay), update_every if refresh is not None else 0),
        observation_fn=observation_fn,
        decay=decay,
        statistic_order=int(statistic_order),
        with_stat=functools.partial(_ema_with_stat, refresh),
        floor=floor,
        whiten=None if whiten is None else lambda state, v: whiten(state.stat, state.cache, v),
    )


def _ema_with_stat(refresh: Callable | None, state: MetricState, stat: PyTree) -> MetricState:
    """``state`` with the statistic ``stat`` and, if the metric caches, a cache refreshed from it
    (a refresh that fails keeps the old cache and counts a fallback)."""
    stat = jax.tree.map(lambda new, old: new.astype(old.dtype), stat, state.stat)
    if refresh is None:
        return state._replace(stat=stat)
    cache, failed = refresh(stat, state.cache)
    return state._replace(stat=stat, cache=cache, fallbacks=state.fallbacks + failed)


def leaf_mean_floor(stat: PyTree, share: Any) -> PyTree:
    """Each leaf of a nonnegative statistic raised to at least ``share`` times its mean
    (a :attr:`Metric.floor`).

    Example:
      >>> [x.tolist() for x in leaf_mean_floor([jnp.array([0.0, 4.0]), jnp.ones(1)], 0.5)]
      [[1.0, 4.0], [1.0]]
    """
    return jax.tree.map(lambda s: jnp.maximum(s, share * jnp.mean(s)).astype(s.dtype), stat)


def new_observation_weight(metric: Metric, state: MetricState) -> jax.Array:
    """The weight the next update would give a new observation: ``1 − decay``, or ``1/√(t + 1)``
    under :data:`INVERSE_SQRT` after t updates."""
    if metric.decay == INVERSE_SQRT:
        return jax.lax.rsqrt((state.count + 1).astype(jnp.float32))
    return jnp.float32(1.0 - float(metric.decay or 0.0))


def freeze(metric: Metric, state: MetricState, stat: PyTree) -> MetricState:
    """The state a metric is frozen in: ``state`` with its statistic replaced by ``stat`` (e.g. a
    window average, :func:`sgrld.sgrld`'s ``adapt_until="auto"``) and its cache refreshed from it.

    A metric with a :attr:`Metric.floor` has its statistic floored at the share a new observation
    would get (:func:`new_observation_weight`) of its scale: an adapting RMSprop folds a gradient
    g into its statistic at once, ``V ≥ (1 − decay)·g²``, so its step is at most
    ``lr/√(1 − decay)`` per coordinate; frozen, a coordinate whose V was near 0 at the freeze
    would step ``lr·g/√V`` when its gradient grows. Floored at ``(1 − decay)`` times the leaf's
    mean V, a gradient of the leaf's typical size moves it no further than the adapting metric
    would (RMSprop and DOP diverged a few steps after an unfloored freeze on the digits, RESULTS
    §33).

    Example:
      >>> import sgrld
      >>> m = sgrld.metrics.wenzel(update_every=5)  # its scales are a cache of the statistic
      >>> params = [jnp.ones(3), jnp.ones(2)]  # two layers, mean squared gradients 4 and 1
      >>> s = freeze(m, m.init(params), [jnp.float32(4.0), jnp.float32(1.0)])
      >>> [x.tolist() for x in m.inv(s, params)]  # the first layer's step halved at once
      [[0.5, 0.5, 0.5], [1.0, 1.0]]
    """
    if metric.floor is not None:
        stat = metric.floor(stat, new_observation_weight(metric, state))
    if metric.with_stat is None:
        return state._replace(stat=stat)
    return metric.with_stat(state, stat)


def _ema_init(
    init_stat: Callable[[PyTree], PyTree], init_cache: Callable[[PyTree], PyTree], params: PyTree
) -> MetricState:
    """The state before any update: ``S_0``, the initial cache, zero counters."""
    stat = init_stat(params)
    return MetricState(jnp.zeros((), jnp.int32), stat, init_cache(params), jnp.zeros((), jnp.int32))


def _ema_update(
    statistic: Callable[[PyTree], PyTree],
    decay: float | str,
    refresh: Callable[[PyTree, PyTree], tuple[PyTree, jax.Array]] | None,
    update_every: int,
    skip_nonfinite: bool,
    state: MetricState,
    grads: PyTree,
) -> MetricState:
    """``S ← decay·S + (1 − decay)·s(g)`` (:func:`ema_step`); the cache is refreshed every
    ``update_every`` updates."""
    new = statistic(grads)
    count = state.count + 1
    stat = jax.tree.map(functools.partial(ema_step, decay, count), state.stat, new)
    fallbacks = state.fallbacks
    if skip_nonfinite:  # the observation, in the average's dtype: a convex combination of
        # finite values is finite, and checking it, not the average, lets XLA fuse the average
        # into its select (DOP's and QDOP's steps read 12 % fewer bytes; RESULTS §15)
        leaves = zip(jax.tree.leaves(new), jax.tree.leaves(state.stat), strict=True)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x.astype(s.dtype))) for x, s in leaves]))
        stat = jax.tree.map(lambda a, b: jnp.where(finite, a, b), stat, state.stat)
        fallbacks = fallbacks + jnp.where(finite, 0, 1).astype(jnp.int32)
    cache = state.cache
    if refresh is not None:
        if update_every == 1:
            cache, failed = refresh(stat, cache)
        else:
            cache, failed = branch_over_chains(
                count % update_every == 0,
                lambda: refresh(stat, state.cache),
                lambda: (state.cache, jnp.zeros((), jnp.int32)),
            )
        fallbacks = fallbacks + failed
    return MetricState(count, stat, cache, fallbacks)


def cached(fn: Callable[[PyTree], PyTree]) -> Callable[[PyTree, PyTree], PyTree]:
    """Wrap a refresh map ``fn`` so that a cached value carries ``fn``'s derivative.

    ``cached(fn)(stat, value)`` returns ``value`` (the cache, computed by ``fn`` at the last
    refresh), and its JVP with respect to ``stat`` is the JVP of ``fn`` at ``stat``. This is how a
    metric with a periodically refreshed cache stays differentiable in its statistic for the Γ
    correction.
    """

    @jax.custom_jvp
    def wrapped(stat, value):
        return value

    @wrapped.defjvp
    def wrapped_jvp(primals, tangents):
        stat, value = primals
        dstat, _ = tangents
        _, dvalue = jax.jvp(fn, (stat,), (dstat,))
        return value, dvalue

    return wrapped


def inv_tangent(metric: Metric, state: MetricState, v: PyTree, dstat: PyTree) -> PyTree:
    """Directional derivative ``D_S[F(S) v][dS]`` of the preconditioner in its statistic."""
    return jax.jvp(lambda s: metric.inv(state._replace(stat=s), v), (state.stat,), (dstat,))[1]
