"""What an SGRLD run guarantees about the law it samples, in one line, and the warnings of the
combinations known to be biased.

A run is in one of three cases (docs/right-by-default.md):

* **exact**: the metric is constant in the kept samples, frozen after a warm-up (``adapt_until``)
  or not adaptive at all: a constant preconditioner needs no Γ, and the chain samples the target
  up to the step's discretisation error;
* **corrected**: the metric adapts throughout and Γ̂ is added with a share c, fixed
  (``correction_scale``) or estimated online (``"auto"``, :mod:`sgrld.parts.share`);
* **uncorrected**: the metric adapts throughout without Γ: in the small-step limit the chain
  samples ``p·G^{1−c}`` with c = 0, not p (Rensmeyer & Niggemann, Sec. 3.1).

Example:
  >>> import sgrld
  >>> a = Adaptation(sgrld.metrics.rmsprop(), 500, True, "none", 1.0)
  >>> guarantee(a)
  'exact: metric frozen at step 500 (window average of the statistic)'
  >>> guarantee(a._replace(adapt_until=None))
  'uncorrected: stationary density p·G^{1−c}, c = 0 (Rensmeyer & Niggemann)'
  >>> guarantee(a._replace(correction="hutchinson"))  # Γ of the frozen metric is 0
  'exact: metric frozen at step 500 (window average of the statistic); Γ only before the freeze'
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.metrics.metric import INVERSE_SQRT, Metric

AUTO = "auto"
"""``adapt_until="auto"``: adapt during the first three quarters of the burn-in, then freeze."""


class BiasWarning(RuntimeWarning):
    """A sampler setting known to sample a biased law; the message names the better setting."""


class FrozenIdentityWarning(RuntimeWarning):
    """A frozen adaptive metric that is the identity: the run samples as SGLD, at the metric's
    cost (:func:`identity_clause`)."""


class Adaptation(NamedTuple):
    """How an SGRLD sampler adapts its metric and corrects for it (``Sampler.adaptation``).

    Attributes:
      metric: the metric.
      adapt_until: the first frozen step, ``None`` (adapts throughout) or ``"auto"`` (not yet
        resolved: :func:`sgrld.sample` and the runner resolve it from their burn-in).
      averaged: frozen at the window average of the statistic (``"auto"``), not its last value.
      correction: the correction's mode (:data:`sgrld.parts.correction.MODES`).
      scale: the correction's share, a float or ``"auto"``.
      resolve: ``resolve(burn_in, start) -> Sampler`` with ``"auto"`` resolved (``None`` once
        resolved).
      gamma_kick_limit: the sampler's ``gamma_kick_limit`` (``None``: Γ̂'s kick untamed).
      learning_rate: the sampler's ``learning_rate``, a number or a schedule (``None``: not known).
    """

    metric: Metric
    adapt_until: int | str | None
    averaged: bool
    correction: str
    scale: float | str
    resolve: Callable[[int, int], Any] | None = None
    gamma_kick_limit: float | None = None
    learning_rate: float | Callable[[Any], Any] | None = None


def auto_freeze(metric: Metric, burn_in: int, start: int = 0) -> tuple[int | None, int | None]:
    """``(adapt_until, average_from)`` of ``adapt_until="auto"`` for a run of ``burn_in`` steps
    from step ``start``: adapt over the first three quarters of the burn-in, average the statistic
    over its last sixth (from 5/8 of the burn-in), freeze at that average and let the chains relax
    over the last quarter. The window lies late so that the chains' way to the typical set stays
    out of it: a window in the second quarter still held the transient's large gradients on the
    quickstart's regression started 40 posterior sd from the mode, and the frozen metric cut the
    ESS tenfold (RESULTS §29).

    A metric that is not adaptive gives ``(None, None)``; so does a burn-in under two steps from
    step 0 (with a :class:`BiasWarning`); a continued run (``start > 0``) without burn-in stays
    frozen from ``start`` on.

    Example:
      >>> import sgrld
      >>> auto_freeze(sgrld.metrics.rmsprop(), 1000)
      (750, 625)
    """
    if metric.statistic is None:
        return None, None
    if int(burn_in) // 2 < 1:
        if start > 0:
            return int(start), None
        _warn_once(
            "short-burn-in",
            f'adapt_until="auto" with burn_in={burn_in}: no burn-in to adapt in, so the metric '
            "adapts throughout (biased without Γ); give a burn-in of at least a few hundred "
            "steps, or an explicit adapt_until",
        )
        return None, None
    until = (3 * int(burn_in)) // 4
    return int(start) + until, int(start) + min((5 * int(burn_in)) // 8, until - 1)


def guarantee(adaptation: Adaptation | None, share_means: Any = None) -> str:
    """The run's guarantee in one line (module docstring).

    Args:
      adaptation: the sampler's :class:`Adaptation` (``None``: a sampler that does not adapt a
        metric, e.g. SGHMC without one).
      share_means: ``info.share_mean`` of the kept steps (``correction_scale="auto"``), any shape.

    Returns:
      ``"exact: ..."``, ``"corrected: ..."`` or ``"uncorrected: ..."``.
    """
    if adaptation is None or adaptation.metric.statistic is None:
        return "exact: constant metric (not adaptive)"
    a = adaptation
    # Γ of a frozen metric is 0: a correction asked for acts only while the metric adapts.
    gamma = "" if a.correction == "none" or a.scale == 0.0 else "; Γ only before the freeze"
    if a.adapt_until == AUTO:
        return (
            "exact: metric frozen at 3/4 of the burn-in (window average of the statistic)" + gamma
        )
    if a.adapt_until is not None:
        how = " (window average of the statistic)" if a.averaged else ""
        return f"exact: metric frozen at step {a.adapt_until}{how}{gamma}"
    tamed = "" if a.gamma_kick_limit is None else f", kick tamed to {a.gamma_kick_limit:g} noise sd"
    if a.correction != "none" and a.scale == AUTO:
        if share_means is None or np.size(share_means) == 0:
            return f"corrected: Γ with share ĉ estimated online{tamed}"
        c = np.asarray(share_means, np.float64)
        share = f"mean {c.mean():.2f}, range {c.min():.2f}–{c.max():.2f}"
        return f"corrected: Γ with share ĉ ({share}){tamed}"
    if a.correction != "none" and a.scale != 0.0:
        return f"corrected: Γ with share c = {float(a.scale):g} (fixed){tamed}"
    return "uncorrected: stationary density p·G^{1−c}, c = 0 (Rensmeyer & Niggemann)"


_WARNED: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, BiasWarning, stacklevel=4)


def warn_if_biased(adaptation: Adaptation) -> None:
    """One :class:`BiasWarning` per process and case for a continuously adapting metric whose Γ
    is known to leave a bias: the full Γ under γ_t = 1/√t or a decay ≥ 0.99 (the average lags θ:
    it over-corrects), and any Γ of a statistic that vanishes at the mode (RMSprop, Wenzel,
    Shampoo: no share of Γ is right there)."""
    a, m = adaptation, adaptation.metric
    if a.adapt_until is not None or a.correction == "none" or m.statistic is None:
        return
    slow = m.decay == INVERSE_SQRT or (isinstance(m.decay, float) and m.decay >= 0.99)
    if m.statistic_order == 2:
        _warn_once(
            "singular",
            "a continuously adapted metric whose statistic vanishes at the mode (RMSprop, "
            "Wenzel, Shampoo) stays biased with Γ at any share; use adapt_until (warm-up then "
            "freeze: adapt_until='auto' with sgrld.sample or the runner), or a Fisher metric",
        )
    elif slow and a.scale != AUTO and float(a.scale) == 1.0:
        _warn_once(
            "lagging",
            f"the full Γ with decay {m.decay!r} over-corrects (the average lags θ); use "
            "correction_scale='auto' (the share the dynamics need) or adapt_until",
        )


def warn_if_adapting_on_minibatches(adaptation: Adaptation | None, batch_size: int, n: int) -> None:
    """One :class:`BiasWarning` per process for a metric that adapts throughout on minibatches
    (``batch_size < n``): each step's statistic holds that step's own minibatch gradient, so the
    preconditioner correlates with the gradient noise it scales, a bias that Γ (a function of θ)
    does not see at any share. At batch 32 of australian's 690 rows and decay 0.9, DOP's whitened
    mean error against NUTS was 0.62 without Γ, 0.60 with ĉ and with the full Γ, and 0.07 frozen
    after the burn-in (RESULTS §29)."""
    a = adaptation
    if a is None or a.metric.statistic is None or a.adapt_until is not None or batch_size >= n:
        return
    _warn_once(
        "minibatch",
        f"the metric adapts throughout on minibatches of {batch_size} of {n}: it correlates with "
        "each step's gradient noise, a bias that no share of Γ removes; use adapt_until "
        "(warm-up then freeze: adapt_until='auto', the default)",
    )


def warn_if_minibatch_noise_dominates(
    adaptation: Adaptation | None, batch_size: int, n: int
) -> None:
    """One :class:`BiasWarning` per process for a Fisher metric whose step carries more minibatch
    noise than Langevin noise: ``ρ = lr·N/(2B) > 1``, lr the learning rate at step 0.

    A Fisher metric's J is the per-example second moment of the gradient, so in a coordinate the
    data inform (J_i ≫ ε) the drift's minibatch noise ``lr·G⁻¹(g̃ − ḡ)`` has variance
    ``lr²·(J_i − ḡ_i²)/(B·(J_i + ε)²)`` against the injected ``2·lr/(N·(J_i + ε))``: a ratio of
    about ρ. Above 1 the chain samples a wider law than the posterior whatever its correction (Γ
    is a function of θ, not of the minibatch). On MNIST (DOP, B = 100, N = 50,000) at lr = 0.1,
    ρ = 25, the measured median ratio was 15, the weights drifted outward with and without Γ,
    and the frozen metric diverged (RESULTS §29)."""
    a = adaptation
    if a is None or a.learning_rate is None or a.metric.observation_fn is None or batch_size >= n:
        return
    lr = a.learning_rate
    lr = float(lr(0)) if callable(lr) else float(lr)
    ratio = lr * n / (2 * batch_size)
    if ratio > 1:
        _warn_once(
            "minibatch-noise",
            f"learning_rate·N/(2·batch_size) = {ratio:.3g} with a Fisher metric: the step's "
            f"minibatch noise has about {ratio:.3g} times the variance of the Langevin noise in "
            "the directions the data inform, so the chain samples a wider law than the "
            f"posterior, with or without Γ; use learning_rate <= 2·batch_size/N = "
            f"{2 * batch_size / n:.3g}, a larger batch, or a decaying schedule",
        )


IDENTITY_TOLERANCE = 0.01
"""A frozen metric within this relative distance of the identity is reported as the identity."""


def distance_to_identity(metric: Metric, metric_states: Any, params: Any) -> float:
    """``max over chains of ‖G⁻¹r − r‖/‖r‖`` for a fixed sign pattern ``r`` shaped like
    ``params``: how far the metrics (``metric_states`` and ``params`` with a leading chain axis)
    are from the identity, i.e. from SGLD.

    Monge's statistic is a moving average of the mean gradient, about 0 at stationarity, so the
    metric frozen after the burn-in is close to the identity: a user's 4 chains of frozen Monge
    on a Bayesian MLP regression gave σ within 0.3 % of SGLD's with the same seed.

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> m = sgrld.metrics.monge(alpha2=1.0, decay=0.0)
      >>> s = m.update(m.init(jnp.zeros(2)), jnp.array([0.1, 0.0]))  # G⁻¹ = I − g gᵀ/(1 + |g|²)
      >>> one = lambda x: jax.tree.map(lambda a: a[None], x)
      >>> round(distance_to_identity(m, one(s), one(jnp.zeros(2))), 5)
      0.007
    """

    def one(state, like):
        signs = jax.tree.map(
            lambda x: jnp.where(jnp.arange(x.size).reshape(x.shape) % 2 == 0, 1.0, -1.0), like
        )
        out = metric.inv(state, signs)
        pairs = zip(jax.tree.leaves(out), jax.tree.leaves(signs), strict=True)
        num = sum(jnp.sum((a - b) ** 2) for a, b in pairs)
        return jnp.sqrt(num / sum(x.size for x in jax.tree.leaves(signs)))

    return float(np.max(np.asarray(jax.vmap(one)(metric_states, params))))


def identity_clause(metric: Metric, metric_states: Any, params: Any) -> str:
    """``""``, or where the frozen metric is within :data:`IDENTITY_TOLERANCE` of the identity
    a clause for the guarantee's line and a :class:`FrozenIdentityWarning` saying so: the run
    samples as SGLD does, at the metric's cost."""
    if metric.statistic is None:
        return ""
    distance = distance_to_identity(metric, metric_states, params)
    if distance >= IDENTITY_TOLERANCE:
        return ""
    warnings.warn(
        f"the frozen metric is the identity to {100 * distance:.2g} % (its statistic is about 0 "
        "at stationarity, as Monge's mean gradient is): the kept samples are SGLD's, at the "
        "metric's cost; use metrics.identity(), or adapt_until='never' with "
        "correction='hutchinson' to keep the adaptive metric",
        FrozenIdentityWarning,
        stacklevel=3,
    )
    return f"; the frozen metric is the identity to {100 * distance:.2g} % (SGLD)"
