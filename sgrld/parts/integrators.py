"""Integrators: how a sampler turns drift, noise and Γ̂ into the next sample.

An :class:`Integrator` is a part of a sampler (:func:`sgrld.samplers.sampler.riemannian_langevin`).
It owns the draw of the Langevin noise ξ and the update of the parameters. The scales follow the
README's conventions, written once in :func:`langevin_scales`: with ``lr = h·N`` and temperature
``T``, the noise is ``√(2·lr·T/N)·G^{−1/2}ξ`` and Γ̂ enters as ``c·(lr/N)·T·Γ̂``.

Example:
  >>> import jax, jax.numpy as jnp
  >>> em = euler_maruyama()
  >>> scales = langevin_scales(jnp.float32(0.5), temperature=0.0, num_data=1, correction_scale=0.0)
  >>> em.move(jnp.ones(2), jnp.ones(2), em.noise(jax.random.key(0), jnp.ones(2)), None, scales)
  Array([0.5, 0.5], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.numerics.noise import normal_like
from sgrld.numerics.pytrees import PyTree


class Scales(NamedTuple):
    """The coefficients of one step: ``lr`` on the drift, ``noise`` on G^{−1/2}ξ, ``gamma`` on Γ̂."""

    lr: jax.Array
    noise: jax.Array
    gamma: jax.Array


def langevin_scales(
    lr: jax.Array, *, temperature: float | jax.Array, num_data: int, correction_scale: float
) -> Scales:
    """``Scales(lr, √(2·lr·T/N), c·lr·T/N)``: the step ``h = lr/N`` of Langevin dynamics at T."""
    return Scales(
        lr,
        jnp.sqrt(2.0 * lr * temperature / num_data),
        correction_scale * lr * temperature / num_data,
    )


class Integrator(NamedTuple):
    """A sampler's update rule.

    Attributes:
      noise: ``noise(key, params) -> ξ``, standard normal leaves shaped like ``params``.
      move: ``move(params, drift, noise, gamma, scales) -> params``; ``gamma`` may be ``None``
        (no correction: the term is not computed).
    """

    noise: Callable[[jax.Array, PyTree], PyTree]
    move: Callable[[PyTree, PyTree, PyTree, PyTree | None, Scales], PyTree]


def euler_maruyama(
    noise_fn: Callable[[jax.Array, PyTree], PyTree] = normal_like,
) -> Integrator:
    """The Euler–Maruyama step of ``dθ = −G⁻¹∇U dt + TΓ dt + √(2T) G^{−1/2} dW``::

        θ_{t+1} = θ_t − lr·d + √(2·lr·T/N)·n + c·(lr/N)·T·Γ̂,

    with ``d = G⁻¹∇Û/N`` and ``n = G^{−1/2}ξ`` (computed by the sampler), in each leaf's dtype.

    Args:
      noise_fn: ``(key, params) -> ξ``; :func:`sgrld.numerics.noise.normal_like` draws the
        numbers of ``jax.random.normal``, faster on CPU.

    Returns:
      The :class:`Integrator`.
    """

    def move(params, drift, noise, gamma, scales):
        def leaf(x, d, n):
            dt = x.dtype
            return x - scales.lr.astype(dt) * d + scales.noise.astype(dt) * n

        def corrected(x, d, n, g):
            return leaf(x, d, n) + scales.gamma.astype(x.dtype) * g

        if gamma is None:
            return jax.tree.map(leaf, params, drift, noise)
        return jax.tree.map(corrected, params, drift, noise, gamma)

    return Integrator(noise_fn, move)
