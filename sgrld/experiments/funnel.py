"""Yu et al. (2023) Fig. 2: SGRLD on the two-dimensional funnel in four metrics.

``sgrld reproduce funnel`` (and ``sgrld demo``, which runs it with ``--quick``).

What is reproduced (Sec. 4.2 and App. A.4 of Yu, Hartmann, Williams & Klami, TMLR 2023): the funnel
``θ = (x, v)``, ``v ~ N(0, 80)``, ``x | v ~ N(2, softplus(v))`` (:func:`sgrld.targets.funnel`),
sampled from the start ``(1, 1)`` with gradients corrupted by N(0, 1) noise, by SGRLD with four
metrics and the paper's hyperparameters:

========  ======  ==========================================================================
metric    step    metric hyperparameters
========  ======  ==========================================================================
Identity  0.001   (SGLD)
RMSprop   0.0025  decay λ = 0.995, ε = 0
Monge     0.003   α² = 0.1, λ = 0.7; identity fallback when ‖G⁻¹g‖ > 1000
Shampoo   0.003   λ = 0.9995, ε = 1e-6, roots every step (full-matrix RMSprop on 2-vectors)
========  ======  ==========================================================================

The paper's step size is this library's ``learning_rate`` with ``num_data = 1``, temperature 1. The
paper's samplers have no Γ correction, so none is the default (``--correction hutchinson`` adds it).
The paper draws 2·10⁶ samples per metric (one chain, thin 1); ``--chains K`` runs K vmapped chains
of 2·10⁶/K samples each from the same start. That takes less wall time (on two CPU cores, 16 chains
take about a third) but gives each chain a K times shorter run from the start, whose transient is
not discarded (as in the paper, no burn-in).

Outputs, in ``--out``: ``funnel.png`` (one column per metric: top, 1,000 random samples over exact
funnel draws on the paper's axes; bottom, the histogram of the hard marginal v against its exact
N(0, 80) density), and ``funnel.md`` / ``funnel.json``, the table also printed: the Wasserstein-1
distance and the Kolmogorov–Smirnov statistic between the samples of v and N(0, 80), both computed
exactly against the normal CDF (:func:`w1_to_normal`, :func:`ks_to_normal`); the mean and standard
deviation of v (exact: 0 and √80 ≈ 8.944); the fraction of samples in the neck v < −10 (exact
0.132), which the paper's figure shows the samplers struggle to reach; the fraction of steps in
which Monge's drift fallback fired; wall time (compilation included) and steps per second. A chain
that diverges (NaN/inf) is reported with its step and scored on the samples it took before; the
other metrics still run.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

import sgrld
from sgrld import report
from sgrld.report import console, finite, markdown_table, print_table

DIM, MEAN, SIGMA2, GRAD_NOISE = 2, 2.0, 80.0, 1.0
V_STD = math.sqrt(SIGMA2)
FULL_SAMPLES = 2_000_000
QUICK_SAMPLES, QUICK_CHAINS = 20_000, 4
SCATTER_POINTS = 1_000
EXACT_POINTS = 20_000
XLIM, YLIM = (-5.0, 9.0), (-25.0, 25.0)
HIST_BINS = 60
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
      w1: Wasserstein-1 distance (:func:`w1_to_normal`).
      ks: Kolmogorov–Smirnov statistic (:func:`ks_to_normal`).
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


def funnel_target() -> sgrld.targets.Target:
    """The paper's funnel: D = 2, mean 2, σ² = 80, gradient noise of standard deviation 1."""
    return sgrld.targets.funnel(dim=DIM, mean=MEAN, sigma2=SIGMA2, grad_noise=GRAD_NOISE)


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
        max_drift_norm=setting.max_drift_norm,
    )
    start = time.perf_counter()
    try:
        out = sgrld.sample(
            key,
            sampler,
            target.init_params,
            target.batch_fn,
            num_samples=samples_per_chain,
            thin=1,
            num_chains=chains,
            progress=progress,
        )
    except sgrld.DivergenceError as error:
        out = error.samples
    jax.block_until_ready(out.params)
    wall = time.perf_counter() - start
    params = np.asarray(out.params, np.float32)  # [chains, n, 2]
    diverged_at = np.asarray(out.diverged_at).reshape(chains)
    # Thin 1: sample j is the state after step j, so a chain that diverged at step d has d samples.
    n_ok = np.where(diverged_at >= 0, np.minimum(diverged_at, params.shape[1]), params.shape[1])
    keep = np.arange(params.shape[1])[None, :] < n_ok[:, None]
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


def reproduce(
    num_samples: int,
    chains: int,
    seed: int,
    correction: str | None,
    *,
    progress: bool = False,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the four metrics of Fig. 2 and score them.

    Args:
      num_samples: samples per metric over all chains (rounded up to a multiple of ``chains``).
      chains: number of vmapped chains per metric.
      seed: the random seed (metric i uses ``fold_in(key(seed), i)``).
      correction: ``None`` (the paper) or ``"hutchinson"``.
      progress: show progress bars.
      on_result: called with the results so far after each metric (to save partial results).

    Returns:
      ``{"config": {...}, "metrics": {name: MetricResult}}``; ``config`` records the run and the
      exact marginal (``true_v_mean``, ``true_v_std``) the scores use.
    """
    if num_samples < 1 or chains < 1:
        raise ValueError(f"num_samples and chains must be >= 1, got {num_samples} and {chains}")
    per_chain = math.ceil(num_samples / chains)
    results: dict[str, Any] = {
        "config": {
            "paper": "Yu et al. (TMLR 2023), Fig. 2, Sec. 4.2, App. A.4",
            "target": {"dim": DIM, "mean": MEAN, "sigma2": SIGMA2, "grad_noise": GRAD_NOISE},
            "start": [1.0] * DIM,
            "num_samples": per_chain * chains,
            "chains": chains,
            "samples_per_chain": per_chain,
            "thin": 1,
            "burn_in": 0,
            "num_data": 1,
            "temperature": 1.0,
            "correction": correction or "none",
            "seed": seed,
            "true_v_mean": 0.0,
            "true_v_std": V_STD,
            "true_neck": NECK_MASS,
            "w1": "exact integral of |F_emp − F| against the N(0, 80) CDF (no reference sample)",
            "wall_time": "sampling including compilation",
            "backend": jax.default_backend(),
        },
        "metrics": {},
    }
    key = jax.random.key(seed)
    for i, setting in enumerate(SETTINGS):
        metric_key = jax.random.fold_in(key, i)
        result = run_metric(metric_key, setting, per_chain, chains, correction, progress=progress)
        results["metrics"][setting.name] = result
        if on_result is not None:
            on_result(results)
    return results


def table_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One JSON-ready dict per metric (non-finite numbers become None)."""
    rows = []
    for name, r in results["metrics"].items():
        rows.append(
            {
                "metric": name,
                **r.setting.hyperparameters(),
                "samples": int(r.samples.shape[0]),
                "w1_v": finite(r.scores.w1),
                "ks_v": finite(r.scores.ks),
                "mean_v": finite(r.scores.mean),
                "std_v": finite(r.scores.std),
                "neck": finite(r.scores.neck),
                "drift_fallback": r.drift_fallback,
                "metric_fallbacks": r.metric_fallbacks,
                "status": r.status(),
                "diverged_at": [int(d) for d in r.diverged_at],
                "wall_s": r.wall_s,
                "steps_per_s": r.steps / r.wall_s,
            }
        )
    return rows


COLUMNS = (
    ("metric", "Metric", "{}"),
    ("learning_rate", "step", "{:g}"),
    ("samples", "samples", "{:,}"),
    ("w1_v", "W1(v)", "{:.3f}"),
    ("ks_v", "KS(v)", "{:.3f}"),
    ("mean_v", "mean v", "{:+.3f}"),
    ("std_v", "std v", "{:.3f}"),
    ("neck", f"v<{NECK:g}", "{:.3f}"),
    ("drift_fallback", "fallback", "{:.2e}"),
    ("status", "status", "{}"),
    ("wall_s", "wall [s]", "{:.1f}"),
    ("steps_per_s", "steps/s", "{:,.0f}"),
)


def caption(results: dict[str, Any]) -> str:
    """One line describing the run and the exact answer."""
    c = results["config"]
    return (
        f"Funnel (Yu et al. 2023, Fig. 2): {c['num_samples']:,} samples per metric in "
        f"{c['chains']} chain(s), correction {c['correction']}, seed {c['seed']}. "
        f"Exact v-marginal N(0, 80): mean 0, std {V_STD:.3f}, P(v < {NECK:g}) = {NECK_MASS:.3f}."
    )


NOTES = (
    "W1(v), KS(v): Wasserstein-1 distance and Kolmogorov–Smirnov statistic between the samples "
    f"of v and N(0, 80), computed exactly against its CDF. v<{NECK:g}: fraction of samples "
    "in the funnel's neck. fallback: fraction of steps where "
    "Monge's identity fallback (‖G⁻¹g‖ > 1000) fired. wall: sampling time including "
    "compilation; steps/s counts the steps of all chains."
)


def markdown(results: dict[str, Any]) -> str:
    """The table as markdown, with its caption and column notes."""
    return markdown_table(caption(results), COLUMNS, table_rows(results), NOTES)


def write_tables(results: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``funnel.md`` and ``funnel.json`` into ``out``; return their paths."""
    payload = {"config": results["config"], "metrics": table_rows(results)}
    return report.write_tables(out, "funnel", markdown(results), payload)


def plot(results: dict[str, Any], out: Path, seed: int) -> Path:
    """Draw Fig. 2 into ``out/funnel.png``; return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    exact = np.asarray(funnel_target().sample(jax.random.key(seed), EXACT_POINTS))
    grid = np.linspace(-30.0, 30.0, 401)
    density = np.exp(-0.5 * grid**2 / SIGMA2) / math.sqrt(2 * math.pi * SIGMA2)
    metrics = results["metrics"]
    fig, axes = plt.subplots(
        2, len(metrics), figsize=(4 * len(metrics), 7.5), squeeze=False, constrained_layout=True
    )
    for col, (name, r) in enumerate(metrics.items()):
        top, bottom = axes[0, col], axes[1, col]
        top.scatter(exact[:, 0], exact[:, 1], s=1, c="0.8", alpha=0.5, lw=0, label="exact")
        pick = rng.choice(r.samples.shape[0], min(SCATTER_POINTS, r.samples.shape[0]), False)
        top.scatter(r.samples[pick, 0], r.samples[pick, 1], s=4, c="C1", alpha=0.8, label="samples")
        top.set(xlim=XLIM, ylim=YLIM, xlabel="x", ylabel="v")
        top.set_title(name if r.status() == "ok" else f"{name}: {r.status()}", fontsize=10)
        v = r.samples[:, -1]
        # Density over all samples, so mass outside the plotted range shows as missing mass.
        weights = np.full(v.size, 1.0 / (max(v.size, 1) * (grid[-1] - grid[0]) / HIST_BINS))
        bottom.hist(
            v,
            bins=HIST_BINS,
            range=(grid[0], grid[-1]),
            weights=weights,
            color="C1",
            alpha=0.7,
            label="samples",
        )
        bottom.plot(grid, density, c="C0", label="N(0, 80)")
        bottom.set(
            xlabel="v", ylabel="density", title=f"W1 {r.scores.w1:.2f}, std {r.scores.std:.2f}"
        )
    axes[0, 0].legend(loc="lower right", fontsize=8, markerscale=4)
    axes[1, 0].legend(loc="upper right", fontsize=8)
    path = out / "funnel.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _positive_int(text: str) -> int:
    value = int(float(text)) if "e" in text.lower() else int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add this reproduction's options to ``parser``."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a small run (under a minute): {QUICK_SAMPLES:,} samples per metric in "
        f"{QUICK_CHAINS} chains; what `sgrld demo` runs",
    )
    parser.add_argument(
        "--samples",
        type=_positive_int,
        default=None,
        help=f"samples per metric over all chains (default {FULL_SAMPLES:,} as in the paper, "
        f"{QUICK_SAMPLES:,} with --quick)",
    )
    parser.add_argument(
        "--chains",
        type=_positive_int,
        default=None,
        help="vmapped chains per metric, each of samples/chains steps from (1, 1); default 1 (the "
        f"paper's single chain; {QUICK_CHAINS} with --quick). Several chains take less wall time "
        "(e.g. --chains 16), but each has a shorter run from the start",
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed (default: %(default)s)")
    parser.add_argument(
        "--correction",
        choices=("none", "hutchinson"),
        default="none",
        help="Γ correction term (default: %(default)s, as the paper's samplers)",
    )
    parser.add_argument(
        "--out", default="results/funnel", help="results folder (default: %(default)s)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the reproduction from parsed arguments: sample, print, write the files. Returns 0."""
    con = console()
    num_samples = args.samples or (QUICK_SAMPLES if args.quick else FULL_SAMPLES)
    chains = args.chains or (QUICK_CHAINS if args.quick else 1)
    correction = None if args.correction == "none" else args.correction
    out = Path(args.out)

    def progress_line(results: dict[str, Any]) -> None:
        name, r = list(results["metrics"].items())[-1]
        con.print(
            f"{name}: W1(v) {r.scores.w1:.3f}, std v {r.scores.std:.3f}, {r.status()}, "
            f"{r.wall_s:.1f} s"
        )
        write_tables(results, out)

    con.print(
        f"Funnel (Yu et al. 2023, Fig. 2): {num_samples:,} samples per metric, {chains} chain(s), "
        f"correction {args.correction}, seed {args.seed}"
    )
    results = reproduce(
        num_samples, chains, args.seed, correction, progress=True, on_result=progress_line
    )
    md, js = write_tables(results, out)
    png = plot(results, out, args.seed)
    print_table(caption(results), COLUMNS, table_rows(results))
    con.print(f"Wrote {png}, {md} and {js}")
    return 0
