"""The Γ correction in more than one dimension: every adaptive metric, with and without Γ.

``sgrld reproduce stationary-nd``.

What is shown: Rensmeyer & Niggemann prove in one dimension (Sec. 3) that SGRLD without its
correction term Γ samples ``p·D^{−1}`` instead of ``p`` (reproduced by ``stationary-1d``); here the
same comparison runs in several dimensions, for every metric of :mod:`sgrld.metrics`, on three
targets with exact gradients (:mod:`sgrld.samples.targets`, num_data = 1 so ``lr`` is the step h):

* ``gaussian-2d``: the correlated Gaussian ``correlated_gaussian(dim=2, rho=0.9, condition=1)``,
  Σ = [[1, 0.9], [0.9, 1]], as two scalar leaves ``{"a": (1,), "b": (1,)}`` so that Wenzel's
  per-leaf scalar metric is not the identity (Shampoo's factors are then 1×1: G⁻¹ ≈ 1/|g_i|);
* ``gaussian-10d``: ``anisotropic_gaussian(dim=10, condition=10)``, variances 0.32 … 3.2, as two
  leaves of five (Shampoo: one full 5×5 factor per leaf);
* ``funnel``: ``funnel(dim=2, sigma2=4)`` (x | v ~ N(2, softplus(v)), v ~ N(0, 4)), one leaf,
  on which Wenzel's metric is the identity (not run).

Scores: the covariance error ``‖Ĉ − Σ‖_F / ‖Σ‖_F`` (Gaussians) and the Wasserstein-1 distance of
the samples of v to N(0, 4) (funnel, exact against the normal CDF,
:func:`sgrld.samples.distances.w1_to_normal`). The identity metric (SGLD, no Γ to drop) gives the
discretisation and Monte-Carlo floor of each target at its step size. The cost of the correction is
the time of one step of all chains with and without Γ, measured after sampling by timing the two in
alternation and keeping the fastest call of each
(:func:`~sgrld_reproductions.stationary_nd.runs.time_per_step`). The problems, the samplers and the
run of one: :mod:`sgrld_reproductions.stationary_nd.runs`.

Metrics (the same for every target; step sizes per target, the same with and without Γ):

=========  ==================================================================================
Identity   SGLD
RMSprop    ``rmsprop(decay=0.5, eps=0.1)``
Wenzel     ``wenzel(decay=0.5, eps=1e-8, update_every=1)``
Monge      ``monge(alpha2=1, decay=0.5)``
Shampoo    ``shampoo(decay=0.5, eps=0.1, update_every=1)``
Adam-SGLD  ``adam_sgld(a=1, eps=0.1, decay=0.9, beta=0.5)``, no Γ exists (Rensmeyer Sec. 3.2)
=========  ==================================================================================

The decay 0.5 (a two-step memory) is deliberate. Γ is the derivative of the limiting metric, so the
corrected sampler is exact only when the moving average tracks the metric; with decay 0.9 the
metrics that are singular where a gradient coordinate vanishes (RMSprop, Shampoo) lag behind it
there, and the corrected chain is under-dispersed: on ``gaussian-2d`` the corrected RMSprop
(eps 0.1, decay 0.9) had a covariance error of 0.59 at lr 1e-3, 0.54 at 2.5e-4 and 0.42 at 6e-5
(exploratory runs of 256–512 chains), against 0.06 with decay 0.5 at lr 1e-3. Decay 0 (no average)
fails the other way: Euler steps overshoot near the singular set and chains diverge.

Shampoo's eps is relative (ridge ``eps·λ_max(H)``), and Γ includes the ridge's own derivative
(before it did, Γ of a 1×1 factor was ``1/(1 + eps)`` of the correct value, and the corrected
error on ``gaussian-2d`` at eps 0.1 was 0.43 in an exploratory run; with it, 0.31 in the full run).
On ``gaussian-2d`` Shampoo's factors are 1×1 (G⁻¹ ≈ 1/|g_i|, singular where a gradient coordinate
vanishes), the hardest case for a lagging average. On ``gaussian-10d`` (5×5 factors) the corrected
error grows with the step (0.067 at lr 0.002, near that run's floor of 0.053; 0.13 at lr 0.01,
against 2.1 without Γ): Shampoo's steps are largest where the gradients are small, so its
discretisation error is larger than the other metrics'. eps 0.1 is used throughout.

Requirement (issue 3): on the Gaussians, the corrected sampler's covariance error is at least 5×
smaller than the uncorrected one's at the same step size; the table gives the ratio per metric and
whether it holds. The budget of ``gaussian-10d`` is set by Wenzel, whose bias there is small (its
metric is a per-leaf mean of five g², which barely varies): dropping Γ costs a covariance error of
≈ 0.045, so the Monte-Carlo floor must lie well below 0.01 for the ratio to show. Hence lr 0.01
(the slowest coordinate, variance 3.2, relaxes in ≈ 320 steps, so samples 200 steps apart are
nearly independent; at the former lr 0.002 it took ≈ 1,600) and 4,096 chains, except Shampoo,
whose step (two batched 5×5 eigendecompositions per chain) keeps it at 128 chains, enough for its
large bias (the former ``benchmarks/wenzel_10d_budget.py``, now in git history, measured the former
setting: 128 chains gave Wenzel a ratio of 2.1, with both errors near the floor).

Outputs, in ``--out``: ``stationary_nd.md`` / ``stationary_nd.json`` (the table also printed).
``--quick`` runs ``gaussian-2d`` only (unless ``--only`` names problems) with a tenth of the
sampling span and every chain. The chains are vmapped, so they cost little, and they carry the
Monte-Carlo precision: the slow direction of ``gaussian-2d`` relaxes in ≈ 2,000 steps, so a quick
chain gives about one independent draw, and with a tenth of the chains as well (51) the corrected
RMSprop's error was noise of 0.15–0.33, and its ratio fell below 5 on 2 of 10 seeds.
"""

from __future__ import annotations

import argparse
from typing import Any

import jax

from sgrld_app.api import columns, finite
from sgrld_reproductions.scaffolding import OnResult, Reproduction, Results, ignore, subset_option
from sgrld_reproductions.stationary_nd.runs import (
    FUNNEL_SIGMA2,
    MetricSpec,
    Problem,
    exact_gradient,
    metric_specs,
    problems,
    run_sampler,
    time_per_step,
)

RATIO = 5.0
QUICK_FRACTION = 0.1
TIMING, QUICK_TIMING = (200, 8), (20, 3)  # (steps per timed call, rounds)
QUICK_PROBLEMS = ("gaussian-2d",)


def reproduce(
    seed: int,
    *,
    quick: bool = False,
    only: tuple[str, ...] | None = None,
    metrics: tuple[str, ...] | None = None,
    progress: bool = False,
    on_result: OnResult = ignore,
) -> Results:
    """Run every metric with and without Γ on the chosen problems.

    Args:
      seed: random seed (mode k of sampler j on problem i samples with
        ``fold_in(fold_in(fold_in(key(seed), i), j), k)``).
      quick: a tenth of the sampling span (every chain), fewer timing steps.
      only: keys of the problems to run (default: all; with ``quick``, ``QUICK_PROBLEMS``).
      metrics: names of the samplers to run (default: all).
      progress: show progress bars.
      on_result: called with the results so far after each metric.

    Returns:
      ``{"config": {...}, "rows": [dict, ...]}`` with one row per problem and metric; a row's
      ``runs`` maps ``"none"`` / ``"hutchinson"`` to a
      :class:`~sgrld_reproductions.stationary_nd.runs.RunResult`.
    """
    chosen, specs = problems(), metric_specs()
    _check_names(only, [p.key for p in chosen], "problems")
    _check_names(metrics, [m.name for m in specs], "metrics")
    results: Results = {
        "config": {
            "seed": seed,
            "quick": quick,
            "error": "‖Ĉ − Σ‖_F/‖Σ‖_F (Gaussians); W1(v, N(0, sigma2)) (funnel)",
            "requirement": f"Gaussians: error without Γ / error with Γ ≥ {RATIO:g}",
            "timing": "fastest of several jitted scans of all chains, with and without Γ in turn",
            "backend": jax.default_backend(),
            "problems": {},
        },
        "rows": [],
    }
    only = only or (QUICK_PROBLEMS if quick else None)
    key = jax.random.key(seed)
    for i, problem in enumerate(chosen):
        if only and problem.key not in only:
            continue
        span = problem.thin * max(1, round(QUICK_FRACTION * problem.span / problem.thin))
        span = span if quick else problem.span
        results["config"]["problems"][problem.key] = _problem_config(problem, span)
        for j, spec in enumerate(specs):
            if metrics and spec.name not in metrics:
                continue
            spec_key = jax.random.fold_in(jax.random.fold_in(key, i), j)
            row = _row(spec_key, problem, spec, span, quick=quick, progress=progress)
            results["rows"].append(row)
            if "skipped" not in row:
                on_result(results)
    return results


def _check_names(asked: tuple[str, ...] | None, known: list[str], what: str) -> None:
    unknown = set(asked or ()) - set(known)
    if unknown:
        raise ValueError(f"unknown {what} {sorted(unknown)}; choose from {known}")


def _problem_config(problem: Problem, span: int) -> dict[str, Any]:
    """What the JSON records of a problem's run."""
    return {
        "title": problem.title,
        "learning_rate": problem.learning_rate,
        "chains": problem.chains,
        "fewer_chains": dict(problem.fewer_chains),
        "burn_in": problem.burn,
        "span": span,
        "thin": problem.thin,
        "start": "the target's init_params (the mean; (1, 1) for the funnel)",
    }


def _row(
    key: jax.Array, problem: Problem, spec: MetricSpec, span: int, *, quick: bool, progress: bool
) -> dict[str, Any]:
    """One sampler on one problem, without Γ (run 0) and with it (run 1), then timed."""
    row: dict[str, Any] = {"problem": problem, "spec": spec, "runs": {}}
    if spec.name == "Wenzel" and problem.num_leaves == 1:
        return row | {"skipped": "≡ identity on a one-leaf target: not run"}
    chains = problem.chains_for(spec.name)
    modes = (None, "hutchinson") if spec.correctable else (None,)
    samplers = {}
    for k, mode in enumerate(modes):
        name = mode or "none"
        samplers[name] = spec.make(problem.target.potential, problem.learning_rate, mode)
        row["runs"][name] = run_sampler(
            jax.random.fold_in(key, k), problem, samplers[name], chains, span, progress=progress
        )
    timings = time_per_step(
        jax.random.fold_in(key, len(modes)),
        {name: (samplers[name], r.state) for name, r in row["runs"].items()},
        exact_gradient(problem.target),
        *(QUICK_TIMING if quick else TIMING),
    )
    row["runs"] = {n: r._replace(step_s=timings[n]) for n, r in row["runs"].items()}
    return row


def table_rows(results: Results) -> list[dict[str, Any]]:
    """One JSON-ready dict per problem and metric."""
    out = []
    for row in results["rows"]:
        problem, spec, runs = row["problem"], row["spec"], row["runs"]
        plain, fixed = runs.get("none"), runs.get("hutchinson")
        ratio = None
        if plain is not None and fixed is not None and fixed.error > 0:
            ratio = finite(plain.error / fixed.error)
        holds = None
        if "skipped" in row:
            requirement = row["skipped"]
        elif spec.name == "Identity":
            requirement = "floor (no Γ to drop)"
        elif not spec.correctable:
            requirement = "no Γ exists"
        elif not problem.gaussian:
            requirement = "none on the funnel"
        else:
            holds = ratio is not None and ratio >= RATIO
            requirement = f"ratio ≥ {RATIO:g} {'✓' if holds else '✗'}"
        cost = None
        if plain is not None and fixed is not None:
            cost = fixed.step_s / plain.step_s
        out.append(
            {
                "problem": problem.key,
                "metric": spec.name,
                "settings": spec.settings,
                "learning_rate": problem.learning_rate,
                "score": "cov_error" if problem.gaussian else "w1_v",
                "error_none": finite(plain.error) if plain else None,
                "error_gamma": finite(fixed.error) if fixed else None,
                "ratio": ratio,
                "requirement": requirement,
                "holds": holds,
                "us_per_step_none": plain.step_s * 1e6 if plain else None,
                "us_per_step_gamma": fixed.step_s * 1e6 if fixed else None,
                "gamma_cost": cost,
                "diverged": "/".join(str(r.diverged) for r in runs.values()) or None,
                "samples": plain.samples if plain else None,
                "wall_s": sum(r.wall_s for r in runs.values()) if runs else None,
            }
        )
    return out


COLUMNS = columns(
    """
    problem            problem                {}
    metric             metric                 {}
    learning_rate      lr                     {:g}
    samples            samples                {:,}
    error_none         error, no Γ            {:.3g}
    error_gamma        error, Γ               {:.3g}
    ratio              ratio                  {:.3g}
    requirement        requirement (issue 3)  {}
    us_per_step_none   µs/step, no Γ          {:,.0f}
    us_per_step_gamma  µs/step, Γ             {:,.0f}
    gamma_cost         Γ cost                 {:.2f}×
    diverged           diverged               {}
    wall_s             wall [s]               {:.1f}
    """
)


def caption(results: Results) -> str:
    """One line describing the run."""
    c = results["config"]

    def chains(p):
        fewer = ", ".join(f"{m} {n:,}" for m, n in p.get("fewer_chains", {}).items())
        return f"{p['chains']:,} chains" + (f" ({fewer})" if fewer else "")

    parts = [
        f"{k}: lr {p['learning_rate']:g}, {chains(p)} × {p['span'] // p['thin']} samples"
        for k, p in c["problems"].items()
    ]
    return (
        f"SGRLD with and without Γ in several dimensions{' (quick)' if c['quick'] else ''}, "
        f"seed {c['seed']}. " + "; ".join(parts) + "."
    )


NOTES = (
    "error: ‖Ĉ − Σ‖_F/‖Σ‖_F for the Gaussians, W1 of the samples of v to N(0, "
    f"{FUNNEL_SIGMA2:g}) for the funnel; the Identity row (SGLD) is the discretisation and "
    "Monte-Carlo floor at that step size. ratio: error without Γ / error with Γ "
    f"(requirement ≥ {RATIO:g} on the Gaussians). µs/step: one step of all chains (vmapped), "
    "the fastest of several timed calls, with and without Γ in turn, compilation excluded; "
    "Γ cost: their ratio (one forward-over-reverse pass and one Rademacher probe per step). "
    "diverged: chains with a "
    "NaN/inf (without Γ / with Γ), dropped from the scores. wall: sampling with and without Γ, "
    "compilation included."
)


def options(parser: argparse.ArgumentParser) -> None:
    subset_option(parser, "--only", "PROBLEM", "problems", [p.key for p in problems()])
    subset_option(parser, "--metrics", "METRIC", "samplers", [m.name for m in metric_specs()])


def header(args: argparse.Namespace) -> str:
    return f"SGRLD with and without Γ: seed {args.seed}{', quick' if args.quick else ''}"


def compute(args: argparse.Namespace, on_result: OnResult) -> Results:
    return reproduce(
        args.seed,
        quick=args.quick,
        only=tuple(args.only) if args.only else None,
        metrics=tuple(args.metrics) if args.metrics else None,
        progress=not args.quick,
        on_result=on_result,
    )


def progress(results: Results) -> str:
    row = results["rows"][-1]
    errors = ", ".join(f"{mode} {r.error:.3f}" for mode, r in row["runs"].items())
    return f"{row['problem'].key} / {row['spec'].name}: error {errors}"


REPRODUCTION = Reproduction.from_module(
    globals(),
    summary="Covariance error of adaptive samplers with and without Γ on n-D Gaussians "
    "and the funnel",
    quick_help="a small run for CI: every chain for a tenth of the sampling span, on "
    f"{', '.join(QUICK_PROBLEMS)} unless --only is given",
)
