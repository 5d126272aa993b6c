"""Distances of samples to a centred normal distribution, exact against its CDF (no reference
sample): the Wasserstein-1 distance and the Kolmogorov–Smirnov statistic.

The funnel (:mod:`sgrld.experiments.funnel`) scores the samples of v against N(0, 80) with them,
and :mod:`sgrld.experiments.stationary_nd` the funnel's v against N(0, 4).
"""

from __future__ import annotations

import math

import numpy as np


def _sorted_normal_cdf(samples: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    from scipy.special import ndtr

    a = np.sort(np.asarray(samples, np.float64).ravel())
    return a, ndtr(a / scale)


def w1_to_normal(samples: np.ndarray, scale: float) -> float:
    """Wasserstein-1 distance between the empirical distribution of ``samples`` and N(0, scale²).

    Exact, with no reference sample: ``W1 = ∫|F_n − Φ_σ| = ∫₀¹ |F_n⁻¹(u) − σΦ⁻¹(u)| du``, where on
    ``((k−1)/n, k/n]`` the empirical quantile is the k-th order statistic ``a_k`` and
    ``∫σΦ⁻¹ du = −σφ(Φ⁻¹(u))`` in closed form; each piece is split where ``σΦ⁻¹(u)`` crosses
    ``a_k``.

    Args:
      samples: draws (any shape; flattened).
      scale: the standard deviation σ of the reference normal.

    Returns:
      The distance (NaN for no samples).

    Example:
      >>> round(w1_to_normal(np.zeros(1), 1.0), 4)  # E|Z| = √(2/π)
      0.7979
    """
    from scipy.special import ndtri

    a, cdf = _sorted_normal_cdf(samples, scale)
    n = a.size
    if n == 0:
        return math.nan
    u = np.arange(n + 1) / n
    lo, hi = u[:-1], u[1:]
    cross = np.clip(cdf, lo, hi)
    integral = lambda p: -scale * np.exp(-0.5 * ndtri(p) ** 2) / math.sqrt(2 * math.pi)
    i_lo, i_cross, i_hi = integral(lo), integral(cross), integral(hi)
    below = a * (cross - lo) - (i_cross - i_lo)
    above = (i_hi - i_cross) - a * (hi - cross)
    return float(np.sum(below + above))


def ks_to_normal(samples: np.ndarray, scale: float) -> float:
    """Kolmogorov–Smirnov statistic ``sup |F_n − Φ_σ|`` of ``samples`` against N(0, scale²).

    Example:
      >>> ks_to_normal(np.zeros(1), 1.0)
      0.5
    """
    a, cdf = _sorted_normal_cdf(samples, scale)
    n = a.size
    if n == 0:
        return math.nan
    k = np.arange(1, n + 1)
    return float(max(np.max(k / n - cdf), np.max(cdf - (k - 1) / n)))
