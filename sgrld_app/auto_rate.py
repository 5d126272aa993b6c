"""``sampler.learning_rate = "auto"`` in a run: the rate chosen before the run, kept on resume.

The runner's epochs walk permutations of the training set, so the search runs before them, on
minibatches drawn with replacement, from the chains' own starting points (:func:`search_rate`:
on the validation log-likelihood where the data set has a validation split, else by the Stein
virial); the run then starts from those points at the chosen rate and keeps its whole burn-in. The
choice is stored in the run's ``meta`` (``summary.json``, checkpoints), so ``--resume`` reads it
back instead of searching again, and a run with the same seed makes the same choice.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.chains import devices
from sgrld.chains.rate_grid import candidate_rates, stability_rate
from sgrld.chains.rate_halving import halve_learning_rate
from sgrld.chains.sampling import minibatch_fn
from sgrld.chains.step_size import (
    MIN_PILOT_STEPS,
    PILOT_KEY,
    RateChoice,
    choose_learning_rate,
    pilot_steps_of,
)
from sgrld.samplers.guarantee import warn_if_minibatch_noise_dominates
from sgrld.samples.results import ResultsError
from sgrld_app import scoring
from sgrld_app.config import ConfigError
from sgrld_app.experiment import Experiment, RunPlan

META_KEY = "learning_rate_search"
"""The key of the choice in a run's ``meta``."""


def saved_choice(saved: Any) -> RateChoice | None:
    """The choice stored in a checkpoint's ``meta`` (``None``: none there)."""
    if saved is None:
        return None
    stored = saved.info.get("meta", {}).get(META_KEY)
    return None if stored is None else stored_choices(stored, False)[0]


def stored_choices(stored: Any, many: bool) -> list[RateChoice]:
    """The choices of ``meta.learning_rate_search`` as a checkpoint stores them: one
    (``many=False``) or a sweep's list.

    Raises:
      ResultsError: they are not stored choices (a hand-edited or corrupt checkpoint), in one
        line.
    """
    try:
        if many and not isinstance(stored, list):
            raise ValueError(f"a {type(stored).__name__}, not a list of choices")
        return [RateChoice.from_dict(d) for d in (stored if many else [stored])]
    except ValueError as err:
        raise ResultsError(
            f"the checkpoint's meta.{META_KEY} cannot be read ({err}); resume from another "
            "checkpoint or start the run again"
        ) from None


def validation_score(experiment: Experiment) -> Callable[[Any], np.ndarray] | None:
    """``params [K, M, ...] -> [K, n]``: the log-likelihood of each of the n validation points
    under the ensemble of each rate's M states (their predictive averaged), as the run scores its
    samples; ``None`` without a validation set."""
    val = experiment.eval_sets.get("val")
    if val is None or len(val[0]) == 0:
        return None
    x, y = jnp.asarray(val[0]), jnp.asarray(val[1])
    kind = experiment.kind
    ensemble = scoring.ensemble_ops(kind, int(y.max()) + 1 if kind == "classification" else None)
    predict = scoring.per_point(kind, experiment.predict_fn)

    def one_rate(params, x, y):
        def fold(ens, p):
            return ensemble.update(ens, scoring.chunked(partial(predict, p), x, 2048), y), None

        ens = jax.lax.scan(fold, ensemble.init(x.shape[0]), params)[0]
        return scoring.point_log_likelihoods(kind, ens, y)

    # the data are arguments, not constants: XLA folded MNIST's 10,000 images into the program
    every_rate = jax.jit(lambda params, x, y: jax.lax.map(lambda p: one_rate(p, x, y), params))
    return lambda params: np.asarray(every_rate(params, x, y))


def search_rate(experiment: Experiment, plan: RunPlan) -> RateChoice:
    """Run the search of an experiment whose sampler has ``learning_rate="auto"``: successive
    halving on the validation log-likelihood over half the burn-in where the data set has a
    validation split (:func:`sgrld.chains.rate_halving.halve_learning_rate`), else the Stein
    virial over its first quarter (:func:`sgrld.chains.step_size.choose_learning_rate`).

    The pilot chains start where the run's chains start and as they start (``experiment.init_fn``
    of keys from ``plan.seed``, as many as ``plan.chains``, their metrics not warmed: the run
    starts again from there) and draw minibatches of ``plan.batch_size``.
    """
    search = experiment.sampler.rate_search
    key = jax.random.fold_in(jax.random.key(plan.seed), PILOT_KEY)
    init_key, stable_key, pilot_key = jax.random.split(key, 3)
    params = jax.vmap(experiment.init_fn)(jax.random.split(init_key, plan.chains))
    batch_fn = minibatch_fn(tuple(experiment.train), plan.batch_size)
    first = jax.tree.map(lambda x: x[0], params)
    candidates = candidate_rates(stability_rate(stable_key, search, first, batch_fn))
    states = jax.vmap(search.build(candidates[0]).init)(params, *experiment.chain_args)
    score = validation_score(experiment)
    if score is None:
        steps = pilot_steps_of(plan.burn_in)
        return choose_learning_rate(
            pilot_key, search, states, batch_fn, steps, candidates, warm=False
        )[0]
    steps = 2 * pilot_steps_of(plan.burn_in)
    return halve_learning_rate(pilot_key, search, states, batch_fn, score, steps, candidates)[0]


def resolve(experiment: Experiment, plan: RunPlan, saved: Any = None) -> Experiment:
    """``experiment`` with its ``learning_rate="auto"`` resolved: from ``saved`` (a checkpoint
    being resumed) where it holds the choice, else by :func:`search_rate`; the choice goes into
    ``meta[META_KEY]`` and is appended to ``meta["guarantee"]`` (so ``summary.json``, the run
    table, ``sgrld diagnose`` and the ArviZ attributes state it). Any other experiment is
    returned as it is."""
    search = getattr(experiment.sampler, "rate_search", None)
    if search is None:
        return experiment
    try:
        pilot_steps_of(plan.burn_in)
    except ValueError:
        raise ConfigError(
            f"run.burn_in = {plan.burn_in}: sampler.learning_rate = 'auto' (the default) is "
            f"chosen in the burn-in, which needs at least {4 * MIN_PILOT_STEPS} steps; raise "
            "run.burn_in or give sampler.learning_rate a number"
        ) from None
    choice = saved_choice(saved)
    if choice is None and devices.is_writer():
        print(
            "choosing the learning rate (sampler.learning_rate = 'auto'; a number skips this)",
            file=sys.stderr,
            flush=True,
        )
    try:
        choice = choice or search_rate(experiment, plan)
    except FloatingPointError as err:  # every rate diverged, or no curvature at the start
        raise ConfigError(f"sampler.learning_rate = 'auto': {err}") from None
    meta = {**experiment.meta, META_KEY: choice.to_dict()}
    if "guarantee" in meta:  # the run states its rate where it states its guarantee
        meta["guarantee"] = choice.clause(meta["guarantee"])
    sampler = search.build(choice.learning_rate)
    warn_if_minibatch_noise_dominates(sampler.adaptation, plan.batch_size, len(experiment.train[0]))
    return dataclasses.replace(experiment, sampler=sampler, meta=meta)
