"""The funnel of Yu et al. (2023) Fig. 2 sampled by one metric: the paper's settings (App. A.4),
one run from the start ``(1, 1)`` and the scores of its samples of the hard marginal v.

Used by ``sgrld reproduce funnel`` (:mod:`sgrld_reproductions.funnel`, which describes the
experiment).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import numpy as np

import sgrld
from sgrld.samples.distances import ks_to_normal, w1_to_normal
from sgrld_reproductions.scaffolding import sample_timed

DIM, MEAN, SIGMA2, GRAD_NOISE = 2, 2.0, 80.0, 1.0
V_STD = math.sqrt(SIGMA2)
NECK = -10.0
NECK_MASS = 0.5 * math.erfc(-NECK / (V_STD * math.sqrt(2.0)))  # Φ(NECK/√80) ≈ 0.132


class Setting(NamedTuple):
    """One column of Fig. 2: a metric with the hyperparameters of App. A.4.

    Attributes:
      name: the metric's name in the paper.
      learning_rate: the paper's step size (``num_data = 1``).
      metric: ``partial`` of a :mod:`sgrld.metrics` factory with its hyperparameters.
      max_drift_norm: the sampler's identity fallback threshold, or None.
    """

    name: str
    learning_rate: float
    metric: partial
    max_drift_norm: float | None = None

    def hyperparameters(self) -> dict[str, Any]:
        """Every hyperparameter of the setting, for the JSON file."""
        out = {"learning_rate": self.learning_rate, **self.metric.keywords}
        if self.max_drift_norm is not None:
            out["max_drift_norm"] = self.max_drift_norm
        return out


SETTINGS = (
    Setting("Identity", 0.001, partial(sgrld.metrics.identity)),
    Setting("RMSprop", 0.0025, partial(sgrld.metrics.rmsprop, decay=0.995, eps=0.0)),
    Setting(
        "Monge", 0.003, partial(sgrld.metrics.monge, alpha2=0.1, decay=0.7), max_drift_norm=1000.0
    ),
    Setting(
        "Shampoo", 0.003, partial(sgrld.metrics.shampoo, decay=0.9995, eps=1e-6, update_every=1)
    ),
)


class VScores(NamedTuple):
    """How far the samples of v are from the exact marginal N(0, 80) (NaN without samples).

    Attributes:
      w1: Wasserstein-1 distance (:func:`~sgrld.samples.distances.w1_to_normal`).
      ks: Kolmogorov–Smirnov statistic (:func:`~sgrld.samples.distances.ks_to_normal`).
      mean: mean of v (exact 0).
      std: standard deviation of v (exact √80).
      neck: fraction of samples in the funnel's neck, ``v < NECK`` (exact ``Φ(NECK/√80)``).
    """

    w1: float
    ks: float
    mean: float
    std: float
    neck: float


class MetricResult(NamedTuple):
    """The outcome of one metric.

    Attributes:
      setting: the metric and its hyperparameters.
      samples: float32 ``[n, 2]`` samples ``(x, v)`` of all chains, pooled, up to any divergence.
      steps: steps computed, over all chains.
      diverged_at: per chain, the step that produced a NaN/inf, or −1.
      drift_fallback: fraction of the steps in ``samples`` where the drift fallback fired (None
        without ``max_drift_norm``).
      metric_fallbacks: metric refreshes that kept their previous value (Shampoo's roots), summed
        over chains.
      wall_s: wall time of the sampling, compilation included.
      scores: :class:`VScores` of ``samples``.
    """

    setting: Setting
    samples: np.ndarray
    steps: int
    diverged_at: np.ndarray
    drift_fallback: float | None
    metric_fallbacks: int
    wall_s: float
    scores: VScores

    def status(self) -> str:
        """``"ok"`` or where the chains diverged."""
        bad = self.diverged_at[self.diverged_at >= 0]
        if bad.size == 0:
            return "ok"
        chains = (
            "" if self.diverged_at.size == 1 else f" ({bad.size}/{self.diverged_at.size} chains)"
        )
        return f"diverged at step {int(bad.min())}{chains}"


def score_v(v: np.ndarray) -> VScores:
    """:class:`VScores` of samples of v against the exact marginal N(0, 80)."""
    if v.size == 0:
        return VScores(math.nan, math.nan, math.nan, math.nan, math.nan)
    v64 = v.astype(np.float64)
    return VScores(
        w1_to_normal(v, V_STD),
        ks_to_normal(v, V_STD),
        float(v64.mean()),
        float(v64.std()),
        float(np.mean(v64 < NECK)),
    )


def funnel_target() -> sgrld.samples.targets.Target:
    """The paper's funnel: D = 2, mean 2, σ² = 80, gradient noise of standard deviation 1."""
    return sgrld.samples.targets.funnel(dim=DIM, mean=MEAN, sigma2=SIGMA2, grad_noise=GRAD_NOISE)


def _before_divergence(diverged_at: np.ndarray, n: int) -> np.ndarray:
    """``[chains, n]`` mask of the samples taken before each chain diverged (all if it did not).

    Thin 1: sample j is the state after step j, so a chain that diverged at step d has d samples.

    Example:
      >>> _before_divergence(np.array([-1, 2]), 3).astype(int).tolist()
      [[1, 1, 1], [1, 1, 0]]
    """
    n_ok = np.where(diverged_at >= 0, np.minimum(diverged_at, n), n)
    return np.arange(n)[None, :] < n_ok[:, None]


def run_metric(
    key: jax.Array,
    setting: Setting,
    samples_per_chain: int,
    chains: int,
    correction: str | None,
    *,
    progress: bool = False,
) -> MetricResult:
    """Sample the funnel with one metric; a divergence is recorded, not raised.

    Args:
      key: PRNG key.
      setting: the metric and hyperparameters.
      samples_per_chain: steps (= samples, thin 1) per chain.
      chains: number of vmapped chains, all starting at ``(1, 1)``.
      correction: ``None`` or ``"hutchinson"``, passed to :func:`sgrld.sgrld`.
      progress: show a progress bar.

    Returns:
      The :class:`MetricResult`.
    """
    target = funnel_target()
    sampler = sgrld.sgrld(
        target.potential,
        setting.metric(),
        learning_rate=setting.learning_rate,
        num_data=1,
        temperature=1.0,
        correction=correction,
        correction_scale=1.0,  # the full Γ, as RESULTS §8 measured it
        max_drift_norm=setting.max_drift_norm,
        adapt_until=None,  # the paper's setting: the metric adapts throughout
    )
    out, wall = sample_timed(
        key,
        sampler,
        target.init_params,
        target.batch_fn,
        num_samples=samples_per_chain,
        thin=1,
        num_chains=chains,
        init="shared",  # the paper's start, as RESULTS §8 measured it
        progress=progress,
    )
    params = np.asarray(out.params, np.float32)  # [chains, n, 2]
    diverged_at = np.asarray(out.diverged_at).reshape(chains)
    keep = _before_divergence(diverged_at, params.shape[1])
    samples = params[keep]
    fallback = None
    if setting.max_drift_norm is not None and samples.size:
        fallback = float(np.asarray(out.info.drift_fallback)[keep].mean())
    return MetricResult(
        setting=setting,
        samples=samples,
        steps=chains * params.shape[1],
        diverged_at=diverged_at,
        drift_fallback=fallback,
        metric_fallbacks=int(np.asarray(out.state.metric_state.fallbacks).sum()),
        wall_s=wall,
        scores=score_v(samples[:, -1]),
    )
