"""The outcome of a ``learning_rate="auto"`` search (:class:`RateChoice`), the rules that both
criteria share (a diverged rate, a rate next to one), and the search beyond the grid's edge
(:func:`search_beyond_edges`): where the best rate is the largest or the smallest tried, the grid
is moved past it and searched again, up to :data:`MAX_EXTENSIONS` times."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import numpy as np

from sgrld.numerics.pytrees import PyTree

CRITERION = "Stein virial: mean_i ρ(Cov(θ_i, ∂_iU)/T), ρ(v) = ((v − 1)/(v + 1))²"
"""The Stein virial's name (:mod:`sgrld.chains.step_size`), as runs report it."""
MAX_EXTENSIONS = 2
"""Grids searched past the edge of the first, at most (:func:`search_beyond_edges`)."""
OPTION_NAMES = {"alpha2": "α²"}
"""How a run's line names a metric's option chosen beside the rate (:func:`best_option`)."""


class RateChoice(NamedTuple):
    """The outcome of a learning-rate search (reported in ``summary.json``, the run table,
    ``sgrld diagnose``, the ArviZ attributes and ``sgrld.sample``'s result).

    Attributes:
      learning_rate: the chosen rate.
      candidates: the rates tried, largest first.
      scores: each rate's score, lower is better (``inf``: diverged): D, or minus the
        validation log-likelihood (:func:`halve_learning_rate`).
      pilot_steps: steps the chosen rate ran.
      at_edge: the choice is the largest or the smallest rate tried.
      errors: the jackknife standard error of each score.
      criterion: the criterion's name (:data:`CRITERION`).
      option: the metric's option chosen beside the rate (``"alpha2"``, Monge's α²), or ``""``
        (:func:`best_option`).
      option_value: its chosen value (``None``: no option chosen).
      options: ``(value, rate, score)`` of each value tried: the rate its search chose and that
        rate's score; ``candidates`` and ``scores`` are the chosen value's search.
    """

    learning_rate: float
    candidates: tuple[float, ...]
    scores: tuple[float, ...]
    pilot_steps: int
    at_edge: bool
    errors: tuple[float, ...] = ()
    criterion: str = CRITERION
    option: str = ""
    option_value: float | None = None
    options: tuple[tuple[float, float, float], ...] = ()

    def describe(self) -> str:
        """One line: the rate, how it was chosen and the scores.

        Example:
          >>> RateChoice(0.1, (0.3, 0.1, 0.033), (float("inf"), 0.02, 0.4), 64, False).describe()
          'lr 0.1 chosen by the Stein virial over 3 rates (0.3: diverged, 0.1: 0.02, 0.033: 0.4) in 64 pilot steps'
        """  # noqa: E501
        scores = ", ".join(
            f"{c:.3g}: {'diverged' if not np.isfinite(s) else format(s, '.3g')}"
            for c, s in zip(self.candidates, self.scores, strict=True)
        )
        edge = "; at the edge of the rates tried" if self.at_edge else ""
        line = (
            f"lr {self.learning_rate:.3g} chosen by the {self.criterion.split(':')[0]} over "
            f"{len(self.candidates)} rates ({scores}) in {self.pilot_steps} pilot steps{edge}"
        )
        if self.option_value is None:
            return line
        tried = ", ".join(
            f"{v:.3g}: lr {r:.3g}, {'diverged' if not np.isfinite(s) else format(s, '.3g')}"
            for v, r, s in self.options
        )
        name = OPTION_NAMES.get(self.option, self.option)
        return f"{name} {self.option_value:.3g} and {line}; {name} tried: {tried}"

    def clause(self, guarantee: str) -> str:
        """``guarantee`` with the choice appended: the one line a run states (module docstring).

        Example:
          >>> c = RateChoice(0.1, (0.3, 0.1), (float("inf"), 0.02), 64, True)
          >>> c.clause("exact: constant metric (not adaptive)")
          'exact: constant metric (not adaptive); lr 0.1 chosen by the Stein virial over 2 rates (0.3: diverged, 0.1: 0.02) in 64 pilot steps; at the edge of the rates tried'
        """  # noqa: E501
        return f"{guarantee}; {self.describe()}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (``inf`` as ``None``)."""
        return {
            "learning_rate": self.learning_rate,
            "criterion": self.criterion,
            "candidates": list(self.candidates),
            "scores": [float(s) if np.isfinite(s) else None for s in self.scores],
            "errors": [float(s) if np.isfinite(s) else None for s in self.errors],
            "pilot_steps": self.pilot_steps,
            "at_edge": self.at_edge,
            **(
                {}
                if self.option_value is None
                else {
                    "option": self.option,
                    "option_value": self.option_value,
                    "options": [
                        [v, r, float(s) if np.isfinite(s) else None] for v, r, s in self.options
                    ],
                }
            ),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RateChoice:
        """The inverse of :meth:`to_dict` (a resumed run reads its choice back).

        Raises:
          ValueError: ``d`` is not a stored choice (a key missing or a value of the wrong kind,
            e.g. a hand-edited ``summary.json``), naming what is wrong.

        Example:
          >>> RateChoice.from_dict({"learning_rate": 0.1})
          Traceback (most recent call last):
          ...
          ValueError: not a learning-rate choice: 'candidates' missing
        """
        floats = lambda xs: tuple(float("inf") if x is None else float(x) for x in xs)  # noqa: E731
        if not isinstance(d, dict):
            raise ValueError(f"not a learning-rate choice: a {type(d).__name__}, not a mapping")
        try:
            choice = cls(
                float(d["learning_rate"]),
                floats(d["candidates"]),
                floats(d["scores"]),
                int(d["pilot_steps"]),
                bool(d["at_edge"]),
                floats(d.get("errors", ())),
                str(d.get("criterion", CRITERION)),
                str(d.get("option", "")),
                None if d.get("option_value") is None else float(d["option_value"]),
                tuple(tuple(floats(row)) for row in d.get("options", ())),
            )
        except KeyError as err:
            raise ValueError(f"not a learning-rate choice: {err} missing") from None
        except (TypeError, ValueError) as err:
            raise ValueError(f"not a learning-rate choice: {err}") from None
        if any(len(row) != 3 for row in choice.options):
            raise ValueError(
                "not a learning-rate choice: an option's row is not (value, rate, score)"
            )
        if not (choice.learning_rate > 0 and len(choice.scores) == len(choice.candidates)):
            raise ValueError(
                "not a learning-rate choice: the rate is not positive or the scores do not "
                "match the rates tried"
            )
        return choice


def check_some_finite(candidates: tuple[float, ...], scores: np.ndarray) -> None:
    """``FloatingPointError`` where every rate tried diverged (every score ``inf``)."""
    if not np.isfinite(scores).any():
        tried = ", ".join(f"{c:.3g}" for c in candidates)
        raise FloatingPointError(
            f'learning_rate="auto": every rate tried diverged ({tried}); check the potential '
            "and the start, or give a smaller number"
        )


def chosen(
    candidates: tuple[float, ...],
    scores: np.ndarray,
    best: int,
    steps: int,
    errors: np.ndarray = (),
    criterion: str = CRITERION,
) -> RateChoice:
    """The :class:`RateChoice` of candidate ``best`` (its warning at the edge is
    :func:`search_beyond_edges`'s)."""
    choice = RateChoice(
        float(candidates[best]),
        tuple(float(c) for c in candidates),
        tuple(float(s) for s in scores),
        int(steps),
        best in (0, len(candidates) - 1),
        tuple(float(e) for e in errors),
        criterion,
    )
    return choice


def best_option(
    option: str, choices: Mapping[float, RateChoice], value: float | None = None
) -> RateChoice:
    """The choice, among one search per value of a metric's ``option`` (on the same random
    numbers), whose chosen rate scored best (the lowest score; the first value on a tie), or that
    of ``value`` where given, with every value's rate and score in its ``options``. Only a
    criterion that compares the runs the values give (the validation log-likelihood) can choose
    by score: the Stein virial scores the bias of a rate, not what a metric gains
    (:func:`sgrld.chains.virial_choice.simplest_passing` gives its ``value``).

    Example:
      >>> a = RateChoice(0.1, (0.3, 0.1), (0.5, 0.3), 64, False)
      >>> b = RateChoice(0.3, (0.3, 0.1), (0.2, 0.4), 64, True)
      >>> c = best_option("alpha2", {1.0: a, 0.0: b})
      >>> c.learning_rate, c.option_value, c.options
      (0.3, 0.0, ((1.0, 0.1, 0.3), (0.0, 0.3, 0.2)))
      >>> c.describe()
      'α² 0 and lr 0.3 chosen by the Stein virial over 2 rates (0.3: 0.2, 0.1: 0.4) in 64 pilot steps; at the edge of the rates tried; α² tried: 1: lr 0.1, 0.3, 0: lr 0.3, 0.2'
    """  # noqa: E501

    def score(choice: RateChoice) -> float:
        return choice.scores[choice.candidates.index(choice.learning_rate)]

    table = tuple((float(v), c.learning_rate, score(c)) for v, c in choices.items())
    if value is None:
        value = min(choices, key=lambda v: score(choices[v]))
    return choices[value]._replace(option=option, option_value=float(value), options=table)


def warn_at_edge(choice: RateChoice) -> None:
    """A ``RuntimeWarning`` where the choice is the largest or the smallest rate tried."""
    if choice.at_edge:
        warnings.warn(
            f"learning_rate='auto': the best rate is at the edge of the rates tried ({choice.describe()}); "  # noqa: E501
            "a rate outside them may be better: give a number",
            RuntimeWarning,
            stacklevel=4,
        )


def away_from_divergence(scores: np.ndarray) -> np.ndarray:
    """The scores (rates largest first) with a rate next below a diverged one (``inf``) set to
    ``inf`` too, unless no other rate is left: a rate one grid step from a divergence is at the
    chain's stability edge, which a longer run may cross (SGNHT's chosen 0.074 on N(0, 1)
    diverged after a 50-step pilot in which 0.22 had not yet).

    Example:
      >>> away_from_divergence(np.array([np.inf, 0.1, 0.2, 0.3])).tolist()
      [inf, inf, 0.2, 0.3]
    """
    backed_off = scores.copy()
    backed_off[1:][~np.isfinite(scores[:-1])] = np.inf
    return backed_off if np.isfinite(backed_off).any() else scores


def all_finite(params: PyTree) -> np.ndarray:
    """Per rate (leading axis), whether every chain's every parameter is finite."""
    flags = [
        np.isfinite(np.asarray(x)).reshape(x.shape[0], -1).all(1) for x in jax.tree.leaves(params)
    ]
    return np.logical_and.reduce(flags)


def grid_beyond(candidates: tuple[float, ...], upward: bool) -> tuple[float, ...]:
    """The grid of as many rates, the same factor apart (largest first), moved past its largest
    rate (``upward``) or its smallest; it shares that edge rate, so its score is measured again
    beside the new rates, on the same random numbers.

    Example:
      >>> grid_beyond((9.0, 3.0, 1.0), upward=True), grid_beyond((9.0, 3.0, 1.0), upward=False)
      ((81.0, 27.0, 9.0), (1.0, 0.3333333333333333, 0.1111111111111111))
    """
    factor, k = candidates[0] / candidates[1], len(candidates)
    if upward:
        return tuple(candidates[0] * factor ** (k - 1 - i) for i in range(k))
    return tuple(candidates[-1] / factor**i for i in range(k))


def merged(tried: RateChoice, new: RateChoice) -> RateChoice:
    """``new``'s choice, reported over the rates of both searches (largest first; a rate in both
    has ``new``'s score) and at the edge only where it is the largest or smallest of all."""
    table = {**_table(tried), **_table(new)}
    rates = sorted(table, reverse=True)
    errors = tuple(table[r][1] for r in rates) if tried.errors and new.errors else ()
    return new._replace(
        candidates=tuple(rates),
        scores=tuple(table[r][0] for r in rates),
        errors=errors,
        at_edge=new.learning_rate in (rates[0], rates[-1]),
    )


def _table(choice: RateChoice) -> dict[float, tuple[float, float]]:
    """``{rate: (score, error)}``; errors ``nan`` where the criterion has none."""
    errors = choice.errors or (float("nan"),) * len(choice.candidates)
    return dict(zip(choice.candidates, zip(choice.scores, errors, strict=True), strict=True))


def search_beyond_edges(
    search_fn: Callable[[tuple[float, ...]], tuple[RateChoice, Any]],
    candidates: tuple[float, ...],
    extensions: int = MAX_EXTENSIONS,
) -> tuple[RateChoice, Any]:
    """``search_fn(candidates)``, searched again on the grid past its edge
    (:func:`grid_beyond`) while its choice is the largest rate tried (or, from the first grid,
    the smallest), at most ``extensions`` times, and reported over every rate tried
    (:func:`merged`); a warning where the final choice is still at the edge.

    A grid placed from the curvature at the start can miss a network's best rate: its curvature
    adapts to the rate. RMSprop on the UCI concrete data chose the grid's largest rate, 0.0044
    (test RMSE 8.76), where 0.0131, one step above, gave 7.68 (searched past the edge, the virial
    still preferred 0.0044: the search can only find what its criterion scores better).

    Args:
      search_fn: ``candidates -> (choice, states)``, one search over the rates given (largest
        first), on the same random numbers at every call.
      candidates: the first grid, largest first, a constant factor apart.
      extensions: the most grids searched past the first.

    Returns:
      ``(choice, states)`` of the last search, its choice reported over every rate tried.

    Example:
      >>> def search_fn(c):  # the best rate is 30: at the edge of the first grid
      ...     scores = tuple(abs(np.log(r / 30.0)) for r in c)
      ...     best = int(np.argmin(scores))
      ...     return chosen(c, scores, best, 64), None
      >>> choice, _ = search_beyond_edges(search_fn, (9.0, 3.0, 1.0))
      >>> choice.learning_rate, choice.candidates, choice.at_edge
      (27.0, (81.0, 27.0, 9.0, 3.0, 1.0), False)
    """
    choice, states = search_fn(candidates)
    report, direction = choice, None
    for _ in range(extensions if len(candidates) > 1 else 0):
        best = candidates.index(choice.learning_rate)
        edge = "up" if best == 0 else "down" if best == len(candidates) - 1 else None
        if edge is None or direction not in (None, edge):
            break
        direction, beyond = edge, grid_beyond(candidates, upward=edge == "up")
        try:
            new, new_states = search_fn(beyond)
        except FloatingPointError:  # every rate past the edge diverged: the edge stands
            break
        candidates, choice, states, report = beyond, new, new_states, merged(report, new)
    report = backed_off(report)
    warn_at_edge(report)
    return report, states


def backed_off(choice: RateChoice) -> RateChoice:
    """``choice`` one rate lower where it is next below a diverged rate and a lower rate did not
    diverge (:func:`away_from_divergence` over every rate tried): after a search past the edge,
    the edge rate can be the only one of its grid left below the diverged rates, and there it is
    at the chain's stability edge. Identity on the digits chose 0.175 so, next to 0.525
    (diverged); over a whole run its test log-likelihood was −0.43, against −0.16 at 0.0583.
    The states :func:`search_beyond_edges` returns stay those of the rate searched; where they
    continue a burn-in (:func:`sgrld.chains.step_size.resolve_learning_rate`), they continue it
    at the lower rate.

    Example:
      >>> c = RateChoice(3.0, (9.0, 3.0, 1.0), (float("inf"), 0.1, 0.2), 64, False)
      >>> backed_off(c).learning_rate
      1.0
    """
    scores = np.asarray(choice.scores)
    i = choice.candidates.index(choice.learning_rate)
    if np.isfinite(away_from_divergence(scores)[i]) or not np.isfinite(scores[i + 1 :]).any():
        return choice
    lower = i + 1 + int(np.argmax(np.isfinite(scores[i + 1 :])))  # the next rate that ran
    rates = choice.candidates
    return choice._replace(
        learning_rate=rates[lower], at_edge=rates[lower] in (rates[0], rates[-1])
    )
