"""The rows of ``sgrld reproduce stationary-1d`` (:mod:`sgrld_reproductions.stationary_1d`, which
describes the experiment): each sampler on N(0, 1) with its predicted stationary density
``π = Z·f·φ`` (Rensmeyer & Niggemann Sec. 3) and the requirements on its histogram, and the run
of one row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import integrate

import sgrld
from sgrld.samples.distances import (
    bin_probabilities,
    frequencies,
    noise_floor,
    normal_pdf,
    total_variation,
)
from sgrld_reproductions.scaffolding import sample_timed

PAPER_NORMALISERS = {"pSGLD": 1.258, "Monge": 0.5, "Shampoo": 1.253, "Adam-SGLD": 2.0495}
FAMILIES = ("pSGLD", "Monge", "Shampoo", "Adam-SGLD")
VARIANTS = ("as published", "corrected", "corrected, stabilised")


def normaliser(factor: Callable[[np.ndarray], np.ndarray]) -> float:
    """``Z = 1/∫ factor(θ)·φ(θ) dθ`` for an even ``factor``, by quadrature (split at 0).

    Example:
      >>> round(normaliser(lambda x: 1 + x**2), 6)  # Monge: ½(1 + θ²)φ(θ)
      0.5
    """
    half = integrate.quad(lambda x: factor(x) * normal_pdf(x), 0.0, np.inf, limit=200)[0]
    return 1.0 / (2.0 * half)


class Check(NamedTuple):
    """One requirement on a row: TV to ``reference`` at most (or at least) ``bound``.

    Attributes:
      reference: ``"prediction"`` or ``"target"``.
      at_most: True for ``TV ≤ bound``, False for ``TV ≥ bound``.
      bound: the tolerance.
    """

    reference: str
    at_most: bool
    bound: float

    def holds(self, tv: float) -> bool:
        """Whether the requirement holds for the measured TV."""
        return bool(tv <= self.bound) if self.at_most else bool(tv >= self.bound)

    def text(self) -> str:
        """``TV(π̂, π) ≤ 0.03`` or ``TV(π̂, p) ≥ 0.2``."""
        name = "π" if self.reference == "prediction" else "p"
        return f"TV(π̂,{name}) {'≤' if self.at_most else '≥'} {self.bound:g}"


PUBLISHED = (Check("prediction", True, 0.03), Check("target", False, 0.2))


class Curve(NamedTuple):
    """One row of the table and one panel of the figure.

    Attributes:
      key: short name (for ``--only`` and the JSON).
      family: the sampler (a column of the figure).
      variant: ``"as published"``, ``"corrected"`` or ``"corrected, stabilised"``.
      learning_rate: ``lr`` (num_data = 1, so the step h).
      settings: the hyperparameters, for the table and the JSON.
      make: ``() -> Sampler`` on the target's potential.
      factor: ``f`` of the prediction ``π = Z·f·φ`` (the constant 1 for a corrected sampler).
      checks: the requirements of this row.
      start: θ₀ of every chain.
      burn: burn-in, in time units (1/lr steps).
      span: sampling time per chain after burn-in, in time units.
      thin: time units between kept samples.
    """

    key: str
    family: str
    variant: str
    learning_rate: float
    settings: dict[str, Any]
    make: Callable[[], sgrld.Sampler]
    factor: Callable[[np.ndarray], np.ndarray]
    checks: tuple[Check, ...]
    start: float = 1.0
    burn: float = 3.0
    span: float = 4.0
    thin: float = 0.05

    @property
    def label(self) -> str:
        """``family (variant)``."""
        return f"{self.family} ({self.variant})"


def _potential() -> Callable:
    return sgrld.samples.targets.standard_normal().potential


def _riemannian(
    key: str,
    family: str,
    variant: str,
    metric: Callable[[], sgrld.metrics.Metric],
    metric_settings: dict[str, Any],
    learning_rate: float,
    metric_fn: Callable[[np.ndarray], np.ndarray],
    correction_scale: float,
    checks: tuple[Check, ...],
    **budget: float,
) -> Curve:
    """A Curve for SGRLD with ``metric``; Γ scaled by ``correction_scale`` (0: dropped).

    The prediction is ``π ∝ p·D^{c−1} = p·G^{1−c}`` with ``G = metric_fn`` the limiting metric
    (``D = G⁻¹``) and ``c`` the scale (Rensmeyer & Niggemann Sec. 3.1).
    """
    correction = None if correction_scale == 0.0 else "hutchinson"

    def make():
        return sgrld.sgrld(
            _potential(),
            metric(),
            learning_rate=learning_rate,
            num_data=1,
            correction=correction,
            correction_scale=correction_scale if correction else 1.0,
            adapt_until=None,  # the paper's setting: the metric adapts throughout
        )

    settings = {**metric_settings, "correction": correction or "none"}
    if correction:
        settings["correction_scale"] = correction_scale
    exponent = 1.0 - correction_scale
    factor = (lambda x: metric_fn(x) ** exponent) if exponent else (lambda x: np.ones_like(x))
    return Curve(key, family, variant, learning_rate, settings, make, factor, checks, **budget)


def curves() -> tuple[Curve, ...]:
    """The rows of Fig. 1 (as published) and their corrected counterparts, in table order."""
    rms = lambda decay: (
        lambda: sgrld.metrics.rmsprop(decay=decay, eps=1e-8),
        {"metric": "rmsprop", "decay": decay, "eps": 1e-8},
    )
    sham = lambda decay: (
        lambda: sgrld.metrics.shampoo(decay=decay, eps=1e-3, update_every=1),
        {"metric": "shampoo", "decay": decay, "eps": 1e-3, "update_every": 1},
    )
    mon = (
        lambda: sgrld.metrics.monge(alpha2=1.0, decay=0.9),
        {"metric": "monge", "alpha2": 1.0, "decay": 0.9},
    )
    g_rms = lambda x: 1e-8 + np.abs(x)  # the limiting metrics G(θ) = 1/D(θ), with g = θ
    g_sham = np.abs  # (H(1 + eps))^{1/2} = |θ|·√(1 + eps); the constant cancels in π
    g_mon = lambda x: 1.0 + np.square(x)
    slow = {"burn": 10.0, "span": 20.0, "thin": 0.1}  # Monge mixes in ~2 time units (D ≤ 1)
    target = lambda bound: (Check("target", True, bound),)
    adam = dict(a=1.0, eps=0.1, decay=0.9, beta=0.5)

    def make_adam():
        return sgrld.adam_sgld(_potential(), learning_rate=5e-5, num_data=1, **adam)

    return (
        _riemannian("psgld", "pSGLD", VARIANTS[0], *rms(0.9), 5e-5, g_rms, 0.1, PUBLISHED),
        _riemannian("psgld-c", "pSGLD", VARIANTS[1], *rms(0.9), 5e-5, g_rms, 1.0, target(0.1)),
        _riemannian("psgld-s", "pSGLD", VARIANTS[2], *rms(0.5), 5e-5, g_rms, 1.0, target(0.04)),
        _riemannian("monge", "Monge", VARIANTS[0], *mon, 1e-3, g_mon, 0.0, PUBLISHED, **slow),
        _riemannian("monge-c", "Monge", VARIANTS[1], *mon, 1e-3, g_mon, 1.0, target(0.02), **slow),
        _riemannian("shampoo", "Shampoo", VARIANTS[0], *sham(0.9), 1e-4, g_sham, 0.0, PUBLISHED),
        _riemannian(
            "shampoo-c", "Shampoo", VARIANTS[1], *sham(0.9), 1e-4, g_sham, 1.0, target(0.1)
        ),
        _riemannian(
            "shampoo-s", "Shampoo", VARIANTS[2], *sham(0.5), 1e-4, g_sham, 1.0, target(0.04)
        ),
        Curve(
            "adam",
            "Adam-SGLD",
            VARIANTS[0],
            5e-5,
            {"sampler": "adam_sgld", **adam},
            make_adam,
            lambda x: np.exp(-np.abs(x)) * (np.abs(x) + 0.1) ** 0.1,
            PUBLISHED,
            start=0.1,
        ),
    )


class CurveResult(NamedTuple):
    """The outcome of one row.

    Attributes:
      curve: the row's definition.
      normaliser: Z of its prediction (quadrature).
      freqs: empirical cell frequencies (41 bins, then outside), pooled over the kept chains.
      samples: samples kept (chains × per chain, diverged chains dropped).
      chains: chains run.
      diverged: chains that produced a NaN/inf (dropped).
      floor: Monte-Carlo noise floor of the TV (:func:`~sgrld.samples.distances.noise_floor`).
      n_eff: its effective number of independent draws.
      tv_target: TV(empirical, N(0, 1)).
      tv_prediction: TV(empirical, prediction).
      tv_prediction_target: TV(prediction, N(0, 1)) on the same cells.
      steps: steps per chain (burn-in included).
      wall_s: wall time of the sampling, compilation included.
    """

    curve: Curve
    normaliser: float
    freqs: np.ndarray
    samples: int
    chains: int
    diverged: int
    floor: float
    n_eff: float
    tv_target: float
    tv_prediction: float
    tv_prediction_target: float
    steps: int
    wall_s: float

    def check_results(self) -> list[tuple[Check, float, bool]]:
        """``(check, measured TV, holds)`` for each requirement of the row."""
        out = []
        for check in self.curve.checks:
            tv = self.tv_prediction if check.reference == "prediction" else self.tv_target
            out.append((check, tv, check.holds(tv)))
        return out


def exact_gradient(key: jax.Array) -> jax.Array:
    """The batch of every step: zero gradient noise (the target's gradient is exact)."""
    return jnp.zeros((), jnp.float32)


def run_curve(
    key: jax.Array, curve: Curve, chains: int, span: float, *, progress: bool = False
) -> CurveResult:
    """Sample one row with ``chains`` vmapped chains and score its histogram.

    Args:
      key: PRNG key.
      curve: the row.
      chains: number of chains, all started at ``curve.start``.
      span: sampling time per chain after the burn-in, in time units.
      progress: show a progress bar.

    Returns:
      The :class:`CurveResult`; chains that diverge are dropped and counted.
    """
    steps_per_unit = 1.0 / curve.learning_rate
    thin = max(1, round(curve.thin * steps_per_unit))
    burn = round(curve.burn * steps_per_unit)
    num_samples = max(1, round(span / curve.thin))
    if progress:
        num_samples = 20 * math.ceil(num_samples / 20)  # equal chunks: one compilation
    out, wall = sample_timed(
        key,
        curve.make(),
        jnp.asarray(curve.start, jnp.float32),
        exact_gradient,
        num_samples=num_samples,
        thin=thin,
        burn_in=burn,
        num_chains=chains,
        init="shared",  # every chain at the curve's start, as published
        progress=progress,
    )
    x = np.asarray(out.params, np.float64)
    ok = np.asarray(out.diverged_at) < 0
    x = x[ok]
    z = normaliser(curve.factor)
    predicted = bin_probabilities(lambda t: z * curve.factor(t) * normal_pdf(t))
    target = bin_probabilities(normal_pdf)
    freqs = frequencies(x)
    floor, n_eff = noise_floor(x) if x.shape[0] > 1 else (math.nan, math.nan)
    return CurveResult(
        curve=curve,
        normaliser=z,
        freqs=freqs,
        samples=int(x.size),
        chains=chains,
        diverged=int((~ok).sum()),
        floor=floor,
        n_eff=n_eff,
        tv_target=total_variation(freqs, target) if x.size else math.nan,
        tv_prediction=total_variation(freqs, predicted) if x.size else math.nan,
        tv_prediction_target=total_variation(predicted, target),
        steps=burn + num_samples * thin,
        wall_s=wall,
    )
