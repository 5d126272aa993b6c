"""The Γ correction in more than one dimension: every adaptive metric, with and without Γ.

``sgrld reproduce stationary-nd``.

What is shown: Rensmeyer & Niggemann prove in one dimension (Sec. 3) that SGRLD without its
correction term Γ samples ``p·D^{−1}`` instead of ``p`` (reproduced by ``stationary-1d``); here the
same comparison runs in several dimensions, for every metric of :mod:`sgrld.metrics`, on three
targets with exact gradients (:mod:`sgrld.targets`, num_data = 1 so ``lr`` is the step h):

* ``gaussian-2d``: the correlated Gaussian ``correlated_gaussian(dim=2, rho=0.9, condition=1)``,
  Σ = [[1, 0.9], [0.9, 1]], as two scalar leaves ``{"a": (1,), "b": (1,)}`` so that Wenzel's
  per-leaf scalar metric is not the identity (Shampoo's factors are then 1×1: G⁻¹ ≈ 1/|g_i|);
* ``gaussian-10d``: ``anisotropic_gaussian(dim=10, condition=10)``, variances 0.32 … 3.2, as two
  leaves of five (Shampoo: one full 5×5 factor per leaf);
* ``funnel``: ``funnel(dim=2, sigma2=4)`` (x | v ~ N(2, softplus(v)), v ~ N(0, 4)), one leaf,
  on which Wenzel's metric is the identity (not run).

Scores: the covariance error ``‖Ĉ − Σ‖_F / ‖Σ‖_F`` (Gaussians) and the Wasserstein-1 distance of
the samples of v to N(0, 4) (funnel, exact against the normal CDF,
:func:`sgrld.experiments.funnel.w1_to_normal`). The identity metric (SGLD, no Γ to drop) gives the
discretisation and Monte-Carlo floor of each target at its step size. The cost of the correction is
the time of one step of all chains with and without Γ, measured after sampling by timing the two in
alternation and keeping the fastest call of each (:func:`time_per_step`).

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
large bias (``benchmarks/wenzel_10d_budget.py`` measured the former setting: 128 chains gave
Wenzel a ratio of 2.1, with both errors near the floor).

Outputs, in ``--out``: ``stationary_nd.md`` / ``stationary_nd.json`` (the table also printed).
``--quick`` runs ``gaussian-2d`` only (unless ``--only`` names problems) with a tenth of the chains
and of the sampling span; its errors are then dominated by Monte-Carlo noise.
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
from jax.flatten_util import ravel_pytree

import sgrld
from sgrld import report
from sgrld.experiments.scores import w1_to_normal
from sgrld.report import console, finite, markdown_table, print_table

RATIO = 5.0
FUNNEL_SIGMA2 = 4.0
QUICK_FRACTION = 0.1
TIMING, QUICK_TIMING = (200, 8), (20, 3)  # (steps per timed call, rounds)
QUICK_PROBLEMS = ("gaussian-2d",)
ADAM = {"a": 1.0, "eps": 0.1, "decay": 0.9, "beta": 0.5}


class Problem(NamedTuple):
    """A target with its step size and budget.

    Attributes:
      key: short name.
      title: description for the table.
      target: the :class:`~sgrld.targets.Target`.
      learning_rate: lr of every sampler on it.
      chains: vmapped chains (full run).
      burn: burn-in steps.
      span: sampling steps per chain after the burn-in (full run).
      thin: steps between kept samples.
      fewer_chains: ``(metric name, chains)`` pairs for samplers that run with fewer chains
        than ``chains`` (full run), because a step of theirs costs far more.
    """

    key: str
    title: str
    target: sgrld.targets.Target
    learning_rate: float
    chains: int
    burn: int
    span: int
    thin: int
    fewer_chains: tuple[tuple[str, int], ...] = ()

    def chains_for(self, metric: str) -> int:
        """The chains of the full run for the sampler named ``metric``."""
        return dict(self.fewer_chains).get(metric, self.chains)

    @property
    def num_leaves(self) -> int:
        """Number of parameter leaves (Wenzel's metric is the identity on one)."""
        return len(jax.tree.leaves(self.target.init_params))

    @property
    def gaussian(self) -> bool:
        """Whether the target has a known covariance (scored by the covariance error)."""
        return self.target.cov is not None


def problems() -> tuple[Problem, ...]:
    """The three targets, in table order."""
    return (
        Problem(
            "gaussian-2d",
            "correlated 2-D Gaussian, rho 0.9, two scalar leaves",
            sgrld.targets.correlated_gaussian(
                dim=2, rho=0.9, condition=1.0, shape={"a": (1,), "b": (1,)}
            ),
            1e-3,
            chains=512,
            burn=10_000,
            span=20_000,
            thin=100,
        ),
        Problem(
            "gaussian-10d",
            "anisotropic 10-D Gaussian, variances 0.32-3.2, two leaves of 5",
            sgrld.targets.anisotropic_gaussian(
                dim=10, condition=10.0, shape={"a": (5,), "b": (5,)}
            ),
            1e-2,
            chains=4096,
            burn=5_000,
            span=20_000,
            thin=200,
            fewer_chains=(("Shampoo", 128),),
        ),
        Problem(
            "funnel",
            f"2-D funnel, v ~ N(0, {FUNNEL_SIGMA2:g}), one leaf",
            sgrld.targets.funnel(dim=2, sigma2=FUNNEL_SIGMA2),
            1e-3,
            chains=256,
            burn=20_000,
            span=40_000,
            thin=400,
        ),
    )


class MetricSpec(NamedTuple):
    """An adaptive metric (or Adam-SGLD) and its hyperparameters.

    Attributes:
      name: the table's name.
      settings: hyperparameters, for the JSON.
      make: ``(potential, lr, correction) -> Sampler``.
      correctable: whether a Γ-corrected version exists.
    """

    name: str
    settings: dict[str, Any]
    make: Callable[[Callable, float, str | None], sgrld.Sampler]
    correctable: bool = True


def _sgrld_spec(name: str, factory: Callable, **settings: Any) -> MetricSpec:
    def make(potential, lr, correction):
        return sgrld.sgrld(
            potential, factory(**settings), learning_rate=lr, num_data=1, correction=correction
        )

    return MetricSpec(name, settings, make, correctable=name != "Identity")


def metric_specs() -> tuple[MetricSpec, ...]:
    """The samplers of every row, in table order."""
    m = sgrld.metrics
    return (
        _sgrld_spec("Identity", m.identity),
        _sgrld_spec("RMSprop", m.rmsprop, decay=0.5, eps=0.1),
        _sgrld_spec("Wenzel", m.wenzel, decay=0.5, eps=1e-8, update_every=1),
        _sgrld_spec("Monge", m.monge, alpha2=1.0, decay=0.5),
        _sgrld_spec("Shampoo", m.shampoo, decay=0.5, eps=0.1, update_every=1),
        MetricSpec(
            "Adam-SGLD",
            ADAM,
            lambda potential, lr, correction: sgrld.adam_sgld(potential, lr, num_data=1, **ADAM),
            correctable=False,
        ),
    )


def covariance_error(flat: np.ndarray, cov: np.ndarray) -> float:
    """``‖Ĉ − Σ‖_F / ‖Σ‖_F`` of samples ``flat`` (``[n, D]``).

    Example:
      >>> x = np.random.default_rng(0).normal(size=(100_000, 2))
      >>> covariance_error(x, np.eye(2)) < 0.02
      True
    """
    c = np.cov(np.asarray(flat, np.float64), rowvar=False).reshape(cov.shape)
    return float(np.linalg.norm(c - cov) / np.linalg.norm(cov))


def time_per_step(
    key: jax.Array,
    runs: dict[str, tuple[sgrld.Sampler, Any]],
    batch_fn: Callable,
    steps: int,
    rounds: int,
) -> dict[str, float]:
    """Seconds per step of all chains, for several samplers timed in alternation.

    ``runs`` maps a name to ``(sampler, state)``, the state with a leading chain axis. For each,
    ``steps`` steps of the vmapped sampler run inside one jitted ``lax.scan`` (compiled first);
    then ``rounds`` rounds time one call of each in turn, and the fastest call of each counts, so
    that load from other processes on a shared machine affects both sides of a ratio alike.

    Returns:
      ``{name: seconds per step}``.
    """
    batch = batch_fn(key)

    def compiled(sampler, state):
        keys = jax.random.split(key, jax.tree.leaves(state)[0].shape[0])
        step = jax.vmap(sampler.step, in_axes=(0, 0, None))

        @jax.jit
        def advance(state):
            def body(s, t):
                s, _ = step(jax.vmap(lambda k: jax.random.fold_in(k, t))(keys), s, batch)
                return s, None

            return jax.lax.scan(body, state, jnp.arange(steps))[0]

        jax.block_until_ready(advance(state))
        return advance

    advance = {name: compiled(*run) for name, run in runs.items()}
    best = dict.fromkeys(runs, math.inf)
    for _ in range(rounds):
        for name, (_, state) in runs.items():
            start = time.perf_counter()
            jax.block_until_ready(advance[name](state))
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: t / steps for name, t in best.items()}


class RunResult(NamedTuple):
    """One sampler on one target.

    Attributes:
      error: covariance error (Gaussians) or W1 of v (funnel), on the chains that did not diverge.
      diverged: chains that produced a NaN/inf (dropped).
      samples: samples scored.
      wall_s: wall time of the sampling, compilation included.
      state: the final sampler state of every chain.
      step_s: seconds per step of all chains (:func:`time_per_step`), NaN until timed.
    """

    error: float
    diverged: int
    samples: int
    wall_s: float
    state: Any
    step_s: float = math.nan


def exact_gradient(target: sgrld.targets.Target) -> Callable[[jax.Array], Any]:
    """``key -> batch`` of zero gradient noise (exact gradients, no random draw per step)."""
    zeros = jax.tree.map(jnp.zeros_like, target.init_params)
    return lambda key: zeros


def run_sampler(
    key: jax.Array,
    problem: Problem,
    sampler: sgrld.Sampler,
    chains: int,
    span: int,
    *,
    progress: bool = False,
) -> RunResult:
    """Sample ``problem`` with ``sampler`` from its start point and score the samples."""
    target = problem.target
    batch_fn = exact_gradient(target)
    start = time.perf_counter()
    try:
        out = sgrld.sample(
            key,
            sampler,
            target.init_params,
            batch_fn,
            num_samples=span // problem.thin,
            thin=problem.thin,
            burn_in=problem.burn,
            num_chains=chains,
            progress=progress,
        )
    except sgrld.DivergenceError as error:
        out = error.samples
    flat = jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(out.params)
    flat = np.asarray(jax.block_until_ready(flat), np.float64)
    wall = time.perf_counter() - start
    ok = np.asarray(out.diverged_at) < 0
    flat = flat[ok].reshape(-1, flat.shape[-1])
    if flat.shape[0] < 2:
        error = math.nan
    elif problem.gaussian:
        error = covariance_error(flat, target.cov)
    else:
        error = w1_to_normal(flat[:, -1], math.sqrt(FUNNEL_SIGMA2))
    return RunResult(error, int((~ok).sum()), int(flat.shape[0]), wall, out.state)


def reproduce(
    seed: int,
    *,
    quick: bool = False,
    only: tuple[str, ...] | None = None,
    metrics: tuple[str, ...] | None = None,
    progress: bool = False,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run every metric with and without Γ on the chosen problems.

    Args:
      seed: random seed (mode k of sampler j on problem i samples with
        ``fold_in(fold_in(fold_in(key(seed), i), j), k)``).
      quick: a tenth of the chains (at least 16) and of the sampling span, fewer timing steps.
      only: keys of the problems to run (default: all; with ``quick``, ``QUICK_PROBLEMS``).
      metrics: names of the samplers to run (default: all).
      progress: show progress bars.
      on_result: called with the results so far after each metric.

    Returns:
      ``{"config": {...}, "rows": [dict, ...]}`` with one row per problem and metric; a row's
      ``runs`` maps ``"none"`` / ``"hutchinson"`` to a :class:`RunResult`.
    """
    chosen, specs = problems(), metric_specs()
    for asked, known, what in (
        (only, [p.key for p in chosen], "problems"),
        (metrics, [m.name for m in specs], "metrics"),
    ):
        unknown = set(asked or ()) - set(known)
        if unknown:
            raise ValueError(f"unknown {what} {sorted(unknown)}; choose from {known}")
    results: dict[str, Any] = {
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
        results["config"]["problems"][problem.key] = {
            "title": problem.title,
            "learning_rate": problem.learning_rate,
            "chains": _chains(problem.chains, quick),
            "fewer_chains": {m: _chains(n, quick) for m, n in problem.fewer_chains},
            "burn_in": problem.burn,
            "span": span,
            "thin": problem.thin,
            "start": "the target's init_params (the mean; (1, 1) for the funnel)",
        }
        for j, spec in enumerate(specs):
            if metrics and spec.name not in metrics:
                continue
            row = {"problem": problem, "spec": spec, "runs": {}}
            if spec.name == "Wenzel" and problem.num_leaves == 1:
                row["skipped"] = "≡ identity on a one-leaf target: not run"
                results["rows"].append(row)
                continue
            chains = _chains(problem.chains_for(spec.name), quick)
            modes = (None, "hutchinson") if spec.correctable else (None,)
            samplers = {}
            spec_key = jax.random.fold_in(jax.random.fold_in(key, i), j)
            for k, mode in enumerate(modes):
                samplers[mode or "none"] = spec.make(
                    problem.target.potential, problem.learning_rate, mode
                )
                row["runs"][mode or "none"] = run_sampler(
                    jax.random.fold_in(spec_key, k),
                    problem,
                    samplers[mode or "none"],
                    chains,
                    span,
                    progress=progress,
                )
            timings = time_per_step(
                jax.random.fold_in(spec_key, len(modes)),
                {name: (samplers[name], r.state) for name, r in row["runs"].items()},
                exact_gradient(problem.target),
                *(QUICK_TIMING if quick else TIMING),
            )
            row["runs"] = {n: r._replace(step_s=timings[n]) for n, r in row["runs"].items()}
            results["rows"].append(row)
            if on_result is not None:
                on_result(results)
    return results


def _chains(full: int, quick: bool) -> int:
    """Chains of a run: ``full``, or a tenth of it (at least 16) with ``quick``."""
    return max(16, full // 10) if quick else full


def table_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
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


COLUMNS = (
    ("problem", "problem", "{}"),
    ("metric", "metric", "{}"),
    ("learning_rate", "lr", "{:g}"),
    ("samples", "samples", "{:,}"),
    ("error_none", "error, no Γ", "{:.3g}"),
    ("error_gamma", "error, Γ", "{:.3g}"),
    ("ratio", "ratio", "{:.3g}"),
    ("requirement", "requirement (issue 3)", "{}"),
    ("us_per_step_none", "µs/step, no Γ", "{:,.0f}"),
    ("us_per_step_gamma", "µs/step, Γ", "{:,.0f}"),
    ("gamma_cost", "Γ cost", "{:.2f}×"),
    ("diverged", "diverged", "{}"),
    ("wall_s", "wall [s]", "{:.1f}"),
)

NOTES = (
    "error: ‖Ĉ − Σ‖_F/‖Σ‖_F for the Gaussians, W1 of the samples of v to N(0, "
    f"{FUNNEL_SIGMA2:g}) for the funnel; the Identity row (SGLD) is the discretisation and "
    "Monte-Carlo floor at that step size. ratio: error without Γ / error with Γ "
    f"(requirement ≥ {RATIO:g} on the Gaussians). µs/step: one step of all chains (vmapped), "
    "the fastest of several timed calls, with and without Γ in turn, compilation excluded; "
    "Γ cost: their ratio "
    "(one forward-over-reverse pass and one Rademacher probe per step). diverged: chains with a "
    "NaN/inf (without Γ / with Γ), dropped from the scores. wall: sampling with and without Γ, "
    "compilation included."
)


def caption(results: dict[str, Any]) -> str:
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


def markdown(results: dict[str, Any]) -> str:
    """The table as markdown, with its caption and notes."""
    return markdown_table(caption(results), COLUMNS, table_rows(results), NOTES)


def write_tables(results: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``stationary_nd.md`` and ``stationary_nd.json`` into ``out``; return their paths."""
    payload = {"config": results["config"], "rows": table_rows(results)}
    return report.write_tables(out, "stationary_nd", markdown(results), payload)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add this reproduction's options to ``parser``."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small run for CI: a tenth of the chains and of the sampling span, on "
        f"{', '.join(QUICK_PROBLEMS)} unless --only is given",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="PROBLEM",
        help=f"run only these problems: {', '.join(p.key for p in problems())}",
    )
    parser.add_argument(
        "--metrics",
        nargs="+",
        default=None,
        metavar="METRIC",
        help=f"run only these samplers: {', '.join(m.name for m in metric_specs())}",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    parser.add_argument(
        "--out", default="results/stationary-nd", help="results folder (default: %(default)s)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the comparison from parsed arguments: sample, print, write the files. Returns 0."""
    out = Path(args.out)
    con = console()

    def progress_line(results: dict[str, Any]) -> None:
        row = results["rows"][-1]
        errors = ", ".join(f"{mode} {r.error:.3f}" for mode, r in row["runs"].items())
        con.print(f"{row['problem'].key} / {row['spec'].name}: error {errors}")
        write_tables(results, out)

    con.print(f"SGRLD with and without Γ: seed {args.seed}{', quick' if args.quick else ''}")
    results = reproduce(
        args.seed,
        quick=args.quick,
        only=tuple(args.only) if args.only else None,
        metrics=tuple(args.metrics) if args.metrics else None,
        progress=not args.quick,
        on_result=progress_line,
    )
    md, js = write_tables(results, out)
    print_table(caption(results), COLUMNS, table_rows(results))
    con.print(f"Wrote {md} and {js}")
    return 0
