"""Rensmeyer & Niggemann Fig. 1: the stationary densities of adaptive samplers on N(0, 1).

``sgrld reproduce stationary-1d``.

What is reproduced (Rensmeyer & Niggemann, "On the Convergence of Locally Adaptive and Scalable
Diffusion-Based Sampling Methods for Deep Bayesian Neural Network Posteriors", Sec. 2.2, 3, 4 and
App. A.3, and their notebooks): sampling the standard normal ``p(θ) = φ(θ)`` with exact
gradients, an adaptive sampler that drops (or scales by c) the correction Γ of its metric
``G⁻¹ = D(θ)`` converges, as the step goes to 0, to ``π ∝ p·D^{c−1}`` (their Sec. 3.1; c = 0:
Γ dropped; c = 1 − α: TensorFlow Probability's pSGLD, whose autodiff through the moving average
sees only a 1 − α share of ∂D/∂θ), and Adam-SGLD to ``π ∝ p·exp(∫ a·G·d log p)`` (Sec. 3.2).
The predictions, with normalisers computed here by quadrature (:func:`normaliser`):

===========  =======================================  ==============================  ==========
sampler      settings (this library)                  predicted π(θ)                  paper's Z
===========  =======================================  ==============================  ==========
pSGLD (TFP)  rmsprop(decay 0.9, eps 1e-8), lr 5e-5,   Z·(1e-8 + |θ|)^0.9·φ(θ)          1.258
             Γ × (1 − decay) (``correction_scale``)
Monge        monge(α² 1, decay 0.9), lr 1e-3, no Γ    Z·(1 + θ²)·φ(θ)                  0.5
Shampoo      shampoo(decay 0.9, eps 1e-3, every       Z·|θ|·φ(θ)                       1.253
             step), lr 1e-4, no Γ (1×1: G⁻¹ ≈ 1/|g|)
Adam-SGLD    a 1, eps λ 0.1, decay α 0.9, β 0.5,      Z·e^{−|θ|}(|θ| + 0.1)^0.1·φ(θ)   2.0495
             lr 5e-5, start 0.1
===========  =======================================  ==============================  ==========

Their step ε (update ``θ + ε/2·drift + N(0, ε)``) is ``lr = ε/2`` here (num_data = 1); the numpy
Monge/Shampoo code's η is ``lr``. Every other chain starts at θ₀ = 1, as in the notebooks. Added
to the figure: the same samplers with the full correction (``correction="hutchinson"``, c = 1;
exact in one dimension, where the single Rademacher probe squares to 1), whose prediction is φ
itself, at the paper's settings and, for pSGLD and Shampoo, at a *stabilised* setting: decay 0.5
instead of 0.9, everything else unchanged.

Why a stabilised setting, and why that one: the metrics of pSGLD and Shampoo are singular where the
gradient vanishes (D ≈ 1/|θ|). Near θ = 0 one step moves θ by about √(2·lr/|θ|), more than |θ|, so
within the moving average's window of ~1/(1 − decay) steps the statistic cannot track the metric,
and the corrected chain keeps an excess of mass at |θ| ≲ 0.15 (TV ≈ 0.1 to N(0, 1) at the paper's
settings). The excess shrinks only slowly with the step (in exploratory runs of 1,024 chains with a
noise floor of about 0.02, Shampoo's TV went from 0.115 at lr 1e-4 to 0.068 at lr 1e-5, consistent
with a region of size ~(lr/(1 − decay))^{1/3}), and a larger eps hardly helps pSGLD (0.083 at
eps 1e-2, 0.030 at eps 1e-1; Shampoo's eps is relative and cannot bound D). A two-step memory
(decay 0.5) lets the statistic follow the metric: TV at the noise floor, at the paper's step.
(Rensmeyer & Niggemann's own corrected run, ``FixedPSGLD``, used a 20× smaller step, 2.5e-6, a
smoothed metric 1/√(V + 0.01) and 8·10⁸ steps; its output was not saved.)

Estimation (instead of one chain of 10⁷ steps): many vmapped chains (:func:`sgrld.sample`), a
burn-in of several mixing times, then samples thinned to ``thin`` time units (one time unit is
1/lr steps). Density: the paper's 41 bins of width 0.1 on [−2.05, 2.05]. Total variation (TV) is
``½Σ_k |p̂_k − p_k|`` over the 41 bins and the cell of everything outside them, with ``p_k`` the
exact probability of each bin under the density (:func:`bin_probabilities`). A histogram's TV is
biased upwards by Monte-Carlo noise: the *noise floor* is the expected TV of the pooled histogram
from noise alone, ``½·√(2/π)·Σ_k sd(p̂_k)``, with ``sd(p̂_k)`` from batch means over groups of
chains (which accounts for autocorrelation), and ``n_eff`` is the number of independent exact draws
whose histogram has the same floor (:func:`noise_floor`). Budgets are chosen so that the floor is a
third of the tightest tolerance or less.

The requirements checked per row (issue 3): each sampler as published within TV 0.03 of its
prediction and at least 0.2 from N(0, 1) (Adam-SGLD's prediction is itself only 0.178 from N(0, 1)
on these bins, so that check fails for it by construction); corrected Monge within 0.02 of N(0, 1);
corrected pSGLD and Shampoo within 0.1 at the paper's settings and 0.04 at the stabilised one.

Outputs, in ``--out``: ``stationary_1d.png`` (one panel per row: target, prediction, histogram),
``stationary_1d.md`` / ``stationary_1d.json`` (the table also printed, with the bin frequencies in
the JSON).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import integrate

import sgrld
from sgrld import report
from sgrld.report import console, finite, markdown_table, print_table

EDGES = np.linspace(-2.05, 2.05, 42)
WIDTH = 0.1
FULL_CHAINS, QUICK_CHAINS = 2048, 128
QUICK_SPAN_FRACTION = 0.25
GROUPS = 32
PAPER_NORMALISERS = {"pSGLD": 1.258, "Monge": 0.5, "Shampoo": 1.253, "Adam-SGLD": 2.0495}
FAMILIES = ("pSGLD", "Monge", "Shampoo", "Adam-SGLD")
VARIANTS = ("as published", "corrected", "corrected, stabilised")


def normal_pdf(x: np.ndarray) -> np.ndarray:
    """The target density φ(θ) of N(0, 1)."""
    return np.exp(-0.5 * np.square(x)) / math.sqrt(2.0 * math.pi)


def normaliser(factor: Callable[[np.ndarray], np.ndarray]) -> float:
    """``Z = 1/∫ factor(θ)·φ(θ) dθ`` for an even ``factor``, by quadrature (split at 0).

    Example:
      >>> round(normaliser(lambda x: 1 + x**2), 6)  # Monge: ½(1 + θ²)φ(θ)
      0.5
    """
    half = integrate.quad(lambda x: factor(x) * normal_pdf(x), 0.0, np.inf, limit=200)[0]
    return 1.0 / (2.0 * half)


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
    return sgrld.targets.standard_normal().potential


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
        return sgrld.adam_sgld(_potential(), 5e-5, num_data=1, **adam)

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
      floor: Monte-Carlo noise floor of the TV (:func:`noise_floor`).
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
    start = time.perf_counter()
    try:
        out = sgrld.sample(
            key,
            curve.make(),
            jnp.asarray(curve.start, jnp.float32),
            exact_gradient,
            num_samples=num_samples,
            thin=thin,
            burn_in=burn,
            num_chains=chains,
            progress=progress,
        )
    except sgrld.DivergenceError as error:
        out = error.samples
    x = np.asarray(jax.block_until_ready(out.params), np.float64)
    wall = time.perf_counter() - start
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


def reproduce(
    chains: int,
    seed: int,
    *,
    quick: bool = False,
    only: tuple[str, ...] | None = None,
    progress: bool = False,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the rows of the table.

    Args:
      chains: vmapped chains per row.
      seed: random seed (row i uses ``fold_in(key(seed), i)``, i its index in :func:`curves`).
      quick: sample for a quarter of each row's time span (burn-in unchanged).
      only: keys of the rows to run (default: all).
      progress: show progress bars.
      on_result: called with the results so far after each row.

    Returns:
      ``{"config": {...}, "rows": {key: CurveResult}}``.
    """
    rows = curves()
    if only:
        unknown = set(only) - {c.key for c in rows}
        if unknown:
            raise ValueError(f"unknown rows {sorted(unknown)}; choose from {[c.key for c in rows]}")
    results: dict[str, Any] = {
        "config": {
            "paper": "Rensmeyer & Niggemann, Fig. 1 (Sec. 4), predictions of Sec. 3 / App. A.3",
            "target": "N(0, 1), exact gradients, num_data 1, temperature 1",
            "chains": chains,
            "quick": quick,
            "seed": seed,
            "bins": {"edges": [float(EDGES[0]), float(EDGES[-1])], "count": 41, "width": WIDTH},
            "tv": "½Σ|p̂_k − p_k| over the 41 bins and the cell outside them, exact p_k",
            "noise_floor": f"batch means over {GROUPS} groups of chains",
            "time_unit": "1/lr steps",
            "backend": jax.default_backend(),
        },
        "rows": {},
    }
    key = jax.random.key(seed)
    for i, curve in enumerate(rows):
        if only and curve.key not in only:
            continue
        span = curve.span * (QUICK_SPAN_FRACTION if quick else 1.0)
        result = run_curve(jax.random.fold_in(key, i), curve, chains, span, progress=progress)
        results["rows"][curve.key] = result
        if on_result is not None:
            on_result(results)
    return results


def table_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One JSON-ready dict per row."""
    rows = []
    for key, r in results["rows"].items():
        c = r.curve
        checks = r.check_results()
        published = c.variant == VARIANTS[0]
        rows.append(
            {
                "key": key,
                "sampler": c.label,
                "learning_rate": c.learning_rate,
                "settings": c.settings,
                "start": c.start,
                "normaliser": r.normaliser,
                "paper_normaliser": PAPER_NORMALISERS[c.family] if published else None,
                "chains": r.chains,
                "diverged": r.diverged,
                "burn_in_steps": round(c.burn / c.learning_rate),
                "steps_per_chain": r.steps,
                "samples": r.samples,
                "n_eff": finite(r.n_eff),
                "noise_floor": finite(r.floor),
                "tv_target": finite(r.tv_target),
                "tv_prediction": finite(r.tv_prediction) if published else None,
                "tv_prediction_target": r.tv_prediction_target,
                "checks": [
                    {"requirement": ch.text(), "tv": finite(tv), "holds": ok}
                    for ch, tv, ok in checks
                ],
                "requirements": "; ".join(
                    f"{ch.text()} {'✓' if ok else '✗'}" for ch, _, ok in checks
                ),
                "all_hold": all(ok for _, _, ok in checks),
                "frequencies": [float(f) for f in r.freqs],
                "wall_s": r.wall_s,
            }
        )
    return rows


COLUMNS = (
    ("sampler", "sampler", "{}"),
    ("learning_rate", "lr", "{:g}"),
    ("chains", "chains", "{:,}"),
    ("samples", "samples", "{:,}"),
    ("n_eff", "n_eff", "{:,.0f}"),
    ("noise_floor", "floor", "{:.4f}"),
    ("tv_target", "TV(π̂,p)", "{:.4f}"),
    ("tv_prediction", "TV(π̂,π)", "{:.4f}"),
    ("tv_prediction_target", "TV(π,p)", "{:.4f}"),
    ("requirements", "requirements (issue 3)", "{}"),
    ("diverged", "diverged", "{}"),
    ("wall_s", "wall [s]", "{:.1f}"),
)


def caption(results: dict[str, Any]) -> str:
    """One line describing the run."""
    c = results["config"]
    return (
        f"Stationary densities on N(0, 1) (Rensmeyer & Niggemann Fig. 1): {c['chains']:,} chains "
        f"per row{' (quick)' if c['quick'] else ''}, seed {c['seed']}. p = N(0, 1), π = predicted "
        "density, π̂ = histogram (41 bins of 0.1 and the outside cell)."
    )


NOTES = (
    "TV: ½Σ|p̂_k − p_k| over the 41 bins and the cell outside [−2.05, 2.05], with exact bin "
    "probabilities. floor: expected TV of the histogram from Monte-Carlo noise alone (batch means "
    "over groups of chains); n_eff: independent exact draws with the same floor. TV(π,p): the "
    "prediction's own distance to N(0, 1), the value TV(π̂,p) tends to for a sampler as published. "
    "Corrected rows predict π = p. Stabilised: moving-average decay 0.5 instead of 0.9. wall: "
    "sampling time including compilation."
)


def markdown(results: dict[str, Any]) -> str:
    """The table as markdown, with its caption and notes."""
    return markdown_table(caption(results), COLUMNS, table_rows(results), NOTES)


def write_tables(results: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``stationary_1d.md`` and ``stationary_1d.json`` into ``out``; return their paths."""
    payload = {"config": results["config"], "rows": table_rows(results)}
    return report.write_tables(out, "stationary_1d", markdown(results), payload)


def plot(results: dict[str, Any], out: Path) -> Path:
    """Draw the figure into ``out/stationary_1d.png`` (rows: variants, columns: samplers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(-2.5, 2.5, 501)
    fig, axes = plt.subplots(
        len(VARIANTS),
        len(FAMILIES),
        figsize=(4 * len(FAMILIES), 3.2 * len(VARIANTS)),
        squeeze=False,
        constrained_layout=True,
    )
    for ax in axes.ravel():
        ax.set_axis_off()
    for r in results["rows"].values():
        c = r.curve
        ax = axes[VARIANTS.index(c.variant), FAMILIES.index(c.family)]
        ax.set_axis_on()
        ax.plot(grid, normal_pdf(grid), "k--", lw=1.2, label="target p")
        if c.variant == VARIANTS[0]:
            pred = r.normaliser * c.factor(grid) * normal_pdf(grid)
            ax.plot(grid, pred, "C0:", lw=1.8, label="predicted π")
        ax.stairs(r.freqs[:-1] / WIDTH, EDGES, color="C1", lw=1.4, label="empirical π̂")
        tv = f"TV(π̂,p) {r.tv_target:.3f}"
        if c.variant == VARIANTS[0]:
            tv += f", TV(π̂,π) {r.tv_prediction:.3f}"
        ax.set_title(f"{c.label}\nlr {c.learning_rate:g}; {tv}", fontsize=9)
        ax.set(xlim=(-2.5, 2.5), ylim=(0.0, 0.8), xlabel="θ", ylabel="density")
        ax.legend(fontsize=7, loc="upper right")
    path = out / "stationary_1d.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add this reproduction's options to ``parser``."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a small run for CI: {QUICK_CHAINS} chains per row sampling a quarter of the "
        "time span (the TVs are then dominated by noise; see the floor column)",
    )
    parser.add_argument(
        "--chains",
        type=int,
        default=None,
        help=f"vmapped chains per row (default {FULL_CHAINS:,}, {QUICK_CHAINS} with --quick)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="ROW",
        help=f"run only these rows: {', '.join(c.key for c in curves())}",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    parser.add_argument(
        "--out", default="results/stationary-1d", help="results folder (default: %(default)s)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the reproduction from parsed arguments: sample, print, write the files. Returns 0."""
    out = Path(args.out)
    chains = args.chains or (QUICK_CHAINS if args.quick else FULL_CHAINS)
    if chains < 2:
        raise ValueError(f"--chains must be >= 2 (the noise floor needs groups), got {chains}")
    con = console()

    def progress_line(results: dict[str, Any]) -> None:
        r = list(results["rows"].values())[-1]
        con.print(
            f"{r.curve.label}: TV to target {r.tv_target:.4f}, to prediction "
            f"{r.tv_prediction:.4f}, floor {r.floor:.4f}, {r.wall_s:.1f} s"
        )
        write_tables(results, out)

    con.print(
        f"Stationary densities on N(0, 1): {chains:,} chains per row, seed {args.seed}"
        f"{', quick' if args.quick else ''}"
    )
    results = reproduce(
        chains,
        args.seed,
        quick=args.quick,
        only=tuple(args.only) if args.only else None,
        progress=not args.quick,
        on_result=progress_line,
    )
    md, js = write_tables(results, out)
    png = plot(results, out)
    print_table(caption(results), COLUMNS, table_rows(results))
    con.print(f"Wrote {png}, {md} and {js}")
    return 0
