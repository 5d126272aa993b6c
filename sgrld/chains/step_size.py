"""``learning_rate="auto"``: the rate chosen during the burn-in, by a Stein identity.

**The criterion.** For any density ``p ∝ exp(−U/T)`` and each coordinate i, integration by parts
gives Stein's identity with the test function ``θ_i − μ_i`` (the virial theorem)::

    E_p[(θ_i − μ_i)·∂_i U(θ)] = T,

so ``v_i = Cov(θ_i, ∂_i U)/T`` is 1 under the target, whatever p is. For the law q that the chains
have reached, ``v_i`` measures their spread against the target's in coordinate i: on a Gaussian
target whose chains have covariance ``k·Σ``, ``v_i = k``. A rate too small leaves the chains where
they started after the pilot (``v_i < 1`` if they started together, ``> 1`` if they started far
apart or far away); a rate too large inflates their spread in the stiff directions (SGLD's
discrete-time variance ``1/(1 − lr·λ/2)`` times the target's on a Gaussian, more with the
minibatch noise). Neither needs the posterior: ``∂_i U = N·∂_i(Û/N)`` is estimated without bias
by a minibatch gradient, independent of θ's own noise. The score of a rate is

    D(lr) = mean_i ρ(v̂_i),   ρ(v) = ((v − 1)/(v + 1))²,

less ρ's second-order noise bias ``ρ''(v̂_i)·Var̂(v̂_i)/2``: ``v̂_i`` pools the chains and the
:data:`GROUPS` parts of the pilot's window (the groups), and ``Var̂`` is its variance over the
groups divided by their number. In high dimension the noise averages out over the coordinates;
in low dimension over the groups. ρ is ``(v − 1)²/4`` near 1, symmetric in log v and bounded by 1:
a coordinate whose chains have not moved (v = 0) and one a hundred times too wide count about
alike, so that one stiff hyperparameter (a horseshoe's global scale, whose v reached 3·10⁴ in a
pilot on the digits) cannot outweigh the network's weights.

**The search.** The rates tried are a log grid, a factor 3 apart, from 9× down to 1/81 of
``2/λ̂``, λ̂ the top eigenvalue of ``G⁻¹∇²(Û/N)`` at the start (power iteration with
Hessian-vector products, the metric frozen at the mean statistic of a few minibatches):
``2/λ̂`` is the largest stable rate of the preconditioned gradient step there, and a network's
curvature adapts to its rate (the best rates on the digits lie above it). All rates and chains
run as one vmapped program for ``pilot_steps`` steps (the first half relaxes, the second is the
window, where one extra minibatch gradient is taken every :data:`EVERY` steps), with common
random numbers (the same keys for every rate). The largest rate whose D is within
:data:`~sgrld.chains.virial_choice.TOLERANCE` by two jackknife standard errors is chosen (larger
rates mix faster; a diverged rate scores ∞), or, where none is, the rate of least D; where the
run's length is given, the rate at or below it of least predicted error for the run, its bias
extrapolated from a larger rate and its noise the pilot's scaled to the run
(:mod:`sgrld.chains.virial_choice`). Its chains'
states continue the burn-in: the search costs ``(K − 1)·pilot_steps`` steps per chain. Where the
choice is the largest rate tried (or the smallest), the grid is moved past it and searched again,
at most twice (:func:`~sgrld.chains.rate_choice.search_beyond_edges`), each time ``K·pilot_steps``
steps more; a choice still at the edge is reported (``RateChoice.at_edge``) with a warning.

Example:
  >>> import jax, jax.numpy as jnp, sgrld
  >>> u = sgrld.potential(lambda w, b: -0.5 * ((b - w) / 0.1) ** 2, lambda w: -0.5 * w**2, 100)
  >>> s = sgrld.sgrld(u, sgrld.metrics.identity(), learning_rate="auto", num_data=100)
  >>> data = sgrld.minibatch_fn(jnp.ones(100), 100)  # full batch: λ = 100 + 1/100
  >>> states = jax.tree.map(lambda x: x[None].repeat(4, 0), s.init(jnp.zeros(())))
  >>> choice, _ = choose_learning_rate(jax.random.key(0), s.rate_search, states, data, 400)
  >>> [round(r * 100, 2) for r in choice.candidates][:4]   # in units of 1/λ
  [18.0, 6.0, 2.0, 0.67]
  >>> round(choice.learning_rate * 100, 3), choice.at_edge  # stiff variance within 12.5 %
  (0.222, False)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.chains.programs import kept
from sgrld.chains.rate_choice import (
    MAX_EXTENSIONS,
    RateChoice,
    all_finite,
    best_option,
    check_some_finite,
    chosen,
    search_beyond_edges,
)
from sgrld.chains.rate_grid import candidate_rates, fit_state, stability_rate, warm_start
from sgrld.chains.typical_set import searched_near_typical_set
from sgrld.chains.virial_choice import (
    best_within,
    for_the_run,
    simplest_passing,
    warn_if_none_within,
)
from sgrld.chains.virial_score import GROUPS, Sums, virial_score
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.rate_search import RateSearch

MIN_PILOT_STEPS = 32
"""The shortest pilot: 16 steps to relax, 16 in the window (4 evaluations per half)."""
EVERY = 2
"""Steps per gradient evaluation in the window: the evaluations cost a quarter of the pilot."""


def pilot_steps_of(burn_in: int) -> int:
    """The pilot's length in a burn-in of ``burn_in`` steps: its first quarter.

    Raises:
      ValueError: the burn-in's quarter is under :data:`MIN_PILOT_STEPS`.
    """
    steps = int(burn_in) // 4
    if steps < MIN_PILOT_STEPS:
        raise ValueError(
            f'learning_rate="auto" is chosen in the first quarter of the burn-in, which needs '
            f"at least {MIN_PILOT_STEPS} steps: burn_in={burn_in} is too short; give a burn-in "
            f"of at least {4 * MIN_PILOT_STEPS} steps, or a number for the learning rate"
        )
    return steps


PILOT_COORDINATES = 32
"""The fewest chain-coordinates whose ``v̂`` the pilot's D averages (:func:`pilot_copies`)."""


def pilot_copies(params: PyTree) -> int:
    """How many copies of the chains ``params`` (leading axis the chains) the pilot runs, each
    copy with its own random numbers: enough that chains × coordinates reach
    :data:`PILOT_COORDINATES`. D's noise averages out over the coordinates in high dimension;
    in low dimension only over the chains and groups, and with 4 chains on N(0, 1) it did not:
    SGHMC's pilot scored lr 0.667 at D = 0 (its noise correction clipped at 0) where its
    variance is 20 % wide (D = 0.008), and chose it (covariance error 6.8 times the grid's
    best). The run keeps the first copy's chains; the others cost a small model little.

    Example:
      >>> [pilot_copies(jnp.zeros(shape)) for shape in [(4,), (4, 10), (1, 5)]]
      [8, 1, 7]
    """
    leaves = jax.tree.leaves(params)
    chains = leaves[0].shape[0]
    size = chains * sum(int(np.prod(x.shape[1:])) for x in leaves)
    return max(1, -(-PILOT_COORDINATES // size))


def _window(pilot_steps: int) -> tuple[int, int]:
    """``(relax, evaluations)``: steps before the window, and evaluations in each of its
    :data:`GROUPS` parts (:data:`EVERY` steps each).

    Example:
      >>> _window(400), _window(33)
      ((200, 25), (17, 2))
    """
    evaluations = (pilot_steps - pilot_steps // 2) // (GROUPS * EVERY)
    return pilot_steps - GROUPS * evaluations * EVERY, evaluations


@kept
def _pilot_fn(search: RateSearch, batch_fn: Callable, pilot_steps: int) -> Callable:
    """``(rates [K], states [C, ...], keys [C]) -> (states [K, C, ...], sums [K, C, Q, ...])``,
    Q = :data:`GROUPS` parts of the window."""
    relax, evaluations = _window(pilot_steps)
    grad = jax.grad(search.potential_fn)

    def one_chain(sampler, state, key):
        key, eval_key = jax.random.split(key)

        def advance(state, t):
            step_key, batch_key = jax.random.split(jax.random.fold_in(key, t))
            return sampler.step(step_key, state, batch_fn(batch_key))[0], None

        def evaluate(state, e):
            start = relax + e * EVERY
            state, _ = jax.lax.scan(advance, state, start + jnp.arange(EVERY))
            g = grad(state.params, batch_fn(jax.random.fold_in(eval_key, e)))
            sums = Sums(state.params, g, jax.tree.map(jnp.multiply, state.params, g))
            return state, sums

        state, _ = jax.lax.scan(advance, state, jnp.arange(relax))
        parts = []
        for part in range(GROUPS):
            e = part * evaluations + jnp.arange(evaluations)
            state, sums = jax.lax.scan(evaluate, state, e)
            parts.append(jax.tree.map(lambda x: jnp.sum(x, 0), sums))
        return state, jax.tree.map(lambda *xs: jnp.stack(xs), *parts)

    def one_rate(lr, states, keys):
        sampler = frozen_from(search.build(lr), relax)
        return jax.vmap(lambda s, k: one_chain(sampler, s, k))(states, keys)

    return jax.jit(jax.vmap(one_rate, in_axes=(0, None, None)))


def frozen_from(sampler: Any, step: int) -> Any:
    """``sampler`` with ``adapt_until="auto"`` frozen from ``step`` on (the window average,
    :func:`~sgrld.samplers.guarantee.auto_freeze` of a burn-in of ``⌈4·step/3⌉``), so that the
    window sees the kept samples' metric; adapting, RMSprop's V lags behind the chains' way in
    (australian BLR: the adapting pilot chose 0.0501, the frozen run's best was 0.0167)."""
    adaptation = getattr(sampler, "adaptation", None)
    if adaptation is None or adaptation.resolve is None:
        return sampler
    return adaptation.resolve(-(-4 * step // 3), 0)


def choose_learning_rate(
    key: jax.Array,
    search: RateSearch,
    states: Any,
    batch_fn: Callable,
    pilot_steps: int,
    candidates: tuple[float, ...] | None = None,
    extensions: int = MAX_EXTENSIONS,
    warm: bool = True,
    run_steps: int | None = None,
) -> tuple[RateChoice, Any]:
    """Choose the rate of a ``learning_rate="auto"`` sampler (module docstring).

    Args:
      key: PRNG key of the search (the same key gives the same choice).
      search: the sampler's :class:`~sgrld.samplers.rate_search.RateSearch`.
      states: the chains' starting states, leading axis the chains (at least one).
      batch_fn: ``key -> batch``.
      pilot_steps: steps of each rate (:func:`pilot_steps_of` of the burn-in).
      candidates: the rates to try (``None``: :func:`candidate_rates` of :func:`stability_rate`).
      extensions: grids searched past an edge of ``candidates`` where the choice is there
        (:func:`~sgrld.chains.rate_choice.search_beyond_edges`; 0: ``candidates`` only).
      warm: warm the chains' metrics at their start first (:func:`warm_start`), where the run
        continues from the pilot's states (:func:`resolve_learning_rate`), and search again from
        the pilot's end after a far start (:func:`~sgrld.chains.typical_set.
        searched_near_typical_set`); ``False`` where the run starts again from ``states`` (``sgrld
        run``: a warmed pilot's choice for Wenzel on the australian MLP diverged at step 2).
      run_steps: the steps the run will keep its samples over (``None``: not known, the
        tolerance's choice stands; else :func:`~sgrld.chains.virial_choice.for_the_run`).

    Returns:
      ``(choice, states)``: the :class:`RateChoice` and its chains' states after the pilot.

    Raises:
      FloatingPointError: every rate diverged.
    """
    if pilot_steps < MIN_PILOT_STEPS:
        raise ValueError(f"pilot_steps must be >= {MIN_PILOT_STEPS}, got {pilot_steps}")
    if run_steps is not None and (
        isinstance(run_steps, bool) or int(run_steps) != run_steps or run_steps < 1
    ):
        raise ValueError(f"run_steps must be None or an integer >= 1, got {run_steps!r}")
    choice, states = _choose(
        key, search, states, batch_fn, pilot_steps, candidates, extensions, warm, run_steps
    )
    warn_if_none_within(choice)
    return choice, states


def _choose(key, search, states, batch_fn, pilot_steps, candidates, extensions, warm, run_steps):
    """:func:`choose_learning_rate` without its warning."""
    one = partial(_search, search, batch_fn, pilot_steps, candidates, extensions, warm, run_steps)
    if warm:
        return searched_near_typical_set(key, search, batch_fn, states, one)
    return one(key, states)


def _search(search, batch_fn, pilot_steps, candidates, extensions, warm, run_steps, key, states):
    """One search of :func:`choose_learning_rate` from ``states``."""
    stable_key, pilot_key = jax.random.split(key)
    if candidates is None:
        first = jax.tree.map(lambda x: x[0], states.params)
        candidates = candidate_rates(stability_rate(stable_key, search, first, batch_fn))
    chains = jax.tree.leaves(states.params)[0].shape[0]
    warm_key, pilot_key = jax.random.split(pilot_key)
    if warm:
        states = warm_start(warm_key, search, states, batch_fn)
    states = fit_state(frozen_from(search.build(candidates[0]), _window(pilot_steps)[0]), states)
    copies = pilot_copies(states.params)
    keys = jax.random.split(pilot_key, chains)
    if copies > 1:
        more = jax.random.split(jax.random.fold_in(pilot_key, 1), chains * (copies - 1))
        keys = jnp.concatenate([keys, more])
        states = jax.tree.map(lambda x: jnp.concatenate([x] * copies), states)
    pilot = _pilot_fn(search, batch_fn, pilot_steps)  # compiled once for every grid

    def search_fn(rates):
        ends, sums = pilot(jnp.asarray(rates, jnp.float32), states, keys)
        relax, evaluations = _window(pilot_steps)
        scores, errors, noise = (
            np.where(all_finite(ends.params), x, np.inf)
            for x in virial_score(sums, evaluations, search.num_data, search.temperature)
        )
        check_some_finite(rates, scores)
        best = best_within(scores, errors)
        if run_steps:  # the window's share of the run (pilot_steps − relax steps, its chains)
            share = (pilot_steps - relax) / run_steps * copies
            best = for_the_run(np.asarray(rates), scores, errors, noise, best, share)
        ends = jax.tree.map(lambda x: x[best, :chains], ends)  # the run's chains: the first
        return chosen(rates, scores, best, pilot_steps, errors), ends

    return search_beyond_edges(search_fn, tuple(candidates), extensions)


PILOT_KEY = 0x5EA4C4
"""Folded into a run's key for its search: the pilot's streams are not the run's."""


def resolve_learning_rate(
    key: jax.Array,
    sampler: Any,
    states: Any,
    batch_fn: Callable,
    burn_in: int,
    run_steps: int | None = None,
) -> tuple[Any, Any, RateChoice | None]:
    """``(sampler, states, choice)``: a ``learning_rate="auto"`` sampler resolved in the first
    quarter of a burn-in (:func:`pilot_steps_of`), for a run keeping samples over ``run_steps``
    steps after it (:func:`choose_learning_rate`), with its chains' states after the pilot (their
    step counters advanced by ``choice.pilot_steps``); any other sampler as it is, with
    ``choice = None``.

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> t = sgrld.samples.targets.standard_normal()
      >>> s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate="auto", num_data=1)
      >>> states = jax.tree.map(lambda x: x[None].repeat(4, 0), s.init(t.init_params))
      >>> s2, states, choice = resolve_learning_rate(jax.random.key(0), s, states, t.batch_fn, 400)
      >>> s2.rate_search is None, int(states.step[0]), choice.pilot_steps
      (True, 100, 100)
    """
    search = getattr(sampler, "rate_search", None)
    if search is None:
        return sampler, states, None
    pilot = pilot_steps_of(burn_in)
    key = jax.random.fold_in(key, PILOT_KEY)
    if search.option is not None:
        search, choice, states = _with_option(key, search, states, batch_fn, pilot, run_steps)
    else:
        choice, states = choose_learning_rate(
            key, search, states, batch_fn, pilot, run_steps=run_steps
        )
    return search.build(choice.learning_rate), states, choice


def _with_option(key, search, states, batch_fn, pilot, run_steps):
    """``(search, choice, states)`` of the value of ``search.option`` (Monge's α²) that the
    virial keeps (:func:`~sgrld.chains.virial_choice.simplest_passing`), each value's search
    on the same random numbers from the same starts, its chains initialised anew by its own
    sampler (α² = 0 is the identity metric, whose state is not Monge's)."""
    name, values, search_at = search.option
    choices, ends, searches, failed = {}, {}, {}, []
    for value in values:
        at = search_at(value)
        fresh = jax.vmap(at.build(1.0).init)(states.params)
        if "step" in getattr(fresh, "_fields", ()):
            fresh = fresh._replace(step=states.step)
        try:
            choices[value], ends[value] = _choose(
                key, at, fresh, batch_fn, pilot, None, MAX_EXTENSIONS, True, run_steps
            )
        except FloatingPointError as err:
            failed.append(err)
        searches[value] = at
    if not choices:
        raise failed[0]
    value = simplest_passing(choices)
    choice = best_option(name, choices, value)
    warn_if_none_within(choice)
    return searches[value], choice, ends[value]
