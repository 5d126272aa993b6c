"""The gradient estimate of a step: ``(params, batch, key) -> (Û/N, ∇Û/N, the metric's
observation)``, the one place a sampler's gradient and its metric's observation are computed.

Example:
  >>> import jax.numpy as jnp, sgrld
  >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, lambda w: -0.5 * w**2, 4)
  >>> value, g, observed = gradient_fn(u, False, sgrld.metrics.identity())(
  ...     jnp.ones(()), jnp.zeros(2), None)
  >>> float(g), float(observed)  # ∇Û/N = w + w/N; the observation without the prior's w/N
  (1.25, 1.0)
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from sgrld.metrics.metric import Metric
from sgrld.numerics.potential import Potential


def gradient_fn(potential_fn: Callable, prior_in_metric: bool, metric: Metric) -> Callable:
    """``(params, batch, key) -> (Û/N, ∇Û/N, the metric's observation)``.

    The observation is the gradient the metric's statistic sees: with ``prior_in_metric=False``
    the likelihood's only, which needs a :class:`~sgrld.Potential` (it knows its prior term). A
    metric with an :attr:`~sgrld.metrics.Metric.observation_fn` (the Fisher metrics) computes its
    own observation from the potential's per-example log-likelihoods, with ``key`` for any labels
    it draws; its statistic never includes the prior.
    """
    if metric.observation_fn is not None:
        if not isinstance(potential_fn, Potential):
            raise TypeError(
                "this metric builds its statistic from per-example log-likelihoods: it needs a "
                "potential built by sgrld.potential(loglik_fn, logprior_fn, num_data)"
            )
        return metric.observation_fn(potential_fn)
    if not prior_in_metric and not isinstance(potential_fn, Potential):
        raise TypeError("prior_in_metric=False needs a potential built by sgrld.potential(...)")

    def gradients(params, batch, key):
        del key
        value, g = jax.value_and_grad(potential_fn)(params, batch)
        if jnp.shape(value) != ():
            raise ValueError(f"potential_fn must return a scalar, got shape {jnp.shape(value)}")
        if prior_in_metric:
            return value, g, g
        g_prior = jax.grad(potential_fn.prior_term)(params)
        return value, g, jax.tree.map(jnp.subtract, g, g_prior)

    return gradients
