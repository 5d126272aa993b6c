"""Have the chains mixed? Split R-hat and bulk/tail ESS (ArviZ) of a few traces of a run.

The traces (:func:`traces`) are the potential (``sample_stats.potential``, Û(θ)/N on each draw's
minibatch), each draw's own mean log-likelihood on the evaluation sets when the run stored it
(``sample_stats.test_log_likelihood``, ...: a results folder) and a fixed random subset of
scalar parameters (one coordinate of one leaf each, chosen with ``numpy.random.default_rng(seed)``
among all coordinates, so the same run and seed always give the same ones). :func:`convergence`
gives each trace's rank-normalised split R-hat (Vehtari et al. 2021) and its bulk and tail
effective sample sizes, computed by ``arviz_stats``.
An R-hat above 1.01 says the chains have not mixed (Vehtari et al.'s threshold).

References:
    Vehtari, Gelman, Simpson, Carpenter, Bürkner (2021), Rank-normalization, folding, and
    localization: an improved R-hat for assessing convergence of MCMC, Bayesian Analysis 16(2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np

from sgrld.chains.sampling import Samples
from sgrld.samples.arviz_export import run_guarantee, to_arviz
from sgrld.samples.results import ResultsError, RunSamples, load_samples


def guarantee_line(folder: str | Path) -> str:
    """``sgrld diagnose``'s line on what the run guarantees (its ``summary.json``)."""
    about = run_guarantee(folder)
    return f"guarantee: {about or 'not recorded (a run older than this field)'}"


def traces(source: Any, *, num_params: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    """The potential, the per-draw log-likelihoods (``*_log_likelihood``) and ``num_params``
    random scalar parameters, each ``[chains, draws]``.

    Args:
        source: what :func:`sgrld.to_arviz` takes (:func:`sgrld.sample`'s output or a results
            folder).
        num_params: how many scalar parameters (all of them if there are fewer).
        seed: seed of their choice.

    Returns:
        Trace name -> values; a parameter is named ``LEAF[i, j]`` (``LEAF`` for a scalar leaf).
    """
    tree = to_arviz(source)
    out = {}
    if "potential" in tree.sample_stats:
        out["potential"] = tree.sample_stats["potential"].values
    for name, var in tree.sample_stats.data_vars.items():
        if name.endswith("_log_likelihood"):
            out[name] = var.values
    arrays = {name: var.values for name, var in tree.posterior.data_vars.items()}
    sizes = np.array([x[0, 0].size for x in arrays.values()])
    total = int(sizes.sum())
    picks = np.sort(np.random.default_rng(seed).choice(total, min(num_params, total), False))
    bounds = np.cumsum(sizes)
    for flat in picks:
        leaf = int(np.searchsorted(bounds, flat, side="right"))
        name, x = list(arrays.items())[leaf]
        index = np.unravel_index(flat - (bounds[leaf] - sizes[leaf]), x.shape[2:])
        label = f"{name}[{', '.join(str(int(i)) for i in index)}]" if index else name
        out[label] = x[(slice(None), slice(None), *index)]
    return out


def pooled_draws(source: Samples | RunSamples | str | Path) -> Any:
    """The valid draws of all chains stacked into one sample, leaves ``[n, ...]`` (chain-major).

    The input of :func:`sgrld.samples.stein.ksd`. Draws that are no samples are left out: a results
    folder's draws that are not ``valid``, and :func:`sgrld.sample`'s draws from the first kept
    step whose update was not finite on.

    Args:
        source: the output of :func:`sgrld.sample`, a results folder of a run with
            ``run.save_samples = true``, or :func:`sgrld.load_samples` of one.

    Returns:
        The parameter pytree with leaves ``[n, ...]`` (numpy).

    Example:
        >>> valid = np.array([[True, True, True], [True, False, False]])  # chain 1 diverged
        >>> run = RunSamples(np.arange(3), valid, np.arange(6.0).reshape(2, 3), {}, ["w"])
        >>> pooled_draws(run).tolist()
        [0.0, 1.0, 2.0, 3.0]
    """
    if isinstance(source, str | Path):
        source = load_samples(source)
    if isinstance(source, RunSamples):
        params, valid = source.params, source.valid
    else:
        params, finite = source.params, np.asarray(source.info.is_finite)
        if np.ndim(source.diverged_at) == 0:  # one chain: no chain axis
            params, finite = jax.tree.map(lambda x: np.asarray(x)[None], params), finite[None]
        valid = ~np.logical_or.accumulate(~finite, axis=1)
    return jax.tree.map(lambda x: np.asarray(x)[valid], params)


MIN_DRAWS = 4
"""Split R-hat and ESS need at least this many draws in each chain."""


def valid_part(run: RunSamples) -> tuple[RunSamples, str | None]:
    """The draws of ``run`` that are samples, as a rectangle of chains x draws for R-hat and ESS,
    and a line saying what was left out (``None``: nothing).

    A diverged chain's draws after its divergence are copies of its last finite state, not
    samples. The chains that never diverged are kept whole when there are any; if every chain
    diverged, the draws before the first divergence.

    Raises:
        ResultsError: fewer than :data:`MIN_DRAWS` valid draws are left in every chain.

    Example:
        >>> valid = np.array([[True, True, True, True], [True, True, False, False]])
        >>> run = RunSamples(np.arange(4), valid, np.zeros((2, 4)), {}, ["w"])
        >>> kept, note = valid_part(run)
        >>> kept.params.shape, note
        ((1, 4), 'chain 1 diverged after draw 2 of 4: diagnosed the 1 chain(s) that did not')
    """
    valid = np.asarray(run.valid, bool)
    if valid.all():
        return run, None
    whole = valid.all(axis=1)
    lengths = np.argmin(np.c_[valid, np.zeros(len(valid), bool)], axis=1)
    gone = ", ".join(
        f"chain {c} diverged after draw {n} of {valid.shape[1]}"
        for c, n in enumerate(lengths)
        if not whole[c]
    )
    if whole.any():
        take = lambda x: np.asarray(x)[whole]
        note = f"{gone}: diagnosed the {int(whole.sum())} chain(s) that did not"
    else:
        first = int(lengths.min())
        if first < MIN_DRAWS:
            raise ResultsError(
                f"{gone}: every chain diverged, the first after {first} draw(s), too few to "
                f"diagnose (R-hat and ESS need {MIN_DRAWS})"
            )
        take = lambda x: np.asarray(x)[:, :first]
        note = f"{gone}: every chain diverged; diagnosed the first {first} draws of each"
    params = jax.tree.map(take, run.params)
    stats = {name: take(x) for name, x in run.stats.items()}
    step = run.step if whole.any() else np.asarray(run.step)[: int(lengths.min())]
    return RunSamples(step, take(valid), params, stats, run.names), note


def convergence(series: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Split R-hat and bulk/tail ESS of each trace ``[chains, draws]`` (``arviz_stats``).

    Returns:
        One row per trace: ``{"trace", "r_hat", "ess_bulk", "ess_tail"}``.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> mixed = rng.normal(size=(4, 500))
        >>> apart = rng.normal(size=(4, 500)) + np.arange(4)[:, None]  # chains 1 sd apart
        >>> [round(r["r_hat"], 2) for r in convergence({"mixed": mixed, "apart": apart})]
        [1.0, 1.56]
    """
    import arviz_base
    import arviz_stats

    data = arviz_base.dict_to_dataset(series)
    r_hat = arviz_stats.rhat(data)
    bulk, tail = (arviz_stats.ess(data, method=m) for m in ("bulk", "tail"))
    return [
        {
            "trace": name,
            "r_hat": float(r_hat[name]),
            "ess_bulk": float(bulk[name]),
            "ess_tail": float(tail[name]),
        }
        for name in series
    ]


def mixing_verdict(rows: list[dict[str, Any]], chains: int) -> str:
    """``sgrld diagnose``'s verdict on the split R-hat of :func:`convergence`'s rows for a run of
    ``chains`` chains (Vehtari et al.'s threshold 1.01). One chain has none: it cannot show that
    chains have not mixed; a constant trace has none either.

    Example:
        >>> rows = [{"trace": "potential", "r_hat": 1.2}, {"trace": "w", "r_hat": 1.0}]
        >>> mixing_verdict(rows, 4)
        'split R-hat above 1.01 for 1 of 2 traces (potential): the chains have not mixed'
        >>> mixing_verdict([{"trace": "potential", "r_hat": float("nan")}], 1)[:44]
        'split R-hat needs at least 2 chains: not run'
    """
    if chains < 2:
        return (
            "split R-hat needs at least 2 chains: not run; sample 4 chains or more "
            "(run.chains) to see whether they mix"
        )
    computed = [r for r in rows if np.isfinite(r["r_hat"])]
    if not computed:
        return "split R-hat could not be computed for any trace (constant or too short traces)"
    high = [r["trace"] for r in computed if r["r_hat"] > 1.01]
    n = f"{len(computed)} trace{'s' * (len(computed) > 1)}"
    if high:
        names = ", ".join(high[:3]) + (", ..." if len(high) > 3 else "")
        return f"split R-hat above 1.01 for {len(high)} of {n} ({names}): the chains have not mixed"
    return f"split R-hat at most 1.01 for all {n}: no sign of unmixed chains"
