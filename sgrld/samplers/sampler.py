"""Stochastic-gradient Riemannian Langevin dynamics (SGRLD), assembled from parts.

A sampler is a :class:`~sgrld.samplers.contract.Sampler`, a NamedTuple ``(init, step)`` with
``step(key, state, batch) -> (state, info)`` (BlackJAX's contract). :func:`riemannian_langevin`
assembles one from parts, each a small pure piece that exists once:

* a **gradient estimate** (:mod:`sgrld.parts.gradients`): Û/N, its gradient and the metric's
  observation;

* a **metric** (:mod:`sgrld.metrics`): ``G⁻¹`` and ``G^{−1/2}`` from a moving average of a
  gradient statistic;
* a **correction** (:mod:`sgrld.parts.correction`): the gradient, the metric's update and Γ̂ of a
  step, with its Hessian-vector products, reduction and warm-up;
* a **preconditioner** (:mod:`sgrld.parts.preconditioning`): drift and noise through the metric,
  with safeguards as wrappers (:func:`~sgrld.parts.preconditioning.limit_drift`) and Γ̂'s kick
  tamed by the noise (:func:`~sgrld.parts.preconditioning.tame_gamma`);
* an **integrator** (:mod:`sgrld.parts.integrators`): its state, the noise draw and the update
  (Euler–Maruyama; :func:`~sgrld.parts.integrators.momentum` gives SGHMC's dynamics in G).

:func:`sgrld` is the convenient constructor: options by name, validated, turned into parts.

Extension points (none needs an edit of the existing samplers):

* a new metric, e.g. from per-example gradients: a :class:`~sgrld.metrics.Metric` (its statistic
  makes Γ̂ available through the same corrections);
* a new sampler: a function returning :class:`Sampler` with its own state NamedTuple, built
  from :mod:`sgrld.samplers.assembly` (the options check, an
  :class:`~sgrld.samplers.assembly.Assembly` of a correction, a preconditioner and an integrator,
  :func:`~sgrld.samplers.assembly.advance`; the integrator's state whole in the state's field
  ``integrator``), its gradient from
  :func:`~sgrld.parts.gradients.gradient_estimate` and its ``info`` from
  :func:`~sgrld.samplers.info.step_info` (a type of its own starts with
  :class:`~sgrld.samplers.info.StepInfo`'s fields); :func:`sgrld.sample` and the experiment runner
  run any such sampler whose ``info`` has ``is_finite`` and ``nonfinite_leaf`` (:func:`sgrld.sghmc`
  and :func:`sgrld.sgnht` are built this way);
* a new safeguard: a wrapper of a :data:`~sgrld.parts.preconditioning.Precondition`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.metric import Metric, MetricState
from sgrld.numerics.checks import check_params, is_zero
from sgrld.numerics.pytrees import PyTree
from sgrld.numerics.schedules import Schedule
from sgrld.parts import correction as corrections
from sgrld.parts.integrators import Integrator, euler_maruyama
from sgrld.parts.preconditioning import (
    FROZEN_DRIFT_LIMIT,
    FROZEN_DRIFT_SDS,
    GAMMA_KICK_LIMIT,
    MAX_DRIFT_NORM,
    by_metric,
    limit_drift,
)
from sgrld.parts.share import share_init, share_mean
from sgrld.samplers.assembly import (
    COMMON_BOUNDS,
    Assembly,
    Options,
    advance,
    check_metric,
    check_options,
)
from sgrld.samplers.contract import Sampler
from sgrld.samplers.freezing import adapting_estimate, check_adaptation
from sgrld.samplers.guarantee import AUTO, Adaptation, auto_freeze, warn_if_biased
from sgrld.samplers.info import SGRLDShareInfo, StepInfo, step_info
from sgrld.samplers.rate_search import searchable

BOUNDS = {
    **COMMON_BOUNDS,
    "num_probes": corrections.NUM_PROBES,
    "correction_warmup": corrections.WARMUP,
    "max_drift_norm": MAX_DRIFT_NORM,
    "gamma_kick_limit": GAMMA_KICK_LIMIT,
    "frozen_drift_limit": FROZEN_DRIFT_LIMIT,
}
"""The ranges of :func:`sgrld`'s numeric options, as its parts check them."""


class SGRLDState(NamedTuple):
    """State of an SGRLD chain.

    Attributes:
      step: int32 number of steps taken.
      params: the current sample θ_t.
      metric_state: the metric's state.
      stat_sum: the sum of the statistic over the freeze's averaging window (``adapt_until="auto"``;
        ``()`` otherwise).
      share: the moments of the share ĉ (``correction_scale="auto"``,
        :class:`sgrld.parts.share.ShareState`; ``()`` otherwise).
      integrator: the integrator's state (``()`` for Euler–Maruyama; a momentum for
        :func:`sgrld.parts.integrators.momentum`).
    """

    step: jax.Array
    params: PyTree
    metric_state: MetricState
    stat_sum: PyTree = ()
    share: PyTree = ()
    integrator: PyTree = ()


def _checked_limit(name: str, limit, bound) -> float | None:
    """``limit`` as a float (``None`` stays ``None``), or ``ValueError`` naming ``name``."""
    if limit is None:
        return None
    number = isinstance(limit, int | float) and not isinstance(limit, bool)
    if not (number and bound.holds(float(limit))):
        raise ValueError(f"{name} must be None or a number {bound.text()}, got {limit!r}")
    return float(limit)


def _check_gamma_kick_limit(limit, correction):
    if _checked_limit("gamma_kick_limit", limit, GAMMA_KICK_LIMIT) is None:
        return
    if correction.mode == "none":
        raise ValueError(
            "gamma_kick_limit tames Γ̂'s kick; it needs correction='hutchinson' or 'exact'"
        )


def _frozen_drift_limit(limit, metric: Metric, adapt_until: int | None) -> float | None:
    """``frozen_drift_limit`` checked, or ``None`` where no metric is frozen or it is ``inf``."""
    limit = _checked_limit("frozen_drift_limit", limit, FROZEN_DRIFT_LIMIT)
    frozen = adapt_until is not None and metric.statistic is not None
    return limit if frozen and limit != float("inf") else None


class _Parts(NamedTuple):
    """The assembled parts of an SGRLD step."""

    options: Options
    estimate: Callable
    assembly: Assembly
    corrected: bool
    adaptive: bool
    drift_limit: float | None = None
    adapt_until: int | None = None


def _init(
    metric: Metric, integrator: Integrator, averaged: bool, adaptive: bool, params: PyTree
) -> SGRLDState:
    params = check_params(params)
    metric_state = metric.init(params)
    stat_sum = jax.tree.map(jnp.zeros_like, metric_state.stat) if averaged else ()
    share = share_init(params) if adaptive else ()
    step = jnp.zeros((), jnp.int32)
    return SGRLDState(step, params, metric_state, stat_sum, share, integrator.init(params))


def _step(
    parts: _Parts, key: jax.Array, state: SGRLDState, batch: PyTree
) -> tuple[SGRLDState, StepInfo | SGRLDShareInfo]:
    """One SGRLD step: estimate (gradient, metric, Γ̂), precondition, integrate, report."""
    noise_key, probe_key = jax.random.split(key)
    params, step = state.params, state.step
    lr = jnp.asarray(parts.options.schedule(step), jnp.float32)
    est, stat_sum = parts.estimate(probe_key, params, batch, state)
    moving = est if parts.corrected else est._replace(gamma=None)
    temperature = parts.options.temperature(step)
    limit = None
    if parts.drift_limit is not None:
        limit = jnp.where(step >= parts.adapt_until, parts.drift_limit, jnp.inf)
    new_params, moved, d = advance(
        parts.assembly,
        noise_key,
        params,
        state.integrator,
        moving,
        lr,
        temperature,
        drift_limit=limit,
    )
    info = step_info(
        est.value,
        est.grad,
        lr,
        new_params,
        gamma=d.gamma,
        fallback=d.fallback,
        metric_fallbacks=est.metric_state.fallbacks,
    )
    if parts.adaptive:
        info = SGRLDShareInfo(*info, share_mean(est.share))
    new_state = SGRLDState(step + 1, new_params, est.metric_state, stat_sum, est.share, moved)
    return new_state, info


def riemannian_langevin(
    potential_fn: Callable[[PyTree, PyTree], jax.Array],
    metric: Metric,
    *,
    correction: corrections.Correction | None = None,
    integrator: Integrator | None = None,
    learning_rate: float | Schedule,
    num_data: int,
    temperature: float | Schedule = 1.0,
    max_drift_norm: float | None = None,
    adapt_until: int | None = None,
    prior_in_metric: bool = True,
    average_from: int | None = None,
    gamma_kick_limit: float | None = None,
    frozen_drift_limit: float | None = None,
) -> Sampler:
    """An SGRLD sampler from its parts; :func:`sgrld` documents the update and the arguments.

    Args:
      potential_fn: ``(params, batch) -> Û(θ)/N``.
      metric: the :class:`~sgrld.metrics.Metric`.
      correction: a :class:`~sgrld.parts.correction.Correction` (``None``: no correction).
      integrator: an :class:`~sgrld.parts.integrators.Integrator` (``None``: Euler–Maruyama).
      learning_rate: ``lr = h·N``, a float or a schedule ``step -> lr``.
      num_data: N.
      temperature: T ≥ 0, or a schedule ``step -> T`` (:mod:`sgrld.numerics.schedules`).
      max_drift_norm: wrap the preconditioner in :func:`~sgrld.parts.preconditioning.limit_drift`.
      adapt_until: freeze the metric after this many steps.
      prior_in_metric: whether the prior's gradient enters the metric's statistic.
      average_from: freeze the metric at the average of its statistic over the steps
        ``[average_from, adapt_until)`` (cache refreshed), not at its last value; ``None``: last.
      gamma_kick_limit: tame Γ̂'s kick to this many noise sds per coordinate
        (:func:`~sgrld.parts.preconditioning.tame_gamma`); needs a correction.
      frozen_drift_limit: once the metric is frozen (``adapt_until``), clip the drift step to
        this many noise sds along each whitened direction
        (:func:`~sgrld.parts.preconditioning.clip_drift`);
        ``None``, no ``adapt_until`` or a metric that does not adapt: never.

    Returns:
      A :class:`Sampler` whose ``step`` returns :class:`SGRLDState` and :class:`~sgrld.StepInfo`.
    """
    options = check_options(
        potential_fn, learning_rate=learning_rate, num_data=num_data, temperature=temperature
    )
    check_metric(metric)
    check_adaptation(adapt_until, average_from)
    correction = correction or corrections.none()
    _check_gamma_kick_limit(gamma_kick_limit, correction)
    if is_zero(temperature) or metric.statistic is None or correction.scale == 0.0:
        correction = corrections.none()  # Γ̂ would be multiplied by 0: not computed
    precondition = by_metric(metric)
    if max_drift_norm is not None:
        precondition = limit_drift(precondition, max_drift_norm)
    integrator = integrator or euler_maruyama()
    parts = _Parts(
        options=options,
        estimate=adapting_estimate(
            correction, potential_fn, prior_in_metric, metric, adapt_until, average_from
        ),
        assembly=Assembly(
            metric, correction, precondition, integrator, options.num_data, gamma_kick_limit
        ),
        corrected=correction.mode != "none",
        adaptive=correction.adaptive,
        drift_limit=_frozen_drift_limit(frozen_drift_limit, metric, adapt_until),
        adapt_until=adapt_until,
    )
    init = partial(_init, metric, integrator, average_from is not None, correction.adaptive)
    return Sampler(init, partial(_step, parts))


@searchable(lambda arguments: arguments["metric"])
def sgrld(
    potential_fn: Callable[[PyTree, PyTree], jax.Array],
    metric: Metric,
    *,
    learning_rate: float | Schedule | str,
    num_data: int,
    temperature: float | Schedule = 1.0,
    adapt_until: int | str | None = AUTO,
    correction: str | None = AUTO,
    correction_scale: float | str = AUTO,
    num_probes: int = 1,
    correction_warmup: int | None = None,
    prior_in_metric: bool = True,
    max_drift_norm: float | None = None,
    gamma_kick_limit: float | None = None,
    frozen_drift_limit: float | None = FROZEN_DRIFT_SDS,
) -> Sampler:
    """SGRLD: an Euler–Maruyama step of Riemannian Langevin dynamics with a stochastic gradient.

    With ``g = ∇Û(θ_t)/N`` (the per-datum potential, :func:`sgrld.potential`), ``lr`` the learning
    rate, ``T`` the temperature and ``ξ ~ N(0, I)``::

        θ_{t+1} = θ_t − lr·G⁻¹g + c·(lr/N)·T·Γ̂(θ_t) + √(2·lr·T/N)·G^{−1/2}ξ,

    the step ``h = lr/N`` of ``dθ = −G⁻¹∇U dt + TΓ dt + √(2T) G^{−1/2} dW``, whose stationary
    density is ``p(θ|D)^{1/T}`` when ``c = 1`` and the metric follows θ. The metric's statistic is
    updated with ``g`` before it is applied; after ``adapt_until`` steps it is frozen (a constant
    preconditioner, Γ = 0: exact at any decay). Every run states which of these guarantees it has
    (:func:`sgrld.samplers.guarantee.guarantee`); settings known to be biased warn once.

    Args:
      potential_fn: ``(params, batch) -> Û(θ)/N``; :func:`sgrld.potential` builds one.
      metric: a :class:`~sgrld.metrics.Metric` from :mod:`sgrld.metrics`.
      learning_rate: ``lr = h·N``, a float or a schedule ``step -> lr``; ``"auto"``: chosen
        during the burn-in by the run that samples with it (:mod:`sgrld.chains.step_size`; the
        sampler's ``step`` refuses to run until then, :mod:`sgrld.samplers.rate_search`).
      num_data: N, the training-set size.
      temperature: T ≥ 0; 0 gives the deterministic preconditioned gradient step. A schedule
        ``step -> T`` (e.g. :func:`sgrld.numerics.schedules.cyclical`'s, 0 in each cycle's
        exploration) is evaluated at each step; Γ̂ is then computed at every step, also where T = 0.
      adapt_until: freeze the metric after this many steps; ``None``: adapt forever (biased
        without Γ); ``"auto"``: warm-up then freeze, resolved by the run that samples with it
        (:func:`sgrld.sample`, the runner) to ``3·burn_in // 4``, the metric frozen at the average
        of its statistic over the steps ``[5·burn_in // 8, 3·burn_in // 4)`` (its cache refreshed)
        so the kept samples come from a constant metric after a relaxation of a quarter of it.
        Stepped by hand (no burn-in is known), an ``"auto"`` sampler adapts forever, exactly as
        ``None``; :func:`riemannian_langevin` resolves nothing.
      correction: ``"none"`` (or ``None``: Γ dropped, as published), ``"hutchinson"``,
        ``"exact"`` (:mod:`sgrld.parts.correction`) or ``"auto"`` (the default): Γ before the
        freeze for Monge, none otherwise (:func:`~sgrld.parts.correction.resolved_mode`).
      correction_scale: ``"auto"`` (the default): the share of Γ the dynamics need, estimated
        online per leaf (:mod:`sgrld.parts.share`; ``info.share_mean`` reports it): 1 for a
        metric that follows θ (decay 0, or no moving average), towards 0 for an average that
        lags the chain. A number c fixes it: 1 is the correct sampler when the metric follows θ,
        ``1 − decay`` reproduces TensorFlow Probability's pSGLD (autodiff through the moving
        average), 0 equals ``"none"``.
      num_probes: Rademacher probes per step for ``"hutchinson"``.
      correction_warmup: metric updates before Γ is applied (``None``: the metric's ``warmup``,
        ``⌈3/(1 − decay)⌉``, so that D_S F is not evaluated at a statistic still near its initial
        value). The sampler is uncorrected during this transient.
      prior_in_metric: whether the prior's gradient enters the metric's statistic (the paper: yes;
        Marceau-Caron & Ollivier: no). ``False`` needs a potential from :func:`sgrld.potential`.
      max_drift_norm: if set, a step whose ‖G⁻¹g‖ exceeds it uses the identity metric scaled by
        ``max_drift_norm/‖g‖`` instead (Yu et al. App. A.4 use 1000 for Monge on the funnel);
        counted in ``info.drift_fallback``.
      gamma_kick_limit: if set (e.g. 1), each coordinate's Γ kick ``k = c·(lr/N)·T·Γ̂_i`` is
        tamed to ``k / (1 + |k|/(limit·σ_i))``, σ_i its noise sd
        (:func:`~sgrld.parts.preconditioning.tame_gamma`): unchanged where Γ's kick is small
        against the noise, bounded where Γ is stiff (a Fisher metric at small ε); the same
        dynamics as the step → 0. ``info.gamma_norm`` is then the tamed Γ̂'s. Needs a correction.
      frozen_drift_limit: once an adapting metric is frozen, the drift step is clipped to this
        many noise sds along each whitened direction (each coordinate for a diagonal metric;
        :func:`~sgrld.parts.preconditioning.clip_drift`; default
        :data:`~sgrld.parts.preconditioning.FROZEN_DRIFT_SDS`): a freeze cannot blow up a chain,
        and the steps of a chain in its typical set are unchanged; the same dynamics as the step
        → 0. Steps where it bound are counted in ``info.drift_fallback``. ``None`` or ``inf``:
        never clipped.

    Returns:
      A :class:`Sampler` with ``init(params) -> SGRLDState`` and
      ``step(key, state, batch) -> (SGRLDState, StepInfo)``, both pure and jit/vmap-able.

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, lambda w: -0.5 * w**2, 4)
      >>> s = sgrld.sgrld(u, sgrld.metrics.rmsprop(), learning_rate=0.01, num_data=4)
      >>> state = s.init(jnp.zeros(()))
      >>> state, info = jax.jit(s.step)(jax.random.key(0), state, jnp.ones(2))
      >>> int(state.step), bool(info.is_finite)
      (1, True)

    References:
      Girolami & Calderhead (2011); Patterson & Teh (2013); Ma et al. (2015); Yu et al. (TMLR 2023),
      Eq. 3; Rensmeyer & Niggemann.
    """
    correction = corrections.resolved_mode(correction, metric, adapt_until)
    build = partial(
        riemannian_langevin,
        potential_fn,
        metric,
        learning_rate=learning_rate,
        num_data=num_data,
        temperature=temperature,
        correction=corrections.from_mode(
            correction, scale=correction_scale, num_probes=num_probes, warmup=correction_warmup
        ),
        max_drift_norm=max_drift_norm,
        prior_in_metric=prior_in_metric,
        gamma_kick_limit=gamma_kick_limit,
        frozen_drift_limit=frozen_drift_limit,
    )
    about = Adaptation(
        metric,
        adapt_until,
        False,
        correction,
        correction_scale,
        gamma_kick_limit=gamma_kick_limit,
        learning_rate=learning_rate,
    )
    if adapt_until != AUTO:
        warn_if_biased(about)
        return build(adapt_until=adapt_until)._replace(adaptation=about)

    def resolve(burn_in: int, start: int = 0) -> Sampler:
        until, average_from = auto_freeze(metric, burn_in, start)
        resolved = about._replace(adapt_until=until, averaged=average_from is not None)
        warn_if_biased(resolved)
        return build(adapt_until=until, average_from=average_from)._replace(adaptation=resolved)

    return build(adapt_until=None)._replace(adaptation=about._replace(resolve=resolve))
