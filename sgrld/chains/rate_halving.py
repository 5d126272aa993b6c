"""``learning_rate="auto"`` with held-out data: successive halving of the rates tried on the
chains' validation log-likelihood (``sgrld run`` and ``sgrld sweep`` where the data set has a
validation split; :mod:`sgrld.chains.step_size` otherwise)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.chains import rate_choice
from sgrld.chains.programs import kept
from sgrld.chains.rate_choice import MAX_EXTENSIONS, RateChoice
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.rate_search import RateSearch


@jax.jit
def _taken(tree: PyTree, index: jax.Array) -> PyTree:
    """Every leaf's rows ``index``: one program per index shape, not one per leaf and shape."""
    return jax.tree.map(lambda x: x[index], tree)


HALVING = "validation log-likelihood of the chains' ensemble, by successive halving"
"""The criterion's name where a run has validation data (:func:`halve_learning_rate`)."""


SNAPSHOTS = 8
"""States of each chain scored at the end of a round: its last ``pilot_steps // 4`` steps, evenly
spaced (:func:`halve_learning_rate`)."""


@kept
def _advance_fn(search: RateSearch, batch_fn: Callable, steps: int) -> Callable:
    """``(rates [K], states [K, C, ...], keys [C], start, active [K]) -> (states, params [K, C,
    S, ...])`` after ``steps`` steps of each rate's chains (step t of a chain uses
    ``fold_in(key, t)``, as in the pilot), with ``S`` = :data:`SNAPSHOTS` states of each chain's
    params evenly spaced over the steps (at most one a step), the last at the end.

    On the CPU the slots run one after another (``lax.map``) and an inactive slot (a survivor's
    repeat, whose results are not read) is skipped: the repeats are nearly half of the halving's
    slot-steps (3,500 for 7 rates, 1,875 of them active), and on the MNIST MLP (batch 100, one
    chain, 2-core CPU) the active slots one at a time took 4.7 s against 5.8 s for every slot in
    one ``vmap``. Elsewhere the slots are one ``vmap`` (a GPU's step of a small network is
    launch-bound) and every slot runs."""
    snapshots = min(SNAPSHOTS, steps)
    every, first = steps // snapshots, steps - snapshots * (steps // snapshots)

    def one_chain(sampler, state, key, start):
        key, _ = jax.random.split(key)

        def advance(state, t):
            step_key, batch_key = jax.random.split(jax.random.fold_in(key, t))
            return sampler.step(step_key, state, batch_fn(batch_key))[0], None

        def snapshot(state, t0):
            state = jax.lax.scan(advance, state, t0 + jnp.arange(every))[0]
            return state, state.params

        state = jax.lax.scan(advance, state, start + jnp.arange(first))[0]
        starts = start + first + every * jnp.arange(snapshots)
        return jax.lax.scan(snapshot, state, starts)

    def one_rate(lr, states, keys, start):
        sampler = search.build(lr)
        return jax.vmap(lambda s, k: one_chain(sampler, s, k, start))(states, keys)

    def skipped(lr, states, keys, start):  # a repeat's slot: left as it is, its params as snapshots
        return states, jax.tree.map(lambda x: jnp.stack([x] * snapshots, 1), states.params)

    def one_slot(keys, start, slot):
        lr, states, on = slot
        return jax.lax.cond(on, one_rate, skipped, lr, states, keys, start)

    if jax.default_backend() == "cpu":
        return jax.jit(
            lambda rates, states, keys, start, active: jax.lax.map(
                partial(one_slot, keys, start), (rates, states, active)
            )
        )
    batched = jax.vmap(one_rate, in_axes=(0, 0, None, None))
    return jax.jit(lambda rates, states, keys, start, active: batched(rates, states, keys, start))


def compile_ahead(
    search: RateSearch, states: Any, batch_fn: Callable, pilot_steps: int, rates: int
) -> Callable[[], None]:
    """Compile :func:`halve_learning_rate`'s program for ``rates`` rates in a thread, while the
    caller finds them (:func:`sgrld.chains.rate_grid.stability_rate`, whose own compilation then
    runs beside it); returns the function that waits for it (and raises what it raised).

    On the CPU a call with every slot inactive compiles the program and runs no step; on other
    backends every slot would run, so nothing is done there. On the MNIST MLP (2 cores) the
    two compilations took 2.1 s and 2.4 s one after the other.
    """
    if jax.default_backend() != "cpu":
        return lambda: None
    advance = _advance_fn(search, batch_fn, max(1, pilot_steps // 4))  # kept: the search's own
    chains = jax.tree.leaves(states.params)[0].shape[0]
    slots = jax.tree.map(lambda x: jnp.broadcast_to(x, (rates, *x.shape)), states)
    idle = jnp.zeros(rates, bool)
    keys = jax.random.split(jax.random.key(0), chains)
    failed: list[BaseException] = []

    def compile_it() -> None:
        try:
            jax.block_until_ready(advance(jnp.zeros(rates, jnp.float32), slots, keys, 0, idle))
        except BaseException as err:  # noqa: BLE001 (the waiter raises it)
            failed.append(err)

    thread = threading.Thread(target=compile_it, name="sgrld-compile-ahead", daemon=True)
    thread.start()

    def wait() -> None:
        thread.join()
        if failed:
            raise failed[0]

    return wait


@jax.jit
def _pooled(params: PyTree, slots: jax.Array) -> PyTree:
    """``[K, C, S, ...] -> [R, C·S, ...]``: the chains and snapshots of each of the R ``slots``
    as one ensemble."""
    return jax.tree.map(lambda x: x[slots].reshape(len(slots), -1, *x.shape[3:]), params)


def halve_learning_rate(
    key: jax.Array,
    search: RateSearch,
    states: Any,
    batch_fn: Callable,
    score_fn: Callable[[PyTree], np.ndarray],
    pilot_steps: int,
    candidates: tuple[float, ...],
    extensions: int = MAX_EXTENSIONS,
) -> tuple[RateChoice, Any]:
    """Choose a rate by successive halving on a score that needs held-out data.

    All candidates run ``pilot_steps // 4`` steps; the better half (by ``score_fn``, higher is
    better) runs as many again, the better half of those twice as many, and so on until one is
    left or ``pilot_steps`` are spent. The survivors are repeated over the candidates' slots, so
    one compiled program serves every round (one compilation instead of one per round, which
    dominated the search on the digits). A survivor's repeats run the same random numbers, so
    only its first slot is scored, and on the CPU only that slot runs (:func:`_advance_fn`):
    there the rounds cost about ``K·pilot_steps/2`` steps per chain, elsewhere ``K·pilot_steps``.
    A network's best rate over a whole run is not its best over a short pilot: on the digits
    (Identity, 4 chains), the ensemble of the chains' states after 250 steps preferred lr 0.2
    (validation log-likelihood −0.23 against −0.28 at 0.0675), after 500 steps 0.0675 (−0.250
    against −0.268), and over a whole run 0.2 was the worse (test −0.97 against −0.14); halving
    gives the long rounds to the survivors.

    A rate is scored as a run is, on an ensemble: of its chains' states at :data:`SNAPSHOTS`
    steps evenly spaced over the last ``pilot_steps // 4`` steps of its round, not only their
    last states. A run of one chain (the CLI's default) would otherwise be scored on one network,
    and a large rate's one network is noisy where its samples' average is not: on the digits,
    DOP's best rate over a whole run (0.0032) scored worst but one on its last states.

    The chains start as a run's do, their metrics cold (as ``init`` gives them), not warmed
    (:func:`sgrld.chains.rate_grid.warm_start`, which :func:`sgrld.chains.step_size.
    choose_learning_rate` uses, its chains continuing the burn-in): a rate is then tried on the
    first steps the run will take. On the digits, warm pilots chose DOP's 0.0096, whose run
    started cold reached a test log-likelihood of −235 (cold pilots: 0.0032, −0.090), and the
    warm start itself cost Wenzel's run at 0.086 0.16 nats (−0.28 against −0.11).

    Args:
      key: PRNG key (the same key gives the same choice).
      search: the sampler's :class:`~sgrld.samplers.rate_search.RateSearch`.
      states: the chains' starting states, leading axis the chains: the run's.
      batch_fn: ``key -> batch``.
      score_fn: ``params [R, M, ...] -> [R]`` or ``[R, n]`` for a round's R survivors (R ≤ K,
        so once per R unless it compiles one rate at a time), e.g. the validation
        log-likelihood of the ensemble of each rate's M = C·:data:`SNAPSHOTS` states, or of
        each of n validation points (non-finite: diverged); with points, the last round's
        choice is the smallest rate within one standard error of the best
        (:func:`within_one_error`).
      pilot_steps: the most steps a rate runs.
      candidates: the rates, largest first.
      extensions: grids searched past an edge of ``candidates`` where the choice is there
        (:func:`~sgrld.chains.rate_choice.search_beyond_edges`; 0: ``candidates`` only).

    Returns:
      ``(choice, states)``: its ``scores`` are minus each rate's last score (lower is better, as
      D), and the states are the chosen rate's chains'.
    """
    chains = jax.tree.leaves(states.params)[0].shape[0]
    keys = jax.random.split(jax.random.split(key)[1], chains)  # the streams RESULTS §33 measured
    unit = max(1, pilot_steps // 4)
    advance = _advance_fn(search, batch_fn, unit)  # compiled once: k slots of `unit` steps

    def search_fn(rates):
        def run(rates, current, start, active):
            return advance(rates, current, keys, start, active)

        return _halving(run, unit, states, score_fn, pilot_steps, rates)

    return rate_choice.search_beyond_edges(search_fn, tuple(candidates), extensions)


def _halving(
    advance: Callable,
    unit: int,
    states: Any,
    score_fn: Callable[[PyTree], np.ndarray],
    pilot_steps: int,
    candidates: tuple[float, ...],
) -> tuple[RateChoice, Any]:
    """One successive halving over ``candidates`` (:func:`halve_learning_rate`), ``advance``
    running every slot ``unit`` steps."""
    k = len(candidates)
    alive, slots = np.arange(k), np.arange(k)  # survivors; the candidate of each of k slots
    scores = np.full(k, np.inf)
    current = jax.tree.map(lambda x: jnp.broadcast_to(x, (k, *x.shape)), states)
    done, length = 0, unit
    while True:
        rates = jnp.asarray([candidates[i] for i in slots], jnp.float32)
        first = np.asarray([list(slots).index(i) for i in alive])  # each survivor's first slot
        active = jnp.asarray(np.isin(np.arange(k), first))  # its repeats need not run
        for _ in range(max(1, length // unit)):
            current, snapshots = advance(rates, current, done, active)
            done += unit
        distinct = _pooled(snapshots, first)  # a survivor's repeats are not scored
        points = -np.asarray(score_fn(distinct), np.float64).reshape(len(first), -1)
        with np.errstate(invalid="ignore"):
            value = points.mean(1)
        finite = rate_choice.all_finite(current.params)[first]
        value = np.where(np.isfinite(value) & finite, value, np.inf)
        scores[alive] = value
        if len(alive) == 1 or done >= pilot_steps or not np.isfinite(value).any():
            break
        keep = np.sort(np.argsort(value, kind="stable")[: (len(alive) + 1) // 2])
        alive = alive[keep]
        refill = first[keep][np.arange(k) % len(keep)]  # survivors repeated over the slots
        slots, current = slots[refill], _taken(current, refill)
        length = min(done, pilot_steps - done)
    rate_choice.check_some_finite(candidates, scores)
    eligible = rate_choice.away_from_divergence(scores)[alive]
    best = int(alive[int(np.argmin(eligible if np.isfinite(eligible).any() else scores[alive]))])
    best = within_one_error(best, [int(i) for i in alive], points)  # a row per survivor
    choice = rate_choice.chosen(candidates, scores, best, done, criterion=HALVING)
    return choice, _taken(current, list(slots).index(best))


def within_one_error(best: int, alive: list[int], points: np.ndarray) -> int:
    """The smallest rate (the largest index: rates largest first) among the survivors ``alive``
    whose mean loss over the validation points is within one standard error of ``best``'s, the
    error that of their paired difference (``points``: one row of per-point losses per survivor;
    one column: no error known, ``best`` stands). The one-standard-error rule of
    cross-validation (Breiman et al., 1984), with the smaller rate as the simpler model: a pilot
    of a few hundred steps favours the rates that converge fastest, and a rate chosen above
    the best by such a margin is the one that runs hot over a whole run (Identity on the
    digits: 0.175 beat 0.0583 by 0.010 nats in the pilot, and lost by 0.27 over the run).

    Example:
      >>> loss = np.array([[1.0, 1.2, 0.8, 1.0], [1.1, 1.1, 0.9, 1.0]])  # rates 0 and 1
      >>> within_one_error(0, [0, 1], loss), within_one_error(0, [0, 1], loss[:, :1])
      (1, 0)
    """
    if points.shape[1] < 2:
        return best
    row = dict(zip(alive, points, strict=True))
    pick = best
    for i in alive:
        d = row[i] - row[best]
        if i > pick and np.isfinite(d).all() and d.mean() <= d.std(ddof=1) / np.sqrt(len(d)):
            pick = i
    return pick
