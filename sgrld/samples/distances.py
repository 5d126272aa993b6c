"""Distances of samples to a known distribution.

* Against a centred normal, exactly against its CDF (no reference sample): the Wasserstein-1
  distance and the Kolmogorov–Smirnov statistic.
* Histograms: exact bin probabilities of a density on Rensmeyer & Niggemann's 41 bins of width 0.1
  on [−2.05, 2.05] and the cell outside them, the empirical frequencies, their total variation and
  its Monte-Carlo noise floor.
* The relative covariance error of samples of a Gaussian.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import integrate

EDGES = np.linspace(-2.05, 2.05, 42)
"""Rensmeyer & Niggemann's 41 bins of width :data:`WIDTH` on [−2.05, 2.05]."""
WIDTH = 0.1
GROUPS = 32
"""Groups of chains of the batch means of :func:`noise_floor`."""


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


def normal_pdf(x: np.ndarray) -> np.ndarray:
    """The target density φ(θ) of N(0, 1)."""
    return np.exp(-0.5 * np.square(x)) / math.sqrt(2.0 * math.pi)


def bin_probabilities(density: Callable[[np.ndarray], np.ndarray], edges=EDGES) -> np.ndarray:
    """Exact probabilities of the bins ``edges`` and (last entry) of everything outside them.

    ``density`` must be normalised; each bin is integrated by quadrature, split at 0 (where the
    predicted densities have a kink).

    Example:
      >>> p = bin_probabilities(normal_pdf)
      >>> p.shape, round(float(p.sum()), 8), round(float(p[-1]), 4)  # P(|θ| > 2.05)
      ((42,), 1.0, 0.0404)
    """

    def mass(a, b):
        if a < 0.0 < b:
            return mass(a, 0.0) + mass(0.0, b)
        return integrate.quad(density, a, b, limit=200)[0]

    inside = [mass(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    outside = mass(-np.inf, edges[0]) + mass(edges[-1], np.inf)
    return np.array([*inside, outside])


def frequencies(samples: np.ndarray, edges=EDGES) -> np.ndarray:
    """Fractions of ``samples`` in each bin of ``edges`` and (last entry) outside them."""
    x = np.asarray(samples, np.float64).ravel()
    counts = np.histogram(x, edges)[0]
    return np.append(counts, x.size - counts.sum()) / max(x.size, 1)


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """``½Σ_k |p_k − q_k|`` between two vectors of cell probabilities.

    Example:
      >>> total_variation(np.array([0.5, 0.5, 0.0]), np.array([0.25, 0.5, 0.25]))
      0.25
    """
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


def noise_floor(samples: np.ndarray, edges=EDGES, groups: int = GROUPS) -> tuple[float, float]:
    """Expected TV of the pooled histogram from Monte-Carlo noise alone, and its ``n_eff``.

    The chains (first axis of ``samples``, ``[chains, samples_per_chain]``) are split into
    ``groups`` groups; the spread of the groups' bin frequencies gives ``sd(p̂_k)`` of the pooled
    histogram, autocorrelation within chains included, and the floor is
    ``½·√(2/π)·Σ_k sd(p̂_k)`` (each ``p̂_k − p_k`` approximately normal). ``n_eff`` is the number
    of independent draws whose histogram has the same floor:
    ``(Σ_k √(p̂_k(1 − p̂_k)) / Σ_k sd(p̂_k))²``.

    Returns:
      ``(floor, n_eff)``.
    """
    x = np.asarray(samples)
    groups = min(groups, x.shape[0])
    per_group = np.stack([frequencies(g, edges) for g in np.array_split(x, groups)])
    sd = np.sqrt(per_group.var(axis=0, ddof=1) / groups)
    q = frequencies(x, edges)
    floor = 0.5 * math.sqrt(2.0 / math.pi) * float(sd.sum())
    n_eff = (float(np.sqrt(q * (1.0 - q)).sum()) / float(sd.sum())) ** 2 if sd.sum() > 0 else 0.0
    return floor, n_eff


def covariance_error(flat: np.ndarray, cov: np.ndarray) -> float:
    """``‖Ĉ − Σ‖_F / ‖Σ‖_F`` of samples ``flat`` (``[n, D]``).

    Example:
      >>> x = np.random.default_rng(0).normal(size=(100_000, 2))
      >>> covariance_error(x, np.eye(2)) < 0.02
      True
    """
    c = np.cov(np.asarray(flat, np.float64), rowvar=False).reshape(cov.shape)
    return float(np.linalg.norm(c - cov) / np.linalg.norm(cov))
