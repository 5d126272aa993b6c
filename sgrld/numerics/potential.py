"""The per-datum stochastic potential Û(θ)/N that every sampler differentiates."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from sgrld.numerics.pytrees import PyTree


class Potential:
    """``Û(θ)/N = −mean_{batch} log p(y|x, θ) − log p(θ)/N``, callable as
    ``potential(params, batch)``.

    Built by :func:`potential`; keeps its parts so a sampler can leave the prior out of a metric's
    statistic (``prior_in_metric=False``).

    Attributes:
      loglik_fn: ``(params, batch) -> [batch]`` per-example log-likelihoods.
      logprior_fn: ``params -> scalar``.
      num_data: N, the size of the full data set.
    """

    def __init__(self, loglik_fn, logprior_fn, num_data: int):
        if not callable(loglik_fn):
            raise TypeError(f"loglik_fn must be callable, got {type(loglik_fn).__name__}")
        if logprior_fn is not None and not callable(logprior_fn):
            raise TypeError(
                f"logprior_fn must be callable or None, got {type(logprior_fn).__name__}"
            )
        if isinstance(num_data, bool) or int(num_data) != num_data or num_data < 1:
            raise ValueError(f"num_data must be a positive integer, got {num_data!r}")
        self.loglik_fn = loglik_fn
        self.logprior_fn = logprior_fn
        self.num_data = int(num_data)

    def prior_term(self, params: PyTree) -> jax.Array:
        """``−log p(θ)/N`` (0 without a prior)."""
        if self.logprior_fn is None:
            return jnp.zeros(())
        lp = jnp.asarray(self.logprior_fn(params))
        if lp.shape != ():
            raise ValueError(f"logprior_fn must return a scalar, got shape {lp.shape}")
        return -lp / self.num_data

    def likelihood_term(self, params: PyTree, batch: PyTree) -> jax.Array:
        """``−mean_batch log p(y|x, θ)``, with the batch shape checked at trace time."""
        leaves = jax.tree.leaves(batch)
        sizes = {jnp.shape(x)[0] if jnp.ndim(x) else None for x in leaves}
        if None in sizes or len(sizes) > 1:
            raise ValueError(
                "every array of a batch needs the same leading (batch) dimension; "
                f"got shapes {[jnp.shape(x) for x in leaves]}"
            )
        ll = jnp.asarray(self.loglik_fn(params, batch))
        size = next(iter(sizes), None)
        if ll.ndim != 1 or (size is not None and ll.shape[0] != size):
            raise ValueError(
                "loglik_fn must return per-example log-likelihoods of shape [batch] "
                f"= [{size}], got shape {ll.shape}"
            )
        return -jnp.mean(ll)

    def __call__(self, params: PyTree, batch: PyTree) -> jax.Array:
        return self.likelihood_term(params, batch) + self.prior_term(params)

    def __repr__(self) -> str:
        return f"Potential(num_data={self.num_data})"


def potential(
    loglik_fn: Callable[[PyTree, PyTree], jax.Array],
    logprior_fn: Callable[[PyTree], jax.Array] | None,
    num_data: int,
) -> Potential:
    """Build the per-datum potential ``Û(θ)/N`` of a minibatch.

    ``Û(θ)/N = −(1/B) Σ_{i∈batch} log p(y_i|x_i, θ) − log p(θ)/N``, an unbiased estimate of
    ``U(θ)/N`` with ``U = −log p(D, θ)``. Samplers take ``learning_rate = h·N`` so that the step on
    this scale is the step ``h`` on ``U`` (README, "Conventions").

    Args:
      loglik_fn: ``(params, batch) -> [batch]`` per-example log-likelihoods.
      logprior_fn: ``params -> scalar`` log prior density, or ``None`` for a flat prior.
      num_data: N, the number of data points in the full training set.

    Returns:
      A :class:`Potential`, callable as ``potential(params, batch) -> scalar``.

    Example:
      >>> import jax.numpy as jnp, sgrld
      >>> loglik = lambda w, batch: -0.5 * (batch[1] - batch[0] * w) ** 2
      >>> logprior = lambda w: -0.5 * w**2
      >>> u = sgrld.potential(loglik, logprior, num_data=10)
      >>> round(float(u(jnp.array(2.0), (jnp.array([1.0, 1.0]), jnp.array([1.0, 3.0])))), 4)
      0.7
    """
    return Potential(loglik_fn, logprior_fn, num_data)
