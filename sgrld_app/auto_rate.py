"""``sampler.learning_rate = "auto"`` in a run: the rate chosen before the run, kept on resume.

The runner's epochs walk permutations of the training set, so the search runs before them, on
minibatches drawn with replacement, from the chains' own starting points (:func:`search_rate`:
on the validation log-likelihood, of the data set's validation split or, where it has none, of
:data:`HELD_OUT` of the training rows held out for the search alone); the run then starts from
those points at the chosen rate, on every training row, and keeps its whole burn-in. The
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
from sgrld.chains.rate_choice import best_option
from sgrld.chains.rate_grid import candidate_rates, stability_rate
from sgrld.chains.rate_halving import HALVING, compile_ahead, halve_learning_rate
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
HELD_OUT = 0.1
"""The share of the training rows the search holds out as its validation set where the data set
has no validation split (the run itself trains on every row). Without it the Stein virial chose
the least-bad rate on networks, where no rate reaches the target's spread in a pilot: on the
australian set's 400-400 MLP, DOP's choice (0.0052) gave a test log-likelihood of −3.7, and the
grid's best rate on validation (0.00019) −0.31 (RESULTS §33)."""
MIN_HELD_OUT = 20
"""The fewest rows held out; a smaller training set is searched by the Stein virial."""


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

    # the data are arguments, not constants: XLA folded MNIST's 10,000 images into the program;
    # one rate a program, as the halving's rounds score fewer rates each (their survivors)
    score_one, take = jax.jit(one_rate), jax.jit(lambda tree, i: jax.tree.map(lambda a: a[i], tree))

    def every_rate(params: Any) -> np.ndarray:
        rates = range(jax.tree.leaves(params)[0].shape[0])
        return np.stack([np.asarray(s) for s in [score_one(take(params, i), x, y) for i in rates]])

    return every_rate


def held_out(experiment: Experiment, seed: int) -> Experiment | None:
    """``experiment`` with :data:`HELD_OUT` of its training rows (a permutation from ``seed``)
    as its validation set and the rest as its training set, for the search alone; ``None`` where
    fewer than :data:`MIN_HELD_OUT` rows would be held out. The held-out targets are put in the
    units the predictions are scored in (``experiment.eval_units``): a regression's search that
    scored its predictions, in the targets' own units, against standardised targets (before
    this was done) chose UCI concrete's Wenzel rate 1.2·10⁻⁸, the smallest it tried.

    Example:
      >>> import numpy as np
      >>> e = Experiment(None, None, None, (np.arange(400.0)[:, None], np.zeros(400)), {},
      ...                eval_units=lambda y: 10 * y + 3)
      >>> h = held_out(e, 0)
      >>> train, (val, y_val) = h.train[0][:, 0], h.eval_sets["val"]
      >>> len(train), len(val), set(train) & set(val[:, 0]), set(y_val), set(h.train[1])
      (360, 40, set(), {np.float64(3.0)}, {np.float64(0.0)})
      >>> held_out(Experiment(None, None, None, (np.zeros((150, 1)), np.zeros(150)), {}), 0)
    """
    n = len(experiment.train[0])
    size = int(HELD_OUT * n)
    if size < MIN_HELD_OUT:
        return None
    order = np.random.default_rng([seed, PILOT_KEY]).permutation(n)
    rows = lambda idx: tuple(np.asarray(a)[np.sort(idx)] for a in experiment.train)  # noqa: E731
    (x_val, y_val), train = rows(order[:size]), rows(order[size:])
    units = experiment.eval_units or (lambda y: y)
    return dataclasses.replace(experiment, train=train, eval_sets={"val": (x_val, units(y_val))})


def search_rate(experiment: Experiment, plan: RunPlan) -> RateChoice:
    """Run the search of an experiment whose sampler has ``learning_rate="auto"``: successive
    halving on the validation log-likelihood over half the burn-in
    (:func:`sgrld.chains.rate_halving.halve_learning_rate`), of the data set's validation split
    or, where it has none, of rows held out from the training set (:func:`held_out`); else (too
    few rows to hold out) the Stein virial over its first quarter, for a run of the plan's length
    (:func:`sgrld.chains.step_size.choose_learning_rate`).

    The pilot chains start where the run's chains start and as they start (``experiment.init_fn``
    of keys from ``plan.seed``, as many as ``plan.chains``, their metrics not warmed: the run
    starts again from there) and draw minibatches of ``plan.batch_size``.
    """
    search = experiment.sampler.rate_search
    criterion = HALVING
    if validation_score(experiment) is None and (held := held_out(experiment, plan.seed)):
        criterion = HALVING.replace(
            "ensemble", f"ensemble on {len(held.eval_sets['val'][0])} training rows held out"
        )
        experiment = held
    n = len(experiment.train[0])
    key = jax.random.fold_in(jax.random.key(plan.seed), PILOT_KEY)
    init_key, stable_key, pilot_key = jax.random.split(key, 3)
    params = jax.vmap(experiment.init_fn)(jax.random.split(init_key, plan.chains))
    batch_fn = minibatch_fn(tuple(experiment.train), plan.batch_size)
    first = jax.tree.map(lambda x: x[0], params)
    states = jax.vmap(search.build(1.0).init)(params, *experiment.chain_args)  # rate-free
    score = validation_score(experiment)
    if score is None:
        candidates = candidate_rates(stability_rate(stable_key, search, first, batch_fn))
        steps, run = pilot_steps_of(plan.burn_in), plan.epochs * (n // plan.batch_size)
        return choose_learning_rate(
            pilot_key,
            search,
            states,
            batch_fn,
            steps,
            candidates,
            warm=False,
            run_steps=max(1, run - plan.burn_in),
        )[0]
    steps = 2 * pilot_steps_of(plan.burn_in)
    ahead = compile_ahead(search, states, batch_fn, steps, len(candidate_rates(1.0)))
    candidates = candidate_rates(stability_rate(stable_key, search, first, batch_fn))
    ahead()  # the halving's program, compiled beside the stability rate's

    def halve(search: Any) -> RateChoice:
        choice = halve_learning_rate(pilot_key, search, states, batch_fn, score, steps, candidates)
        return choice[0]._replace(criterion=criterion)

    if experiment.searched_option is None:
        return halve(search)
    return _with_option(experiment, halve)


def _with_option(experiment: Experiment, halve: Callable[[Any], RateChoice]) -> RateChoice:
    """The halving of each value of ``experiment.searched_option`` (the first value's search is
    the experiment's own sampler's), the best by its chosen rate's validation score
    (:func:`sgrld.chains.rate_choice.best_option`). Every value is tried on the same rates, the
    stability rate's at the first: Monge's, at its initial statistic 0, is the identity's at any
    α² (:func:`sgrld.chains.rate_grid.vanishes_in_the_typical_set`). A value whose every rate
    diverged is left out; where every value's did, the first's error is raised."""
    key, values = experiment.searched_option
    choices: dict[float, RateChoice] = {}
    failed: list[FloatingPointError] = []
    for i, value in enumerate(values):
        at = experiment.sampler if i == 0 else experiment.sampler_at(value)
        try:
            choices[value] = halve(at.rate_search)
        except FloatingPointError as err:
            failed.append(err)
    if not choices:
        raise failed[0]
    return best_option(key.rpartition(".")[2], choices)


def _and_option(experiment: Experiment) -> str:
    """`` and <option> among <values>`` where the search chooses an option beside the rate."""
    if experiment.searched_option is None:
        return ""
    key, values = experiment.searched_option
    return f" and {key} among {', '.join(f'{v:g}' for v in values)}"


def check_burn_in(plan: RunPlan) -> None:
    """Raises a one-line :class:`ConfigError` where the burn-in is too short for the search."""
    try:
        pilot_steps_of(plan.burn_in)
    except ValueError:
        raise ConfigError(
            f"run.burn_in = {plan.burn_in}: sampler.learning_rate = 'auto' (the default) is "
            f"chosen in the burn-in, which needs at least {4 * MIN_PILOT_STEPS} steps; raise "
            "run.burn_in or give sampler.learning_rate a number"
        ) from None


def checked_search(experiment: Experiment, plan: RunPlan) -> RateChoice:
    """:func:`search_rate`, its failures one-line :class:`ConfigError` s: a burn-in too short
    (:func:`check_burn_in`), every rate diverged or no curvature at the start."""
    check_burn_in(plan)
    try:
        return search_rate(experiment, plan)
    except FloatingPointError as err:
        raise ConfigError(f"sampler.learning_rate = 'auto': {err}") from None


def resolve(experiment: Experiment, plan: RunPlan, saved: Any = None) -> Experiment:
    """``experiment`` with its ``learning_rate="auto"`` resolved: from ``saved`` (a checkpoint
    being resumed) where it holds the choice, else by :func:`search_rate`; the choice goes into
    ``meta[META_KEY]`` and is appended to ``meta["guarantee"]`` (so ``summary.json``, the run
    table, ``sgrld diagnose`` and the ArviZ attributes state it). Any other experiment is
    returned as it is."""
    search = getattr(experiment.sampler, "rate_search", None)
    if search is None:
        return experiment
    check_burn_in(plan)
    choice = saved_choice(saved)
    if choice is None and devices.is_writer():
        print(
            f"choosing the learning rate{_and_option(experiment)} (sampler.learning_rate = "
            "'auto'; a number skips this)",
            file=sys.stderr,
            flush=True,
        )
    choice = choice or checked_search(experiment, plan)
    meta = {**experiment.meta, META_KEY: choice.to_dict()}
    if "guarantee" in meta:  # the run states its rate where it states its guarantee
        base = meta["guarantee"]
        if choice.option_value is not None and experiment.guarantee_at is not None:
            base = experiment.guarantee_at(choice.option_value)  # Monge at α² 0: the identity
        meta["guarantee"] = choice.clause(base)
    if choice.option_value is not None:  # Monge's α², chosen beside the rate
        search = experiment.sampler_at(choice.option_value).rate_search
    sampler = search.build(choice.learning_rate)
    warn_if_minibatch_noise_dominates(sampler.adaptation, plan.batch_size, len(experiment.train[0]))
    return dataclasses.replace(experiment, sampler=sampler, meta=meta)
