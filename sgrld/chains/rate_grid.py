"""The rates a ``learning_rate="auto"`` search tries: a log grid below and above the stability
limit of the preconditioned gradient step at the start, with the metric warmed there
(:mod:`sgrld.chains.step_size`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.chains.programs import kept
from sgrld.metrics.identity import identity
from sgrld.metrics.metric import freeze, vanishes_in_the_typical_set
from sgrld.numerics.pytrees import PyTree
from sgrld.parts.gradients import gradient_fn
from sgrld.samplers.rate_search import RateSearch
from sgrld.samplers.sampler import SGRLDState

NUM_CANDIDATES = 7
"""Rates tried: ``9·(2/λ̂)·3^{−k}``, k = 0 … 6."""


WARM_BATCHES = 8
"""Minibatches whose mean statistic warms a pilot's metric (:func:`warm_metric_state`)."""


def warm_metric_state(
    search: RateSearch, state: Any, params: PyTree, batch_fn: Callable, key: jax.Array
) -> Any:
    """A metric state at the mean statistic of :data:`WARM_BATCHES` minibatches at ``params``
    (frozen there, :func:`sgrld.metrics.metric.freeze`, its floor included), counted as that
    many updates; ``state`` itself for a metric without a statistic.

    A cold adaptive metric makes a short pilot's first steps unlike the steps after them:
    RMSprop from V = 0 (no bias correction) steps ``lr/√(1 − decay^t)`` per coordinate at step
    t, ten times its later step at first. The stability estimate and the Stein virial's pilot
    (whose chains continue the burn-in, so the run starts as its pilot did) use a warmed metric;
    the halving on validation data starts cold, as the run it chooses for
    (:func:`sgrld.chains.rate_halving.halve_learning_rate`).
    """
    metric = search.metric or identity()
    if metric.statistic is None:
        return state
    observe = gradient_fn(search.potential_fn, True, metric)
    keys = jax.random.split(key, WARM_BATCHES)
    stats = [metric.statistic(observe(params, batch_fn(k), k)[2]) for k in keys]
    mean = jax.tree.map(lambda *xs: sum(xs) / len(xs), *stats)
    return freeze(metric, state._replace(count=state.count + len(stats)), mean)


def warm_start(key: jax.Array, search: RateSearch, states: Any, batch_fn: Callable) -> Any:
    """The chains' ``states`` (leading axis the chains) with their metrics warmed
    (:func:`warm_metric_state`), where a state has a ``metric_state`` (SGRLD, SGHMC)."""
    if "metric_state" not in getattr(states, "_fields", ()):
        return states
    return states._replace(
        metric_state=_warm_fn(search, batch_fn)(key, states.metric_state, states.params)
    )


@kept
def _warm_fn(search: RateSearch, batch_fn: Callable) -> Callable:
    """``(key, metric states [C, ...], params [C, ...]) -> warmed metric states``."""
    warm = jax.vmap(
        lambda key, ms, p: warm_metric_state(search, ms, p, batch_fn, key), (None, 0, 0)
    )
    return jax.jit(warm)


def stability_rate(
    key: jax.Array, search: RateSearch, params: PyTree, batch_fn: Callable, iterations: int = 20
) -> float:
    """``2/λ̂``: the largest stable rate of the preconditioned gradient step at ``params``, λ̂ the
    top eigenvalue of ``G⁻¹∇²(Û/N)`` by power iteration, G the metric warmed at ``params``
    (:func:`warm_metric_state`; one chain's), or its initial one where its statistic vanishes in
    the typical set (:func:`vanishes_in_the_typical_set`).

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2 * 4.0, None, 1)  # U'' = 4
      >>> s = sgrld.sgrld(u, sgrld.metrics.identity(), learning_rate="auto", num_data=1)
      >>> round(stability_rate(jax.random.key(0), s.rate_search, jnp.zeros(()),
      ...                      lambda k: jnp.zeros(3)), 4)
      0.5
    """
    lam = float(_top_eigenvalue_fn(search, batch_fn, iterations)(key, params))
    if not (np.isfinite(lam) and lam > 0):
        raise FloatingPointError(
            f'learning_rate="auto": the curvature at the start is {lam} (Hessian-vector products '
            "of the potential); check the potential and the start, or give a number"
        )
    return 2.0 / lam


@kept
def _top_eigenvalue_fn(search: RateSearch, batch_fn: Callable, iterations: int) -> Callable:
    """``(key, params) -> λ̂`` of :func:`stability_rate`, compiled once per search."""
    metric = search.metric or identity()

    @jax.jit
    def top_eigenvalue(key, params):
        warm_key, probe_key, hvp_key = jax.random.split(key, 3)
        state = metric.init(params)
        if not vanishes_in_the_typical_set(metric):
            state = warm_metric_state(search, state, params, batch_fn, warm_key)
        batch = batch_fn(hvp_key)
        grad = jax.grad(search.potential_fn)

        def step(_, carry):
            v, _ = carry
            hv = jax.jvp(lambda p: grad(p, batch), (params,), (v,))[1]
            w = metric.inv(state, hv)
            norm = jnp.sqrt(sum(jnp.vdot(x, x).real for x in jax.tree.leaves(w)))
            return jax.tree.map(lambda x: x / jnp.maximum(norm, 1e-30), w), norm

        leaves, tree = jax.tree.flatten(params)
        keys = jax.random.split(probe_key, len(leaves))
        v = [
            jax.random.normal(k, jnp.shape(x), jnp.result_type(x))
            for k, x in zip(keys, leaves, strict=True)
        ]
        v = jax.tree.unflatten(tree, v)
        norm = jnp.sqrt(sum(jnp.vdot(x, x) for x in jax.tree.leaves(v)))
        v = jax.tree.map(lambda x: x / norm, v)
        return jax.lax.fori_loop(0, iterations, step, (v, jnp.float32(0.0)))[1]

    return top_eigenvalue


def candidate_rates(stable: float, num: int = NUM_CANDIDATES) -> tuple[float, ...]:
    """The rates tried, largest first: ``9·stable·3^{−k}``, k = 0 … num − 1 (a network's best
    rate is often above the stability limit at its initialisation: its curvature adapts).

    Example:
      >>> [round(r, 4) for r in candidate_rates(1.0, 4)]
      [9.0, 3.0, 1.0, 0.3333]
    """
    return tuple(float(stable * 3.0 ** (2 - k)) for k in range(num))


def fit_state(sampler: Any, state: Any) -> Any:
    """An SGRLD ``state`` (chain axis first) given the window sum its sampler's freeze carries,
    or without one it does not: a state from an ``"auto"`` sampler's own ``init`` (which knows
    no burn-in) continues on the resolved sampler."""
    if not isinstance(state, SGRLDState):
        return state
    one = jax.tree.map(lambda x: x[0], state.params)
    wanted = bool(jax.tree.leaves(jax.eval_shape(sampler.init, one).stat_sum))
    if wanted == bool(jax.tree.leaves(state.stat_sum)):
        return state
    stat_sum = jax.tree.map(jnp.zeros_like, state.metric_state.stat) if wanted else ()
    return state._replace(stat_sum=stat_sum)
