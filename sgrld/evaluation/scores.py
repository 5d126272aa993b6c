# ruff: noqa: F722  (jaxtyping shape strings such as "n C" are not Python expressions)
"""Scores of stacked per-sample predictions: the BMA log-likelihood and the ECE."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int


def log_count(count: Int[Array, ""], dtype: jnp.dtype) -> Float[Array, ""]:
    """log S in ``dtype``; -inf for an empty ensemble, so its scores are NaN."""
    return jnp.log(count.astype(dtype))


def ensemble_log_likelihood(log_likelihoods: Float[ArrayLike, "S n"]) -> Float[Array, ""]:
    """Log-likelihood of the ensemble-averaged predictive, averaged over points.

    .. math:: \\frac{1}{n}\\sum_i \\log\\Big(\\frac{1}{S}\\sum_s p(y_i \\mid x_i, \\theta_s)\\Big)

    This is the log of the averaged probability (the Bayesian model average), not the average
    of the per-sample log-probabilities; by Jensen the former is the larger. It is the
    ``log p(y|X)`` of Yu et al. (2023, Sec. 4.1).

    Args:
        log_likelihoods: ``log p(y_i | x_i, theta_s)`` of each sample (rows) and point (columns).

    Returns:
        The scalar score (higher is better).

    Example:
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import ensemble_log_likelihood
        >>> log_lik = jnp.log(jnp.array([[0.9], [0.1]]))  # two samples, one point
        >>> print(f"{float(ensemble_log_likelihood(log_lik)):.4f}")  # log 0.5
        -0.6931
    """
    log_likelihoods = jnp.asarray(log_likelihoods)
    log_sum = jax.nn.logsumexp(log_likelihoods, axis=0)
    return jnp.mean(log_sum) - jnp.log(log_likelihoods.shape[0])


def expected_calibration_error(
    probs: Float[ArrayLike, "n C"], labels: Int[ArrayLike, " n"], num_bins: int = 30
) -> Float[Array, ""]:
    """Top-label expected calibration error with equal-width confidence bins (L1).

    .. math:: \\mathrm{ECE} = \\sum_{b=0}^{B-1} \\frac{n_b}{n}\\,
              \\lvert \\mathrm{acc}_b - \\mathrm{conf}_b \\rvert

    The confidence of a point is its largest probability and its prediction the argmax (the
    first class on ties). Bin ``b`` covers ``(b/B, (b+1)/B]``; a confidence of exactly 0 goes
    into bin 0. The edges are ``b/B`` rounded to the dtype of ``probs``, so a confidence equal
    to ``b/B`` in that dtype lies in bin ``b - 1``. Empty bins contribute nothing. This is the
    ``ece`` of google/uncertainty-metrics, which Yu et al. (2023, App. A.7) use with 30 bins;
    the ECE itself is from Naeini et al. (2015).

    Args:
        probs: predictive probabilities, one row per point.
        labels: integer class labels.
        num_bins: number of bins B (static under ``jax.jit``).

    Returns:
        The scalar ECE in [0, 1] (lower is better).

    Example:
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import expected_calibration_error
        >>> probs = jnp.array([[0.75, 0.25], [0.6, 0.4]])
        >>> ece = expected_calibration_error(probs, jnp.array([0, 1]), num_bins=4)
        >>> print(f"{float(ece):.4f}")  # one bin (0.5, 0.75]: |1/2 - 0.675|
        0.1750
    """
    probs = jnp.asarray(probs)
    confidence = jnp.max(probs, axis=-1)
    correct = (jnp.argmax(probs, axis=-1) == jnp.asarray(labels)).astype(confidence.dtype)
    inner_edges = jnp.arange(1, num_bins, dtype=confidence.dtype) / num_bins
    # The bin index is the number of edges strictly below the confidence: (b/B, (b+1)/B].
    bins = jnp.sum(confidence[:, None] > inner_edges, axis=-1)
    # n_b/n · |acc_b - conf_b| = |sum over bin b of (correct - confidence)| / n.
    gaps = jax.ops.segment_sum(correct - confidence, bins, num_segments=num_bins)
    return jnp.sum(jnp.abs(gaps)) / confidence.shape[0]
