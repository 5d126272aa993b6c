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

from sgrld.metrics.metric import tree_vdot
from sgrld.numerics.checks import as_schedule, as_temperature, check_num_data, check_params
from sgrld.numerics.noise import normal_like
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.momentum import (
    MomentumInfo,
    check_friction,
    check_potential_size,
    momentum_info,
)
from sgrld.samplers.sampler import Sampler


class SGNHTState(NamedTuple):
    """State of an SGNHT chain.

    Attributes:
      step: int32 number of steps taken.
      params: the sample θ_t.
      momentum: v = h·p, shaped like ``params`` (starts at 0).
      thermostat: float32 ξ, one per chain (starts at α).
    """

    step: jax.Array
    params: PyTree
    momentum: PyTree
    thermostat: jax.Array


class _Options(NamedTuple):
    potential_fn: Callable
    schedule: Callable
    temperature: Callable
    num_data: int
    diffusion: float


def sgnht(
    potential_fn: Callable[[PyTree, PyTree], jax.Array],
    *,
    learning_rate: float | Callable,
    num_data: int,
    diffusion: float = 0.1,
    temperature: float | Callable = 1.0,
) -> Sampler:
    """SGNHT: stochastic-gradient Nosé–Hoover thermostat (the update is in the module docstring).

    Args:
      potential_fn: ``(params, batch) -> Û(θ)/N``; :func:`sgrld.potential` builds one.
      learning_rate: ``lr = η·N``, a float or a schedule ``step -> lr``.
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
    num_data = check_num_data(num_data)
    check_potential_size(potential_fn, num_data)
    options = _Options(
        potential_fn,
        as_schedule(learning_rate),
        as_temperature(temperature),
        num_data,
        check_friction(diffusion, "diffusion"),
    )
    return Sampler(partial(_init, options), partial(_step, options))


def _init(o: _Options, params: PyTree) -> SGNHTState:
    params = check_params(params)
    zeros = jax.tree.map(jnp.zeros_like, params)
    return SGNHTState(jnp.zeros((), jnp.int32), params, zeros, jnp.float32(o.diffusion))


def _step(o: _Options, key, state: SGNHTState, batch) -> tuple[SGNHTState, MomentumInfo]:
    """One step: momentum with the thermostat's friction, position, thermostat, diagnostics."""
    lr = jnp.asarray(o.schedule(state.step), jnp.float32)
    temp, n, xi = o.temperature(state.step), o.num_data, state.thermostat
    value, g = jax.value_and_grad(o.potential_fn)(state.params, batch)
    scale = jnp.sqrt(2.0 * o.diffusion * lr * temp / n)

    def momentum(v, g, e):
        return v - (xi * v + lr * g).astype(v.dtype) + (scale * e).astype(v.dtype)

    v = jax.tree.map(momentum, state.momentum, g, normal_like(key, state.params))
    params = jax.tree.map(jnp.add, state.params, v)
    size = sum(x.size for x in jax.tree.leaves(v))
    xi = xi + tree_vdot(v, v) / size - lr * temp / n
    info = momentum_info(value, g, lr, params, v, thermostat=xi, num_data=n)
    return SGNHTState(state.step + 1, params, v, xi), info
