"""Which rate the Stein virial's scores choose (:mod:`sgrld.chains.step_size`): the largest within
a fixed tolerance, then, where the run's length is known, the one of least predicted error.

**The tolerance.** D's noise-corrected estimate is about ``b²/4`` for a variance off by a share
``b`` (``ρ(1 + b) ≈ b²/4``). The largest rate with ``D ≤`` :data:`TOLERANCE` by two jackknife
standard errors is chosen (the variance within about 10 %); where none is, the rate of least D.

**The run's length.** A run's error in a variance is its bias ``b`` and its Monte Carlo error
``σ``, and ``E ρ(v̂) ≈ (b² + σ²)/4``: a bias below the run's own noise costs little, one above it
dominates. A 10 % tolerance suits a short run and is too loose for a long one (on N(0, 1), 8,000
steps of 4 chains: lr 0.222 inflates the variance 12.5 %, and passes; 0.074 inflates it 3.8 %,
about the run's σ, and gave a third of the error). A pilot of a few hundred steps cannot resolve
a bias of a few percent, so the bias is extrapolated: SGLD's discretisation and minibatch biases
are first order in the rate, so ``D ∝ lr²``, and the constant is read from the nearest larger
rate whose D the pilot resolves. The run's σ² at each rate is the pilot's own variance of ``v̂``
(between its chains) scaled by the pilot's window over the run's length (the chains the same).
From the tolerance's choice down, the rate of least predicted ``(b² + σ²)/4`` is chosen
(:func:`for_the_run`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np

from sgrld.chains.rate_choice import RateChoice, away_from_divergence

TOLERANCE = 0.0025
"""The largest rate with ``D <= TOLERANCE`` is chosen: ρ(1.1) = 0.0023, so the chains' variance
within about 10 %, coordinate by coordinate, in root mean square."""


def within(scores: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """Per rate, whether D is within :data:`TOLERANCE` by two standard errors (at most
    ``3·TOLERANCE``)."""
    return scores <= TOLERANCE + 2 * np.minimum(errors, TOLERANCE)


def best_within(scores: np.ndarray, errors: np.ndarray) -> int:
    """The largest rate (scores largest first) whose D is within :data:`TOLERANCE` by two
    standard errors, at most ``3·TOLERANCE``; else the rate of least D; a rate next below a
    diverged one only where nothing else is left (:func:`away_from_divergence`).

    Example:
      >>> se = np.array([np.inf, 0.002, 0.002, 0.002])
      >>> best_within(np.array([np.inf, 0.001, 0.03, 0.012]), se)
      3
      >>> best_within(np.array([1e6, 0.02]), np.array([1e6, 0.01]))  # noisy: 1e6 ± 1e6 is no pass
      1
    """
    scores = away_from_divergence(scores)
    passed = np.flatnonzero(within(scores, errors))
    return int(passed[0]) if passed.size else int(np.argmin(scores))


def for_the_run(
    rates: np.ndarray,
    scores: np.ndarray,
    errors: np.ndarray,
    noise: np.ndarray,
    best: int,
    share: float,
) -> int:
    """From ``best`` (:func:`best_within`) down, the rate of least predicted error of the run,
    ``b²/4 + σ²/4``: its bias term extrapolated from the nearest larger rate whose D is resolved
    (over two standard errors; ``D ∝ lr²``), its noise term ``σ²`` the pilot's ``noise`` (the
    mean over coordinates of ``v̂``'s variance) times ``share`` (the pilot's window over the run's
    steps), at least ``best``'s scaled by ``1/lr`` (a Langevin chain's autocorrelation time:
    where it is not short against the window, the window understates the noise). A rate that fails
    the tolerance ends the descent: its chains did not settle in the pilot's window, and its
    run's noise is then more than the pilot shows (a looser bound, ``D ≤ 0.01``, took the
    australian BLR's Identity at full batch from 1.53 to 0.51, and its covariance error from
    0.34 to 0.50). ``best`` stands where no larger rate's D is resolved below the diverged ones:
    there is no bias to extrapolate.

    Example:
      >>> rates = np.array([0.667, 0.222, 0.074, 0.025])  # N(0, 1): inflation 50, 12.5, 4, 1 %
      >>> scores = np.array([0.04, 0.0035, 0.0004, 0.0])
      >>> errors = np.full(4, 0.001)
      >>> noise = 4 / (rates * 1000)  # 1,000 draws in the window: Var θ² = 2, τ ≈ 1/lr
      >>> for_the_run(rates, scores, errors, noise, 1, 1.0)  # a run as long as the window
      1
      >>> for_the_run(rates, scores, errors, noise, 1, 1 / 32)  # 32 times as long: 0.074
      2
    """
    up = best - 1  # the nearest larger rate whose D is resolved
    while up >= 0 and np.isfinite(scores[up]) and scores[up] <= 2 * errors[up]:
        up -= 1
    if up < 0 or not np.isfinite(scores[up]):
        return best
    settled, last = within(scores, errors), best
    while last + 1 < len(rates) and settled[last + 1]:
        last += 1
    tried = np.arange(best, last + 1)
    slower = noise[best] * rates[best] / rates[tried]  # τ ∝ 1/lr, which a short window hides
    run_noise = share * np.maximum(noise[tried], slower)
    predicted = scores[up] * (rates[tried] / rates[up]) ** 2 + run_noise / 4
    return int(tried[np.argmin(predicted)])


def simplest_passing(choices: Mapping[float, RateChoice]) -> float:
    """The value, among one search per value of a metric's option (Monge's α²), that the Stein
    virial keeps: the smallest whose chosen rate is within the tolerance by two standard errors
    (for α², the nearest the identity), else the one whose chosen rate's D is least. The virial
    scores a rate's bias, not what a metric gains in mixing, so it cannot rank two values that
    both pass; Monge's metric is the identity's where the mean gradient vanishes, in the typical
    set, and slower along the gradient elsewhere (conjugate regression on UCI concrete, σ = 1,
    from 0: the identity's least D 0.82, α² = 0.1's 0.995, its chains stuck far from the mode).

    Example:
      >>> a = RateChoice(0.1, (0.3, 0.1), (0.5, 0.001), 64, False, (0.1, 0.001))
      >>> b = RateChoice(0.3, (0.3, 0.1), (0.002, 0.4), 64, False, (0.001, 0.1))
      >>> simplest_passing({0.1: a, 0.0: b}), simplest_passing({0.1: a})
      (0.0, 0.1)
      >>> simplest_passing({0.1: a._replace(scores=(0.5, 0.3)), 0.0: b._replace(scores=(0.4, 0.4))})
      0.1
    """

    def at_choice(choice: RateChoice) -> tuple[float, float]:
        i = choice.candidates.index(choice.learning_rate)
        return choice.scores[i], choice.errors[i]

    table = {value: at_choice(choice) for value, choice in choices.items()}
    passed = [v for v, (d, se) in table.items() if within(np.float64(d), np.float64(se))]
    return min(passed) if passed else min(table, key=lambda v: table[v][0])


def warn_if_none_within(choice: RateChoice) -> None:
    """A ``RuntimeWarning`` where no rate's D came within :data:`TOLERANCE` by two standard
    errors: the choice is then the least bad rate, not one whose chains reached the target's
    spread. On a network the weights rarely reach their posterior spread in a pilot (the
    australian set's 400-400 MLP: RMSprop's least D was 0.044, and its run diverged after the
    freeze); a validation split lets ``sgrld run`` choose on held-out data instead.

    Example:
      >>> import warnings
      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     warn_if_none_within(RateChoice(0.1, (0.3, 0.1), (0.2, 0.04), 64, False, (0.01, 0.01)))
      >>> "no rate tried came within" in str(caught[0].message)
      True
    """
    scores, errors = np.asarray(choice.scores), np.asarray(choice.errors)
    if errors.size != scores.size or within(scores, errors).any():
        return
    warnings.warn(
        f"learning_rate='auto': no rate tried came within the Stein virial's tolerance "
        f"({TOLERANCE:g}; least {np.min(scores):.3g} at lr {choice.learning_rate:.3g}): the "
        "chains did not reach the target's spread in the pilot, so the rate is the least bad "
        "one; give a longer burn-in, a validation split (sgrld run) or a number",
        RuntimeWarning,
        stacklevel=3,
    )
