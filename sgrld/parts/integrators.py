"""Integrators: how a sampler turns drift, noise and Γ̂ into the next sample.

An :class:`Integrator` is a part of a sampler (:func:`sgrld.samplers.sampler.riemannian_langevin`,
:func:`sgrld.sghmc`, :func:`sgrld.sgnht`, :func:`sgrld.adam_sgld`). It owns its own state (``()``
for Euler–Maruyama, the momentum of SGHMC, the momentum and thermostat of SGNHT), the draw of the
noise ξ, the scales of its dynamics and the update of the parameters. The scales follow the
README's conventions: with ``lr = h·N`` and temperature ``T``, Langevin's noise is
``√(2·lr·T/N)·G^{−1/2}ξ`` and Γ̂ enters as ``c·(lr/N)·T·Γ̂`` (:func:`langevin_scales`); a
momentum's noise is ``√(2·α·lr·T/N)·G^{−1/2}ξ`` for the friction α (:func:`momentum_scales`).

The integrator's state is stored one way: each sampler that moves through an integrator
(:class:`~sgrld.samplers.sampler.SGRLDState`, :class:`~sgrld.samplers.sghmc.SGHMCState`,
:class:`~sgrld.samplers.sgnht.SGNHTState`, :class:`~sgrld.samplers.adam_sgld.AdamSGLDState`)
keeps it whole in its state's field ``integrator``, as :attr:`Integrator.init` made it and
:attr:`Integrator.move` returns it (:func:`sgrld.samplers.assembly.advance` hands it over); names
such as ``SGHMCState.momentum`` or ``SGNHTState.thermostat`` are read-only views of that field.
i-SGD and the baselines have no integrator: their modules say why.

Example:
  >>> import jax, jax.numpy as jnp
  >>> em = euler_maruyama()
  >>> scales = em.scales(jnp.float32(0.5), temperature=0.0, num_data=1, correction_scale=0.0)
  >>> xi = em.noise(jax.random.key(0), jnp.ones(2))
  >>> forces = Forces(jnp.ones(2), jnp.ones(2), xi, None, lambda v: v)
  >>> em.move(jnp.ones(2), em.init(jnp.ones(2)), forces, scales)
  (Array([0.5, 0.5], dtype=float32), ())
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.numerics.noise import normal_like
from sgrld.numerics.pytrees import PyTree, tree_vdot


class Scales(NamedTuple):
    """The coefficients of one step.

    Attributes:
      lr: the learning rate on the drift.
      noise: the scale of G^{−1/2}ξ (a scalar, or one per leaf: SGHMC's noise less β̂).
      gamma: the scale of Γ̂, ``c·lr·T/N``.
      heat: ``lr·T/N``, the kinetic energy per coordinate a thermostat holds (``h·T``).
    """

    lr: jax.Array
    noise: jax.Array | PyTree
    gamma: jax.Array
    heat: jax.Array


class Forces(NamedTuple):
    """What a step hands its integrator (computed by the sampler's correction and preconditioner).

    Attributes:
      grad: ``g = ∇Û/N``.
      drift: ``G⁻¹g``.
      noise: ``G^{−1/2}ξ``.
      gamma: Γ̂ (``None``: no correction, the term is not computed).
      inv: ``v -> G⁻¹v`` at the step's metric (a momentum integrator preconditions its own v).
    """

    grad: PyTree
    drift: PyTree
    noise: PyTree
    gamma: PyTree | None
    inv: Callable[[PyTree], PyTree]


def langevin_scales(
    lr: jax.Array, *, temperature: float | jax.Array, num_data: int, correction_scale: float
) -> Scales:
    """``Scales(lr, √(2·lr·T/N), c·lr·T/N, lr·T/N)``: the step ``h = lr/N`` of Langevin dynamics
    at T."""
    return Scales(
        lr,
        jnp.sqrt(2.0 * lr * temperature / num_data),
        correction_scale * lr * temperature / num_data,
        lr * temperature / num_data,
    )


def momentum_scales(friction: float) -> Callable[..., Scales]:
    """:func:`langevin_scales` with the noise ``√(2·α·lr·T/N)`` of a momentum lost at the share
    α = ``friction`` per step (Chen et al., Eq. 15; Ding et al.'s A·h)."""

    def scales(lr, *, temperature, num_data, correction_scale):
        noise = jnp.sqrt(2.0 * friction * lr * temperature / num_data)
        out = langevin_scales(
            lr, temperature=temperature, num_data=num_data, correction_scale=correction_scale
        )
        return out._replace(noise=noise)

    return scales


class Integrator(NamedTuple):
    """A sampler's update rule, with a state of its own.

    Attributes:
      init: ``init(params) -> state`` (``()`` for Euler–Maruyama).
      noise: ``noise(key, params) -> ξ``, standard normal leaves shaped like ``params``.
      move: ``move(params, state, forces, scales) -> (params, state)`` (:class:`Forces`,
        :class:`Scales`).
      scales: ``scales(lr, *, temperature, num_data, correction_scale) -> Scales`` of its dynamics.
    """

    init: Callable[[PyTree], PyTree]
    noise: Callable[[jax.Array, PyTree], PyTree]
    move: Callable[[PyTree, PyTree, Forces, Scales], tuple[PyTree, PyTree]]
    scales: Callable[..., Scales] = langevin_scales


def euler_maruyama(
    noise_fn: Callable[[jax.Array, PyTree], PyTree] = normal_like,
) -> Integrator:
    """The Euler–Maruyama step of ``dθ = −G⁻¹∇U dt + TΓ dt + √(2T) G^{−1/2} dW``::

        θ_{t+1} = θ_t − lr·d + √(2·lr·T/N)·n + c·(lr/N)·T·Γ̂,

    with ``d = G⁻¹∇Û/N`` and ``n = G^{−1/2}ξ`` (:class:`Forces`), in each leaf's dtype; no state.

    Args:
      noise_fn: ``(key, params) -> ξ``; :func:`sgrld.numerics.noise.normal_like` draws the
        numbers of ``jax.random.normal``, faster on CPU.

    Returns:
      The :class:`Integrator`.
    """

    def move(params, state, forces, scales):
        def leaf(x, d, n):
            dt = x.dtype
            return x - scales.lr.astype(dt) * d + scales.noise.astype(dt) * n

        def corrected(x, d, n, g):
            return leaf(x, d, n) + scales.gamma.astype(x.dtype) * g

        if forces.gamma is None:
            return jax.tree.map(leaf, params, forces.drift, forces.noise), state
        return jax.tree.map(corrected, params, forces.drift, forces.noise, forces.gamma), state

    return Integrator(lambda params: (), noise_fn, move)


def _kick(params, v, friction, forces: Forces, scales: Scales):
    """The semi-implicit step ``v ← v − G⁻¹(α·v + lr·g) + s·n + c·(lr/N)·T·Γ̂``,
    ``θ ← θ + G⁻¹v``: ``(params, v)``."""
    force = forces.inv(jax.tree.map(lambda v, g: friction * v + scales.lr * g, v, forces.grad))
    noise_scale = scales.noise  # one per leaf, or one for all
    if jax.tree.structure(noise_scale) != jax.tree.structure(v):
        noise_scale = jax.tree.map(lambda _: scales.noise, v)

    def momentum(v, f, s, n, *gam):
        out = v - f.astype(v.dtype) + (s * n).astype(v.dtype)
        return out + (scales.gamma * gam[0]).astype(v.dtype) if gam else out

    gamma = () if forces.gamma is None else (forces.gamma,)
    v = jax.tree.map(momentum, v, force, noise_scale, forces.noise, *gamma)
    return jax.tree.map(lambda x, d: x + d.astype(x.dtype), params, forces.inv(v)), v


def momentum(
    friction: float, noise_fn: Callable[[jax.Array, PyTree], PyTree] = normal_like
) -> Integrator:
    """The semi-implicit Euler step of SGHMC (Chen et al., Eq. 15) in a metric G, the momentum
    ``v = h·r`` its state (from 0)::

        v ← v − α·G⁻¹v − lr·G⁻¹g + c·(lr/N)·T·Γ̂ + √(2·α·lr·T/N)·G^{−1/2}ξ,
        θ ← θ + G⁻¹v,

    the discretisation of ``dθ = G⁻¹r dt``, ``dr = −G⁻¹∇U dt − C·G⁻¹r dt + TΓ dt +
    √(2TC)·G^{−1/2} dW`` with ``α = h·C`` (:mod:`sgrld.samplers.sghmc`).

    Args:
      friction: α ∈ (0, 1], the share of the momentum lost per step.
      noise_fn: ``(key, params) -> ξ``.

    Returns:
      The :class:`Integrator`, its state the momentum ``v`` (zeros shaped like the parameters).

    Example:
      >>> import jax.numpy as jnp
      >>> mo = momentum(0.5)
      >>> scales = mo.scales(jnp.float32(0.5), temperature=0.0, num_data=1, correction_scale=0.0)
      >>> forces = Forces(jnp.ones(2), None, jnp.zeros(2), None, lambda v: v)
      >>> mo.move(jnp.zeros(2), mo.init(jnp.zeros(2)), forces, scales)[0].tolist()  # v = −lr·g
      [-0.5, -0.5]

    References:
      Chen, Fox & Guestrin (ICML 2014), Eq. 15; Ma, Chen & Fox (NeurIPS 2015), Sec. 3.2.
    """

    def move(params, v, forces, scales):
        return _kick(params, v, friction, forces, scales)

    zeros = lambda params: jax.tree.map(jnp.zeros_like, params)
    return Integrator(zeros, noise_fn, move, momentum_scales(friction))


class Thermostat(NamedTuple):
    """The state of :func:`nose_hoover`: the momentum ``v`` and the thermostat ξ (float32)."""

    momentum: PyTree
    thermostat: jax.Array


def nose_hoover(
    diffusion: float, noise_fn: Callable[[jax.Array, PyTree], PyTree] = normal_like
) -> Integrator:
    """:func:`momentum` whose friction is a Nosé–Hoover thermostat ξ (SGNHT, Ding et al.), its
    state a :class:`Thermostat` (``ξ`` from α; D coordinates)::

        v ← v − ξ·G⁻¹v − lr·G⁻¹g + √(2·α·lr·T/N)·G^{−1/2}ξ',    θ ← θ + G⁻¹v,
        ξ ← ξ + ‖v‖²/D − lr·T/N.

    Args:
      diffusion: α = h·A ∈ (0, 1], the injected noise's friction equivalent and ξ's start.
      noise_fn: ``(key, params) -> ξ'``.

    Returns:
      The :class:`Integrator`, its state a :class:`Thermostat` (``v`` from 0, ``ξ`` from α).

    Example:
      >>> import jax.numpy as jnp
      >>> nh = nose_hoover(0.1)
      >>> scales = nh.scales(jnp.float32(0.5), temperature=0.0, num_data=1, correction_scale=0.0)
      >>> forces = Forces(-jnp.ones(()), None, jnp.zeros(()), None, lambda v: v)
      >>> _, state = nh.move(jnp.zeros(()), nh.init(jnp.zeros(())), forces, scales)
      >>> float(state.momentum), float(state.thermostat)  # ξ = 0.1 + v²/D
      (0.5, 0.35)

    References:
      Ding, Fang, Babbush, Chen, Skeel & Neven (NeurIPS 2014), Sec. 3 and its algorithm.
    """

    def init(params):
        return Thermostat(jax.tree.map(jnp.zeros_like, params), jnp.float32(diffusion))

    def move(params, state, forces, scales):
        params, v = _kick(params, state.momentum, state.thermostat, forces, scales)
        size = sum(x.size for x in jax.tree.leaves(v))
        return params, Thermostat(v, state.thermostat + tree_vdot(v, v) / size - scales.heat)

    return Integrator(init, noise_fn, move, momentum_scales(diffusion))
