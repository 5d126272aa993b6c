"""The Stein virial's score D of each rate from its pilot's sums, with its jackknife standard error
and its Monte Carlo noise (the criterion of :mod:`sgrld.chains.step_size`, whose docstring
derives it)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from sgrld.numerics.pytrees import PyTree

GROUPS = 4
"""Parts of the window per chain: the groups over which D's noise is estimated."""


class Sums(NamedTuple):
    """Per-coordinate sums of θ, g and θ·g over one half of the window."""

    theta: PyTree
    grad: PyTree
    product: PyTree


def _loss(mean: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Per coordinate, ``ρ(v) = ((v − 1)/(v + 1))²`` of the groups' mean ``v`` (clipped at 0),
    less its second-order noise bias ``ρ''(v)·noise/2`` (``noise``: the mean's variance), kept in
    ρ's range [0, 1]; where v's standard error exceeds 1/2, the second-order expansion does not
    hold and ρ is taken as it is. Uncapped, a rate whose chains blew up scored far below 0 and
    was chosen (UCI concrete, DOP: D = −7·10¹³ at lr 6.9, and lr 2.3, D = −10¹⁰, gave a test
    RMSE of 2.6·10⁹).

    Example:
      >>> _loss(np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1e12])).tolist()
      [0.0, 1.0, 1.0]
    """
    v = np.maximum(mean, 0.0)
    rho = ((v - 1.0) / (v + 1.0)) ** 2
    corrected = np.clip(rho - 4.0 * (2.0 - v) / (v + 1.0) ** 4 * noise, 0.0, 1.0)
    return np.where(noise <= 0.25, corrected, rho)


def _discrepancy(w: np.ndarray) -> np.ndarray:
    """Per coordinate, :func:`_loss` of ``w`` over the groups (axis 0)."""
    return _loss(w.mean(0), w.var(0, ddof=1) / w.shape[0])


def _left_out(w: np.ndarray) -> np.ndarray:
    """:func:`_discrepancy` summed over coordinates with each group left out in turn: ``[G]``."""
    g = w.shape[0]
    s1, s2 = w.sum(0), (w**2).sum(0)
    mean = (s1 - w) / (g - 1)
    var = (s2 - w**2 - (g - 1) * mean**2) / (g - 2)
    return _loss(mean, var / (g - 1)).reshape(g, -1).sum(1)


def virial_score(
    sums: Sums, count: int, num_data: int, temperature: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """D of each rate, its jackknife standard error over the groups, and the mean over
    coordinates of ``v̂``'s variance (its Monte Carlo noise in the pilot's window), from the sums
    (leaves ``[K, C, Q, ...]``, ``count`` evaluations each).

    Example:
      >>> rng = np.random.default_rng(0)  # θ ~ N(0, k) under U = θ²/2 (N = 1): v = k
      >>> theta = rng.normal(size=(2, 16, 4, 500, 50)) * np.sqrt([[[[[1.0]]]], [[[[2.0]]]]])
      >>> s = Sums(theta.sum(3), theta.sum(3), (theta**2).sum(3))
      >>> d, se, noise = virial_score(s, 500, 1, 1.0)
      >>> np.round(d, 3).tolist(), bool(np.all(se < 0.01))  # ρ(1) = 0, ρ(2) = 1/9
      ([0.0, 0.111], True)
      >>> bool(np.allclose(noise, [2, 8] / np.float64(64 * 500), rtol=0.2))  # Var θ² = 2k²
      True
    """
    n_t = num_data / temperature
    with np.errstate(all="ignore"):  # a diverged rate's sums are not finite: scored ∞
        return _scores([np.asarray(x, np.float64) for x in jax.tree.leaves(sums)], count, n_t)


def _scores(leaves: list[np.ndarray], count: int, n_t: float) -> tuple[np.ndarray, ...]:
    """:func:`virial_score` of the sums' leaves (θ's, then g's, then θ·g's), ``n_t = N/T``."""
    n = len(leaves) // 3
    scores, errors, noises = [], [], []
    for k in range(leaves[0].shape[0]):
        total, left_out, size, noise = 0.0, 0.0, 0, 0.0
        for th, g, thg in zip(leaves[:n], leaves[n : 2 * n], leaves[2 * n :], strict=True):
            th, g, thg = (x[k].reshape(-1, *x.shape[3:]) / count for x in (th, g, thg))
            th_mean, g_mean = th.mean(0), g.mean(0)  # pooled over the groups
            w = n_t * (thg - th_mean * g - g_mean * th + th_mean * g_mean)
            total += float(np.sum(_discrepancy(w)))
            left_out = left_out + _left_out(w)
            noise += _window_noise(w, th.shape[0] // GROUPS)
            size += w[0].size
        d, jack = total / size, left_out / size
        se = np.sqrt((len(jack) - 1) * np.mean((jack - jack.mean()) ** 2))
        ok = np.isfinite(d) and np.isfinite(se)
        scores.append(d if ok else np.inf)
        errors.append(se if ok else np.inf)
        noises.append(noise / size if ok else np.inf)
    return np.asarray(scores), np.asarray(errors), np.asarray(noises)


def _window_noise(w: np.ndarray, chains: int) -> float:
    """The sum over coordinates of the variance of ``v̂`` (the mean of ``w [C·Q, ...]``): from its
    chains' means where there are several (independent, whatever their autocorrelation time),
    else from the groups, consecutive parts of one chain, which understate it where the chain's
    autocorrelation time is not short against a group (on the quadratic of ``tests/chains/
    test_step_size.py``, about 2×: the run-length choice then went a grid step too low)."""
    per_chain = w.reshape(chains, -1, *w.shape[1:]).mean(1) if chains > 1 else w
    return float(np.sum(per_chain.var(0, ddof=1))) / per_chain.shape[0]
