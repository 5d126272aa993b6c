"""SGHMC (Chen, Fox & Guestrin, 2014), plain or preconditioned by any sgrld metric with its Γ.

Hamiltonian dynamics with friction on ``z = (θ, r)``, ``H = U(θ) + ½rᵀr``, in the complete recipe
of Ma, Chen & Fox (2015), ``dz = −(D + Q)∇H dt + TΓ dt + √(2T·D) dW`` with
``Γ_i = Σ_j ∂(D + Q)_ij/∂z_j``, whose stationary density is ``exp(−H/T)``, so the θ-marginal is
``p(θ|D)^{1/T}``. The choice here, for a metric G(θ) and a friction C > 0::

    D = [[0, 0], [0, C·G⁻¹]],     Q = [[0, −G⁻¹], [G⁻¹, 0]],

gives ``dθ = G⁻¹r dt`` and ``dr = −G⁻¹∇U dt − C·G⁻¹r dt + TΓ_r dt + √(2TC)·G^{−1/2} dW``. Γ's
θ-rows vanish (the θ-row of D + Q is ``[0, −G⁻¹]``, which does not depend on r), and its r-rows
are ``Σ_j ∂(G⁻¹)_ij/∂θ_j`` (the r-row ``[G⁻¹, C·G⁻¹]`` depends on θ only through its first block),
exactly the Γ of Riemannian Langevin dynamics, so :mod:`sgrld.parts.correction` supplies it for
every metric. With ``G = I`` it is SGHMC; as ``C → ∞`` (time rescaled by C) it is SGRLD with the
same G.

The discretisation is Chen et al.'s Eq. 15 form: with a time step ``h``, ``v = h·r``,
``η = h²`` and ``α = h·C``, one semi-implicit Euler step is, in the README's conventions
(``lr = η·N``, ``g = ∇Û/N``, so ``η∇U = lr·g``)::

    v ← v − α·G⁻¹v − lr·G⁻¹g + c·(lr/N)·T·Γ̂ + √(2·(lr/N)·(α·T − β̂))·G^{−1/2}ξ,
    θ ← θ + G⁻¹v,

with ``β̂ = ½·η·V̂_U = ½·lr·N·V̂`` the estimated minibatch-noise term (``V̂`` the per-coordinate
variance of g, so ``η²V̂_U`` is the variance the minibatch adds to v each step; identity metric
only). ``learning_rate`` means what it means for SGLD: with ``friction=1`` and ``G = I`` the step
is SGLD's ``θ ← θ − lr·g + √(2·lr·T/N)ξ``; ``friction = α = 1 − momentum`` is the share of v
lost per step. The friction step ``α·G⁻¹`` is explicit: it needs ``α·λ_max(G⁻¹) < 1`` (bound
G⁻¹ through the metric's ε, e.g. ``rmsprop(eps=...)``: ``G⁻¹ ≤ 1/ε``).

The minibatch-noise estimate β̂ must not exceed α·T (the injected variance cannot be negative):
per coordinate it is clipped at α·T, and ``info.noise_clipped`` says the step clipped some
coordinate (the engine counts such steps). A clipped step adds more noise than the target asks
for: raise ``friction`` or lower ``learning_rate``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.identity import identity
from sgrld.metrics.metric import DECAY, Metric, MetricState, check_decay
from sgrld.numerics.checks import check_params
from sgrld.numerics.pytrees import PyTree
from sgrld.parts import correction as corrections
from sgrld.parts.gradients import gradient_estimate
from sgrld.parts.integrators import momentum
from sgrld.parts.preconditioning import by_metric
from sgrld.samplers import assembly
from sgrld.samplers.contract import Sampler
from sgrld.samplers.momentum import FRICTION, MomentumInfo, check_friction, momentum_info
from sgrld.samplers.rate_search import searchable

NOISE_ESTIMATES = ("per_example",)
"""Named minibatch-noise estimates (``gradient_noise``), besides ``None`` and a number."""


BOUNDS = {
    **assembly.COMMON_BOUNDS,
    "num_probes": corrections.NUM_PROBES,
    "correction_warmup": corrections.WARMUP,
    "friction": FRICTION,
    "noise_decay": DECAY,
}
"""The ranges of :func:`sghmc`'s numeric options, as it and its parts check them."""


class SGHMCState(NamedTuple):
    """State of an SGHMC chain.

    Attributes:
      step: int32 number of steps taken.
      params: the sample θ_t.
      integrator: the state of the :func:`~sgrld.parts.integrators.momentum` integrator, the
        momentum v = h·r, shaped like ``params`` (starts at 0); :attr:`momentum` reads it.
      metric_state: the metric's state.
      noise_variance: the moving average V̂ of the minibatch gradient's per-coordinate variance
        (``gradient_noise="per_example"``), else ``()``.
    """

    step: jax.Array
    params: PyTree
    integrator: PyTree
    metric_state: MetricState
    noise_variance: PyTree

    @property
    def momentum(self) -> PyTree:
        """v = h·r, the integrator's state (stored once, as ``integrator``)."""
        return self.integrator


class _Options(NamedTuple):
    options: assembly.Options
    parts: assembly.Assembly
    friction: float
    gradients: Callable
    noise: str | float | None
    noise_decay: float


@searchable(lambda arguments: arguments["metric"])
def sghmc(
    potential_fn: Callable[[PyTree, PyTree], jax.Array],
    *,
    learning_rate: float | Callable | str,
    num_data: int,
    friction: float = 0.1,
    temperature: float | Callable = 1.0,
    metric: Metric | None = None,
    correction: str | None = "none",
    num_probes: int = 1,
    correction_warmup: int | None = None,
    gradient_noise: str | float | None = None,
    noise_decay: float = 0.9,
) -> Sampler:
    """SGHMC: stochastic-gradient Hamiltonian Monte Carlo with friction, optionally in a metric.

    The update and the distribution it targets are in this module's docstring: per step
    ``v ← v − α·G⁻¹v − lr·G⁻¹g + c·(lr/N)·T·Γ̂ + √(2·(lr/N)·(α·T − β̂))·G^{−1/2}ξ``,
    ``θ ← θ + G⁻¹v``, stationary ``p(θ|D)^{1/T}`` up to the step's O(lr) bias.

    Args:
      potential_fn: ``(params, batch) -> Û(θ)/N``; :func:`sgrld.potential` builds one.
      learning_rate: ``lr = η·N`` (η = h² of Chen et al.), a float or a schedule ``step -> lr``.
        ``"auto"``: chosen during the burn-in (:mod:`sgrld.samplers.rate_search`).
      num_data: N; must equal the potential's.
      friction: α = h·C ∈ (0, 1], the share of the momentum lost per step (1 − momentum).
      temperature: T ≥ 0, or a schedule ``step -> T`` (:func:`sgrld.numerics.schedules.cyclical`).
      metric: a :class:`~sgrld.metrics.Metric` (``None``: the identity, plain SGHMC).
      correction: Γ̂ of the metric: ``"none"``, ``"hutchinson"`` or ``"exact"``
        (:mod:`sgrld.parts.correction`); ``"auto"`` is ``"none"`` (the metric adapts
        throughout; :func:`~sgrld.parts.correction.resolved_mode`).
      num_probes: Rademacher probes per step for ``"hutchinson"``.
      correction_warmup: metric updates before Γ̂ is applied (``None``: the metric's warm-up).
      gradient_noise: the minibatch-noise estimate V̂ of Var(g) per coordinate (identity metric
        only): ``None`` (β̂ = 0, Chen et al.'s default), a number (a known variance), or
        ``"per_example"`` (an average, with ``noise_decay``, of
        :func:`sgrld.numerics.per_example.gradient_variance`;
        B per-example gradients per step).
      noise_decay: decay of the moving average of ``"per_example"``.

    Returns:
      A :class:`~sgrld.Sampler` whose ``step`` returns :class:`SGHMCState` and
      :class:`~sgrld.samplers.momentum.MomentumInfo`.

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, lambda w: -0.5 * w**2, 4)
      >>> s = sgrld.sghmc(u, learning_rate=0.01, num_data=4, friction=0.1)
      >>> state, info = jax.jit(s.step)(jax.random.key(0), s.init(jnp.zeros(())), jnp.ones(2))
      >>> int(state.step), bool(info.is_finite), state.momentum.shape
      (1, True, ())

    References:
      Chen, Fox & Guestrin (ICML 2014), Eq. 13-15; Ma, Chen & Fox (NeurIPS 2015), Eq. 2-3 and
      Sec. 3.2.
    """
    noise = _check_noise(gradient_noise)
    if noise is not None and metric is not None:
        raise ValueError("gradient_noise needs the identity metric: leave metric=None")
    metric = assembly.check_metric(identity() if metric is None else metric)
    options = assembly.check_options(
        potential_fn, learning_rate=learning_rate, num_data=num_data, temperature=temperature
    )
    mode = corrections.resolved_mode(correction, metric, None)  # the metric adapts throughout
    correction = corrections.from_mode(mode, num_probes=num_probes, warmup=correction_warmup)
    if metric.statistic is None:
        correction = corrections.none()
    observation = "variance" if noise == "per_example" else "metric"
    gradients = gradient_estimate(potential_fn, observation, metric=metric)
    alpha = check_friction(friction)
    o = _Options(
        options,
        assembly.Assembly(metric, correction, by_metric(metric), momentum(alpha), options.num_data),
        alpha,
        gradients,
        noise,
        float(check_decay(noise_decay, "noise_decay")),
    )
    return Sampler(partial(_init, o), partial(_step, o))


def _check_noise(gradient_noise) -> str | float | None:
    """``gradient_noise`` validated: ``None``, ``"per_example"`` or a finite number >= 0."""
    if gradient_noise is None or gradient_noise in NOISE_ESTIMATES:
        return gradient_noise
    if isinstance(gradient_noise, str):
        raise ValueError(
            f"gradient_noise must be None, a number >= 0 or one of {NOISE_ESTIMATES}, "
            f"got {gradient_noise!r}"
        )
    value = float(gradient_noise)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"gradient_noise must be a finite number >= 0, got {gradient_noise}")
    return value


def _init(o: _Options, params: PyTree) -> SGHMCState:
    params = check_params(params)
    variance = jax.tree.map(jnp.zeros_like, params) if o.noise == "per_example" else ()
    moving = o.parts.integrator.init(params)
    return SGHMCState(
        jnp.zeros((), jnp.int32), params, moving, o.parts.metric.init(params), variance
    )


def _estimate(o: _Options, key, state: SGHMCState, batch):
    """``(Estimate, V̂)``: gradient, metric update and Γ̂ (``None`` without a correction), and
    the minibatch gradient's variance per leaf (0 without an estimate)."""
    metric, correction = o.parts.metric, o.parts.correction
    if o.noise == "per_example":
        value, g, v = o.gradients(state.params, batch)
        d = o.noise_decay
        variance = jax.tree.map(
            lambda old, new: d * old + (1 - d) * new.astype(old.dtype), state.noise_variance, v
        )
        return corrections.Estimate(value, g, metric.update(state.metric_state, g), None), variance
    grad_fn = partial(o.gradients, batch=batch, key=jax.random.fold_in(key, 1))
    est = correction.estimate(key, grad_fn, state.params, metric, state.metric_state)
    if correction.mode == "none":
        est = est._replace(gamma=None)
    return est, jax.tree.map(lambda x: jnp.float32(o.noise or 0.0), state.params)


def _step(o: _Options, key, state: SGHMCState, batch) -> tuple[SGHMCState, MomentumInfo]:
    """One step: gradient (and Γ̂, V̂), the momentum integrator's move, diagnostics."""
    noise_key, probe_key = jax.random.split(key)
    lr = jnp.asarray(o.options.schedule(state.step), jnp.float32)
    temp = o.options.temperature(state.step)
    est, variance = _estimate(o, probe_key, state, batch)
    alpha, n = o.friction, o.options.num_data
    excess = jax.tree.map(lambda v: alpha * temp - 0.5 * lr * n * v, variance)  # α·T − β̂
    clipped = jnp.any(jnp.stack([jnp.any(e < 0) for e in jax.tree.leaves(excess)]))
    noise = jax.tree.map(lambda e: jnp.sqrt(2.0 * lr / n * jnp.maximum(e, 0.0)), excess)
    params, v, _ = assembly.advance(
        o.parts, noise_key, state.params, state.integrator, est, lr, temp, noise
    )
    kept = variance if o.noise == "per_example" else state.noise_variance
    ms = est.metric_state
    info = momentum_info(
        est.value, est.grad, lr, params, v, thermostat=alpha, num_data=n, gamma=est.gamma,
        noise_clipped=clipped, metric_fallbacks=ms.fallbacks,
    )  # fmt: skip
    return SGHMCState(state.step + 1, params, v, ms, kept), info
