"""Step-size and temperature schedules: ``step -> value`` functions every sampler accepts.

A schedule is a function of the (int32) step counter of the sampler state, traced inside the
step: the ``learning_rate`` and the ``temperature`` of every sampler (:func:`sgrld.sgrld`,
:func:`sgrld.adam_sgld`, :func:`sgrld.sghmc`, :func:`sgrld.sgnht`) accept one; i-SGD
(:func:`sgrld.isgd`) does not, since its step size is fixed by the isotropising λ. Three exist:

* :func:`constant`: ``value``.
* :func:`polynomial`: ``value·(1 + t/offset)^(−power)``, the decay of Welling & Teh (2011)
  (``a(b + t)^{−γ}``, consistent for ``0.5 < γ ≤ 1``).
* :func:`cyclical`: cSG-MCMC (Zhang et al., ICLR 2020), a cosine step size restarted every cycle,
  each cycle an exploration phase (temperature 0: the noiseless optimiser) and a sampling phase;
  its :attr:`Cyclical.keep` is the predicate that keeps only sampling-phase steps
  (``sgrld.sample(..., keep=...)``, :class:`sgrld.chains.engine.Engine`).

Example:
  >>> import jax.numpy as jnp
  >>> c = cyclical(0.1, num_steps=8, num_cycles=2, exploration=0.5)
  >>> [round(float(c.learning_rate(t)), 4) for t in range(4)]
  [0.1, 0.0854, 0.05, 0.0146]
  >>> [bool(c.keep(t)) for t in range(8)], float(c.temperature(1)), float(c.temperature(2))
  ([False, False, True, True, False, False, True, True], 0.0, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

Schedule = Callable[[Any], jax.Array]
"""``step -> value`` (a float32 scalar), traceable."""


def _positive(value: float, name: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value


def _count(value: int, name: str) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def constant(value: float) -> Schedule:
    """``t -> value``.

    Example:
      >>> float(constant(0.5)(7))
      0.5
    """
    value = _positive(value, "value")
    return lambda step: jnp.asarray(value, jnp.float32)


def polynomial(value: float, *, offset: float = 1.0, power: float = 0.55) -> Schedule:
    """``t -> value·(1 + t/offset)^(−power)``: Welling & Teh's ``a(b + t)^{−γ}`` with
    ``a = value·offset^γ``, ``b = offset``, ``γ = power``.

    Args:
      value: the value at step 0 (> 0).
      offset: b > 0, the step scale of the decay.
      power: γ ≥ 0 (SGLD's decreasing-step theory needs ``0.5 < γ ≤ 1``; 0 is constant).

    Returns:
      The schedule.

    Example:
      >>> round(float(polynomial(1.0, offset=10.0, power=1.0)(30)), 6)
      0.25

    References:
      Welling & Teh (ICML 2011), Sec. 4; Teh, Thiery & Vollmer (JMLR 2016).
    """
    value, offset = _positive(value, "value"), _positive(offset, "offset")
    power = float(power)
    if not (math.isfinite(power) and power >= 0):
        raise ValueError(f"power must be a finite number >= 0, got {power}")

    def schedule(step):
        t = jnp.asarray(step, jnp.float32)
        return jnp.asarray(value * (1.0 + t / offset) ** (-power), jnp.float32)

    return schedule


class Cyclical(NamedTuple):
    """A cSG-MCMC schedule (:func:`cyclical`).

    Attributes:
      learning_rate: ``t -> (value/2)·(cos(π·r_t) + 1)``, ``r_t = (t mod L)/L`` the position in
        the cycle of ``L = ⌈num_steps/num_cycles⌉`` steps.
      temperature: ``t -> 0`` in the exploration phase (``r_t < exploration``), else the
        sampling temperature.
      keep: ``t -> r_t >= exploration`` (in integers: ``t mod L >= ⌈exploration·L⌉``): the
        sampling phase, where samples are collected.
      cycle_length: L.
    """

    learning_rate: Schedule
    temperature: Schedule
    keep: Callable[[Any], Any]
    cycle_length: int


def cyclical(
    value: float,
    *,
    num_steps: int,
    num_cycles: int,
    exploration: float = 0.5,
    temperature: float = 1.0,
) -> Cyclical:
    """cSG-MCMC's cyclical cosine step size with an exploration and a sampling phase per cycle.

    With ``L = ⌈num_steps/num_cycles⌉`` and ``r_t = (t mod L)/L`` (Zhang et al. Eq. 1, 0-based)::

        lr_t = (value/2)·(cos(π·r_t) + 1),      T_t = 0 if r_t < exploration else temperature,

    so each cycle starts at ``value``, first explores (the noiseless optimiser: the momentum
    samplers take ``temperature=c.temperature``) and then samples at the small end of the cosine;
    ``keep`` selects the sampling phase for the engine. The schedule is periodic past
    ``num_steps``.

    Args:
      value: the step size (learning rate) at the start of each cycle, > 0.
      num_steps: K, the total number of steps the cycles divide.
      num_cycles: M ≥ 1, cycles in K steps.
      exploration: β ∈ [0, 1), the share of each cycle spent exploring.
      temperature: the sampling phase's temperature T ≥ 0.

    Returns:
      A :class:`Cyclical`.

    References:
      Zhang, Li, Zhang, Chen & Wilson, *Cyclical stochastic gradient MCMC for Bayesian deep
      learning* (ICLR 2020), Eq. 1 and Algorithm 1.
    """
    value = _positive(value, "value")
    num_steps, num_cycles = _count(num_steps, "num_steps"), _count(num_cycles, "num_cycles")
    if num_cycles > num_steps:
        raise ValueError(f"num_cycles={num_cycles} exceeds num_steps={num_steps}")
    exploration = float(exploration)
    if not 0.0 <= exploration < 1.0:
        raise ValueError(f"exploration must lie in [0, 1), got {exploration}")
    temperature = float(temperature)
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
    length = math.ceil(num_steps / num_cycles)
    first = math.ceil(exploration * length - 1e-9)  # the first sampling step of a cycle: exact

    def learning_rate(step):
        position = jnp.asarray(jnp.asarray(step) % length, jnp.float32) / length
        return (0.5 * value * (jnp.cos(jnp.pi * position) + 1.0)).astype(jnp.float32)

    def keep(step):
        return jnp.asarray(step) % length >= first

    def temp(step):
        return jnp.where(keep(step), temperature, 0.0).astype(jnp.float32)

    return Cyclical(learning_rate, temp, keep, length)
