"""The gradient estimate of a step, one part for every sampler: :func:`gradient_estimate`
returns ``(params, batch, key) -> (Û/N, ∇Û/N, observation)`` from one pass, the observation
chosen by name (:data:`OBSERVATIONS`):

* ``"gradient"``: ∇Û/N itself (SGNHT, Adam-SGLD, i-SGD's ``gradient_noise="square"``, SGRLD once
  its metric is frozen);
* ``"metric"``: the gradient the metric's statistic sees (:func:`gradient_fn`: the likelihood's
  alone with ``prior_in_metric=False``; a Fisher metric's per-example observation, its
  :attr:`~sgrld.metrics.Metric.observation_fn`) (SGRLD, SGHMC);
* ``"variance"``: V̂ = s²/B per coordinate, the minibatch gradient's variance from its
  per-example gradients (:func:`sgrld.numerics.per_example.gradient_variance`; SGHMC's
  ``gradient_noise="per_example"``, i-SGD's noise estimate).

The baselines (SGD, vSGD, SWAG, MC dropout) descend a loss, which MC dropout draws its masks for
from ``key``; they take their gradient from :func:`sgrld.samplers.baselines.sgd.descend`.

Example:
  >>> import jax.numpy as jnp, sgrld
  >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, lambda w: -0.5 * w**2, 4)
  >>> value, g, observed = gradient_fn(u, False, sgrld.metrics.identity())(
  ...     jnp.ones(()), jnp.zeros(2), None)
  >>> float(g), float(observed)  # ∇Û/N = w + w/N; the observation without the prior's w/N
  (1.25, 1.0)
  >>> float(gradient_estimate(u, "gradient")(jnp.ones(()), jnp.zeros(2))[2])  # ∇Û/N itself
  1.25
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from sgrld.metrics.identity import identity
from sgrld.metrics.metric import Metric
from sgrld.numerics.per_example import gradient_variance
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

    def gradients(params, batch, key=None):
        del key
        value, g = jax.value_and_grad(potential_fn)(params, batch)
        if jnp.shape(value) != ():
            raise ValueError(f"potential_fn must return a scalar, got shape {jnp.shape(value)}")
        if prior_in_metric:
            return value, g, g
        g_prior = jax.grad(potential_fn.prior_term)(params)
        return value, g, jax.tree.map(jnp.subtract, g, g_prior)

    return gradients


OBSERVATIONS = ("gradient", "metric", "variance")
"""The observations :func:`gradient_estimate` returns beside the gradient."""


def gradient_estimate(
    potential_fn: Callable,
    observation: str = "gradient",
    *,
    metric: Metric | None = None,
    prior_in_metric: bool = True,
) -> Callable:
    """``(params, batch, key=None) -> (Û/N, ∇Û/N, observation)``, the observation one of
    :data:`OBSERVATIONS` (``"metric"`` needs ``metric``; the module docstring says which sampler
    uses which).

    Args:
      potential_fn: ``(params, batch) -> Û(θ)/N`` (``"variance"`` needs a
        :class:`~sgrld.Potential`: per-example log-likelihoods).
      observation: ``"gradient"``, ``"metric"`` or ``"variance"``.
      metric: the metric whose observation ``"metric"`` returns.
      prior_in_metric: with ``"metric"``: whether the prior's gradient enters the observation.

    Returns:
      The estimate; ``key`` is used only by a metric that draws labels (the Fisher metrics).
    """
    if observation == "metric":
        if metric is None:
            raise ValueError('gradient_estimate: observation="metric" needs a metric')
        return gradient_fn(potential_fn, prior_in_metric, metric)
    if observation == "gradient":
        return gradient_fn(potential_fn, True, identity())
    if observation != "variance":
        raise ValueError(f"observation must be one of {OBSERVATIONS}, got {observation!r}")
    variance = gradient_variance(potential_fn)
    return lambda params, batch, key=None: variance(params, batch)
