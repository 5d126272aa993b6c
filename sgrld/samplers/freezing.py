"""Adapt, then freeze: SGRLD's estimate of a step whose metric adapts for ``adapt_until`` steps
and is then frozen, at its last value or at the average of its statistic over the steps
``[average_from, adapt_until)``. A frozen metric is constant, so its Γ is 0 and the step computes
only the gradient.

Example:
  >>> import jax, jax.numpy as jnp, sgrld
  >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, None, 4)
  >>> metric = sgrld.metrics.rmsprop(decay=0.5)
  >>> estimate = adapting_estimate(sgrld.parts.correction.none(), u, True, metric, 1, None)
  >>> state = sgrld.SGRLDState(jnp.zeros((), jnp.int32), jnp.ones(()), metric.init(jnp.ones(())))
  >>> adapting, _ = estimate(jax.random.key(0), state.params, jnp.zeros(2), state)
  >>> frozen, _ = estimate(jax.random.key(0), state.params, jnp.zeros(2),
  ...                      state._replace(step=jnp.ones((), jnp.int32)))
  >>> float(adapting.metric_state.stat), float(frozen.metric_state.stat)  # g² = 1 averaged in
  (0.5, 0.0)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp

from sgrld.metrics.metric import Metric, freeze
from sgrld.numerics.checks import is_step
from sgrld.numerics.over_chains import branch_over_chains
from sgrld.parts import correction as corrections
from sgrld.parts.gradients import gradient_estimate


def _frozen(key, grad_fn, params, metric, metric_state, share=()) -> corrections.Estimate:
    """A step of the frozen metric: its state kept, Γ = 0."""
    del key, metric
    value, g, _ = grad_fn(params)
    zeros = jax.tree.map(jnp.zeros_like, params)
    return corrections.Estimate(value, g, metric_state, zeros, share)


def check_adaptation(adapt_until: int | None, average_from: int | None) -> None:
    """``ValueError`` naming the option unless ``adapt_until`` is ``None`` or a step count and
    ``average_from`` is ``None`` or a step in ``[0, adapt_until)``."""
    if adapt_until is not None and not is_step(adapt_until):
        raise ValueError(
            f"adapt_until must be None or an integer >= 0 (sgrld.sgrld also takes 'auto'), "
            f"got {adapt_until!r}"
        )
    if average_from is None:
        return
    if adapt_until is None or int(average_from) != average_from:
        raise ValueError("average_from needs an integer adapt_until and is an integer itself")
    if not 0 <= average_from < adapt_until:
        raise ValueError(
            f"average_from must lie in [0, adapt_until={adapt_until}), got {average_from}"
        )


def adapting_estimate(
    correction: corrections.Correction,
    potential_fn: Callable,
    prior_in_metric: bool,
    metric: Metric,
    adapt_until: int | None,
    average_from: int | None,
) -> Callable:
    """``(key, params, batch, state) -> (Estimate, stat_sum)`` of an SGRLD step; after
    ``adapt_until`` steps the metric is frozen (a real branch over vmapped chains,
    :func:`~sgrld.numerics.over_chains.branch_over_chains`) and only the mean gradient is
    computed. With ``average_from`` the statistic is summed over the steps
    ``[average_from, adapt_until)`` and the metric frozen at their average, its cache refreshed
    (:func:`sgrld.metrics.metric.freeze`)."""
    gradients = gradient_estimate(
        potential_fn, "metric", metric=metric, prior_in_metric=prior_in_metric
    )
    frozen_gradients = gradient_estimate(potential_fn, "gradient")

    def at_average(metric_state, stat_sum):
        n = adapt_until - average_from
        return freeze(metric, metric_state, jax.tree.map(lambda a: a / n, stat_sum))

    def estimate(key, params, batch, state, adapting):
        ms, stat_sum = state.metric_state, state.stat_sum
        if not adapting:  # the metric's observation is not needed
            if average_from is not None:
                ms = branch_over_chains(
                    state.step == adapt_until, at_average, lambda m, _: m, ms, stat_sum
                )
            grad_fn = partial(frozen_gradients, batch=batch, key=key)
            return _frozen(key, grad_fn, params, metric, ms, state.share), stat_sum
        grad_fn = partial(gradients, batch=batch, key=jax.random.fold_in(key, 1))
        est = correction.estimate(key, grad_fn, params, metric, ms, state.share)
        if average_from is not None:
            inside = state.step >= average_from
            stat_sum = jax.tree.map(
                lambda a, x: a + jnp.where(inside, x, 0).astype(a.dtype),
                stat_sum,
                est.metric_state.stat,
            )
        return est, stat_sum

    def run(key, params, batch, state):
        operands = (key, params, batch, state)
        if adapt_until is None:
            return estimate(*operands, True)
        return branch_over_chains(
            state.step < adapt_until,
            partial(estimate, adapting=True),
            partial(estimate, adapting=False),
            *operands,
        )

    return run
