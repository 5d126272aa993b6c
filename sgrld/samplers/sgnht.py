"""SGNHT (Ding et al., 2014): SGHMC whose friction is a Nosé–Hoover thermostat variable.

With ``v = h·p``, ``η = h²`` and ``ξ`` the thermostat in units of a per-step friction (Ding et al.'s
ξ times h), in the README's conventions (``lr = η·N``, ``g = ∇Û/N``, D coordinates)::

    v ← v − ξ·v − lr·g + √(2·α·lr·T/N)·ε,        ε ~ N(0, I),
    θ ← θ + v,
    ξ ← ξ + ‖v‖²/D − lr·T/N,

starting from ``ξ = α``. The thermostat raises the friction while the kinetic temperature
``‖v‖²/(D·η)`` exceeds T and lowers it otherwise, so it absorbs the unknown minibatch noise
(no B̂ is needed). The continuous dynamics (``dθ = p dt``, ``dp = −ξp dt − ∇U dt + √(2AT) dW``,
``dξ = (pᵀp/D − T) dt``) leave ``exp(−U/T − pᵀp/(2T))``, times a Gaussian in ξ, invariant (Ding et
al., Sec. 3, at T = 1; for T rescale ``p = √T·q`` and time by √T), so the θ-marginal is
``p(θ|D)^{1/T}``; the discretisation adds an O(lr) bias.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.identity import identity
from sgrld.numerics.checks import check_params
from sgrld.numerics.pytrees import PyTree
from sgrld.parts import correction as corrections
from sgrld.parts.gradients import gradient_estimate
from sgrld.parts.integrators import Thermostat, nose_hoover
from sgrld.parts.preconditioning import by_metric
from sgrld.samplers.assembly import COMMON_BOUNDS, Assembly, Options, advance, check_options
from sgrld.samplers.contract import Sampler
from sgrld.samplers.momentum import FRICTION, MomentumInfo, check_friction, momentum_info
from sgrld.samplers.rate_search import searchable

BOUNDS = {**COMMON_BOUNDS, "diffusion": FRICTION}
"""The ranges of :func:`sgnht`'s numeric options."""


class SGNHTState(NamedTuple):
    """State of an SGNHT chain.

    Attributes:
      step: int32 number of steps taken.
      params: the sample θ_t.
      integrator: the state of the :func:`~sgrld.parts.integrators.nose_hoover` integrator, a
        :class:`~sgrld.parts.integrators.Thermostat`: the momentum v = h·p, shaped like
        ``params`` (starts at 0), and the float32 thermostat ξ, one per chain (starts at α);
        :attr:`momentum` and :attr:`thermostat` read them.
    """

    step: jax.Array
    params: PyTree
    integrator: Thermostat

    @property
    def momentum(self) -> PyTree:
        """v = h·p, the integrator's momentum."""
        return self.integrator.momentum

    @property
    def thermostat(self) -> jax.Array:
        """ξ, the integrator's thermostat."""
        return self.integrator.thermostat


class _Options(NamedTuple):
    options: Options
    parts: Assembly
    gradients: Callable


@searchable(lambda arguments: None)
def sgnht(
    potential_fn: Callable[[PyTree, PyTree], jax.Array],
    *,
    learning_rate: float | Callable | str,
    num_data: int,
    diffusion: float = 0.1,
    temperature: float | Callable = 1.0,
) -> Sampler:
    """SGNHT: stochastic-gradient Nosé–Hoover thermostat (the update is in the module docstring).

    Args:
      potential_fn: ``(params, batch) -> Û(θ)/N``; :func:`sgrld.potential` builds one.
      learning_rate: ``lr = η·N``, a float or a schedule ``step -> lr``.
        ``"auto"``: chosen during the burn-in (:mod:`sgrld.samplers.rate_search`).
      num_data: N; must equal the potential's.
      diffusion: α = h·A ∈ (0, 1], the injected noise's friction equivalent and ξ's start.
      temperature: T ≥ 0, or a schedule ``step -> T``.

    Returns:
      A :class:`~sgrld.Sampler` whose ``step`` returns :class:`SGNHTState` and
      :class:`~sgrld.samplers.momentum.MomentumInfo` (``thermostat``: ξ after the step).

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, None, 4)
      >>> s = sgrld.sgnht(u, learning_rate=0.5, num_data=4, temperature=0.0)
      >>> state, _ = s.step(jax.random.key(0), s.init(jnp.zeros(())), jnp.ones(2))
      >>> float(state.params), float(state.thermostat)  # v = −lr·g = 0.5, ξ = 0.1 + v²/D
      (0.5, 0.35)

    References:
      Ding, Fang, Babbush, Chen, Skeel & Neven (NeurIPS 2014), Sec. 3 and its algorithm.
    """
    options = check_options(
        potential_fn, learning_rate=learning_rate, num_data=num_data, temperature=temperature
    )
    metric, integrator = identity(), nose_hoover(check_friction(diffusion, "diffusion"))
    parts = Assembly(metric, corrections.none(), by_metric(metric), integrator, options.num_data)
    o = _Options(options, parts, gradient_estimate(potential_fn, "gradient"))
    return Sampler(partial(_init, o), partial(_step, o))


def _init(o: _Options, params: PyTree) -> SGNHTState:
    params = check_params(params)
    return SGNHTState(jnp.zeros((), jnp.int32), params, o.parts.integrator.init(params))


def _step(o: _Options, key, state: SGNHTState, batch) -> tuple[SGNHTState, MomentumInfo]:
    """One step: the gradient, the thermostat integrator's move, diagnostics. The noise is drawn
    with the step's key itself (the step draws nothing else)."""
    lr = jnp.asarray(o.options.schedule(state.step), jnp.float32)
    temp, metric = o.options.temperature(state.step), o.parts.metric
    grad_fn = partial(o.gradients, batch=batch, key=key)
    est = o.parts.correction.estimate(key, grad_fn, state.params, metric, metric.init(state.params))
    params, moved, _ = advance(
        o.parts, key, state.params, state.integrator, est._replace(gamma=None), lr, temp
    )
    info = momentum_info(
        est.value, est.grad, lr, params, moved.momentum, thermostat=moved.thermostat,
        num_data=o.options.num_data,
    )  # fmt: skip
    return SGNHTState(state.step + 1, params, moved), info
