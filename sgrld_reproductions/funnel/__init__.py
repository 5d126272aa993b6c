"""Yu et al. (2023) Fig. 2: SGRLD on the two-dimensional funnel in four metrics.

``sgrld reproduce funnel``.

What is reproduced (Sec. 4.2 and App. A.4 of Yu, Hartmann, Williams & Klami, TMLR 2023): the funnel
``θ = (x, v)``, ``v ~ N(0, 80)``, ``x | v ~ N(2, softplus(v))``
(:func:`sgrld.samples.targets.funnel`), sampled from the start ``(1, 1)`` with gradients corrupted
by N(0, 1) noise, by SGRLD with four
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
exactly against the normal CDF (:mod:`sgrld.samples.distances`); the mean and standard
deviation of v (exact: 0 and √80 ≈ 8.944); the fraction of samples in the neck v < −10 (exact
0.132), which the paper's figure shows the samplers struggle to reach; the fraction of steps in
which Monge's drift fallback fired; wall time (compilation included) and steps per second. A chain
that diverges (NaN/inf) is reported with its step and scored on the samples it took before; the
other metrics still run. One metric's run and scores: :mod:`sgrld_reproductions.funnel.runs`.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import jax
import numpy as np

from sgrld_app.api import columns, finite, pyplot, save_figure
from sgrld_reproductions.funnel.runs import (
    DIM,
    GRAD_NOISE,
    MEAN,
    NECK,
    NECK_MASS,
    SETTINGS,
    SIGMA2,
    V_STD,
    funnel_target,
    run_metric,
)
from sgrld_reproductions.scaffolding import OnResult, Reproduction, Results, ignore, positive_int

FULL_SAMPLES = 2_000_000
QUICK_SAMPLES, QUICK_CHAINS = 20_000, 4
SCATTER_POINTS = 1_000
EXACT_POINTS = 20_000
XLIM, YLIM = (-5.0, 9.0), (-25.0, 25.0)
HIST_BINS = 60


def reproduce(
    num_samples: int,
    chains: int,
    seed: int,
    correction: str | None,
    *,
    progress: bool = False,
    on_result: OnResult = ignore,
) -> Results:
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
    results: Results = {
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
        results["metrics"][setting.name] = run_metric(
            jax.random.fold_in(key, i), setting, per_chain, chains, correction, progress=progress
        )
        on_result(results)
    return results


def table_rows(results: Results) -> list[dict[str, Any]]:
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


COLUMNS = columns(
    """
    metric          Metric    {}
    learning_rate   step      {:g}
    samples         samples   {:,}
    w1_v            W1(v)     {:.3f}
    ks_v            KS(v)     {:.3f}
    mean_v          mean v    {:+.3f}
    std_v           std v     {:.3f}
    neck            v<-10     {:.3f}
    drift_fallback  fallback  {:.2e}
    status          status    {}
    wall_s          wall [s]  {:.1f}
    steps_per_s     steps/s   {:,.0f}
    """
)
"""The printed table (``v<-10``: the neck, :data:`NECK`)."""


def caption(results: Results) -> str:
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


def plot(results: Results, out: Path) -> Path:
    """Draw Fig. 2 into ``out/funnel.png`` (random picks seeded by the run's seed); its path."""
    plt = pyplot()
    seed = results["config"]["seed"]
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
    return save_figure(fig, out / "funnel.png", dpi=120)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--samples",
        type=positive_int,
        default=None,
        help=f"samples per metric over all chains (default {FULL_SAMPLES:,} as in the paper, "
        f"{QUICK_SAMPLES:,} with --quick)",
    )
    parser.add_argument(
        "--chains",
        type=positive_int,
        default=None,
        help="vmapped chains per metric, each of samples/chains steps from (1, 1); default 1 (the "
        f"paper's single chain; {QUICK_CHAINS} with --quick). Several chains take less wall time "
        "(e.g. --chains 16), but each has a shorter run from the start",
    )
    parser.add_argument(
        "--correction",
        choices=("none", "hutchinson"),
        default="none",
        help="Γ correction term (default: %(default)s, as the paper's samplers)",
    )


def _budget(args: argparse.Namespace) -> tuple[int, int]:
    """``(samples per metric, chains)`` of the command line."""
    num_samples = args.samples or (QUICK_SAMPLES if args.quick else FULL_SAMPLES)
    return num_samples, args.chains or (QUICK_CHAINS if args.quick else 1)


def header(args: argparse.Namespace) -> str:
    num_samples, chains = _budget(args)
    return (
        f"Funnel (Yu et al. 2023, Fig. 2): {num_samples:,} samples per metric, {chains} chain(s), "
        f"correction {args.correction}, seed {args.seed}"
    )


def compute(args: argparse.Namespace, on_result: OnResult) -> Results:
    correction = None if args.correction == "none" else args.correction
    return reproduce(*_budget(args), args.seed, correction, progress=True, on_result=on_result)


def progress(results: Results) -> str:
    name, r = list(results["metrics"].items())[-1]
    return (
        f"{name}: W1(v) {r.scores.w1:.3f}, std v {r.scores.std:.3f}, {r.status()}, {r.wall_s:.1f} s"
    )


REPRODUCTION = Reproduction.from_module(
    globals(),
    summary="Yu et al. (2023) Fig. 2: the 2-D funnel in four metrics",
    quick_help=f"a small run (under a minute): {QUICK_SAMPLES:,} samples per metric in "
    f"{QUICK_CHAINS} chains",
    seed=1,
    rows_key="metrics",
)
