"""Adam-SGLD (Kim, Song & Liang, 2022): Langevin dynamics with an Adam-like extra drift."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.base import check_decay, check_nonnegative, tree_vdot
from sgrld.noise import normal_like
from sgrld.sampler import Sampler, SGRLDInfo, as_schedule, check_params, first_nonfinite

PyTree = Any


class AdamSGLDState(NamedTuple):
    """State of an Adam-SGLD chain: step count, sample, gradient EMA ``m`` and squared EMA ``V``."""

    step: jax.Array
    params: PyTree
    momentum: PyTree
    second_moment: PyTree


def adam_sgld(
    potential_fn: Callable[[PyTree, PyTree], jax.Array],
    learning_rate: float | Callable[[jax.Array], jax.Array],
    num_data: int,
    temperature: float = 1.0,
    *,
    a: float = 1.0,
    beta: float = 0.5,
    decay: float = 0.9,
    eps: float = 0.1,
) -> Sampler:
    """Adam-SGLD: identity-metric Langevin dynamics plus an adaptive drift ``a·m ⊘ (eps + √V)``.

    With ``g = ∇Û/N``, ``m ← beta·m + (1 − beta)·g`` and ``V ← decay·V + (1 − decay)·g²`` (both
    from 0), and the step ``h = lr/N`` on the full potential ``U = N·Û/N``::

        θ ← θ − lr·(g + (a/N)·m ⊘ (eps/N + √V)) + √(2·lr·T/N)·ξ,

    which is ``θ ← θ − h(∇U + a·m_U ⊘ (eps + √V_U)) + √(2hT)ξ`` in the statistics of ∇U, the form
    of Rensmeyer & Niggemann Sec. 2.2 (their ε is 2h). Its drift is not a gradient flow, so it is
    biased for every ``a > 0`` (their Sec. 3.2): in one dimension its stationary density is
    ``p(θ)·exp(∫ a·G(x) d log p(x))`` with ``G = 1/(eps + |U′|)``. This sampler is provided to
    reproduce that finding; it has no metric and no Γ correction.

    Args:
      potential_fn: ``(params, batch) -> Û(θ)/N``.
      learning_rate: ``lr = h·N``, a float or a schedule.
      num_data: N.
      temperature: T ≥ 0.
      a: weight of the adaptive drift.
      beta: decay of the gradient average m.
      decay: decay of the squared-gradient average V.
      eps: stability constant λ (on the scale of ∇U).

    Returns:
      A :class:`~sgrld.Sampler` whose ``step`` returns :class:`AdamSGLDState` and
      :class:`~sgrld.SGRLDInfo`.

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> t = sgrld.targets.standard_normal()
      >>> s = sgrld.adam_sgld(t.potential, 5e-5, num_data=1)
      >>> state, info = s.step(
      ...     jax.random.key(0), s.init(t.init_params), t.batch_fn(jax.random.key(1))
      ... )
      >>> bool(info.is_finite)
      True

    References:
      Kim, Song & Liang (2022); Rensmeyer & Niggemann, Sec. 2.2 and 3.2.
    """
    schedule = as_schedule(learning_rate)
    if isinstance(num_data, bool) or int(num_data) != num_data or num_data < 1:
        raise ValueError(f"num_data must be a positive integer, got {num_data!r}")
    num_data = int(num_data)
    temperature = float(temperature)
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
    a = check_nonnegative(a, "a")
    beta = check_decay(beta, "beta")
    decay = check_decay(decay, "decay")
    eps = check_nonnegative(eps, "eps")

    def init(params):
        params = check_params(params)
        zeros = jax.tree.map(jnp.zeros_like, params)
        return AdamSGLDState(jnp.zeros((), jnp.int32), params, zeros, zeros)

    def step(key, state, batch):
        lr = jnp.asarray(schedule(state.step), jnp.float32)
        value, g = jax.value_and_grad(potential_fn)(state.params, batch)
        m = jax.tree.map(lambda m, g: beta * m + (1 - beta) * g, state.momentum, g)
        v = jax.tree.map(lambda v, g: decay * v + (1 - decay) * g**2, state.second_moment, g)
        xi = normal_like(key, state.params)
        noise_scale = jnp.sqrt(2.0 * lr * temperature / num_data)

        def move(x, g, m, v, n):
            drift = g + (a / num_data) * m / (eps / num_data + jnp.sqrt(v))
            return (x - lr * drift + noise_scale * n).astype(x.dtype)

        params = jax.tree.map(move, state.params, g, m, v, xi)
        bad = first_nonfinite(params, g)
        info = SGRLDInfo(
            potential=value,
            grad_norm=jnp.sqrt(tree_vdot(g, g)),
            learning_rate=lr,
            gamma_norm=jnp.zeros(()),
            drift_fallback=jnp.zeros((), bool),
            metric_fallbacks=jnp.zeros((), jnp.int32),
            is_finite=bad < 0,
            nonfinite_leaf=bad,
        )
        return AdamSGLDState(state.step + 1, params, m, v), info

    return Sampler(init, step)
