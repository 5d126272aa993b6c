"""Adam-SGLD (Kim, Song & Liang, 2022): Langevin dynamics with an Adam-like extra drift, assembled
from the identity metric, no correction and the Euler–Maruyama integrator
(:mod:`sgrld.samplers.assembly`), its drift in place of the gradient."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.identity import identity
from sgrld.metrics.metric import check_decay, check_nonnegative
from sgrld.numerics.checks import check_params
from sgrld.numerics.pytrees import PyTree
from sgrld.parts.correction import Estimate, none
from sgrld.parts.gradients import gradient_estimate
from sgrld.parts.integrators import euler_maruyama
from sgrld.parts.preconditioning import by_metric
from sgrld.samplers.assembly import Assembly, Options, advance, check_options
from sgrld.samplers.contract import Sampler
from sgrld.samplers.info import step_info
from sgrld.samplers.rate_search import searchable


class AdamSGLDState(NamedTuple):
    """State of an Adam-SGLD chain.

    Attributes:
      step: int32 number of steps taken.
      params: the sample θ_t.
      momentum: Adam's gradient average ``m`` (part of the drift, not a dynamics' momentum).
      second_moment: the squared-gradient average ``V``.
      integrator: the Euler–Maruyama integrator's state, ``()``.
    """

    step: jax.Array
    params: PyTree
    momentum: PyTree
    second_moment: PyTree
    integrator: PyTree = ()


@searchable(lambda arguments: None)
def adam_sgld(
    potential_fn: Callable[[PyTree, PyTree], jax.Array],
    learning_rate: float | Callable[[jax.Array], jax.Array] | str,
    num_data: int,
    temperature: float | Callable[[jax.Array], jax.Array] = 1.0,
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
        ``"auto"``: chosen during the burn-in (:mod:`sgrld.samplers.rate_search`).
      num_data: N.
      temperature: T ≥ 0, or a schedule ``step -> T`` (:mod:`sgrld.numerics.schedules`).
      a: weight of the adaptive drift.
      beta: decay of the gradient average m.
      decay: decay of the squared-gradient average V.
      eps: stability constant λ (on the scale of ∇U).

    Returns:
      A :class:`~sgrld.Sampler` whose ``step`` returns :class:`AdamSGLDState` and
      :class:`~sgrld.StepInfo`.

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> t = sgrld.samples.targets.standard_normal()
      >>> s, k = sgrld.adam_sgld(t.potential, 5e-5, num_data=1), jax.random.key(0)
      >>> state, info = s.step(k, s.init(t.init_params), t.batch_fn(k))
      >>> bool(info.is_finite)
      True

    References:
      Kim, Song & Liang (2022); Rensmeyer & Niggemann, Sec. 2.2 and 3.2.
    """
    options = check_options(
        potential_fn, learning_rate=learning_rate, num_data=num_data, temperature=temperature
    )
    metric = identity()
    parts = Assembly(metric, none(), by_metric(metric), euler_maruyama(), options.num_data)
    adaptive = _Adaptive(
        check_nonnegative(a, "a"),
        check_decay(beta, "beta"),
        check_decay(decay, "decay"),
        check_nonnegative(eps, "eps"),
    )
    gradients = gradient_estimate(potential_fn, "gradient")
    return Sampler(partial(_init, parts), partial(_step, gradients, options, parts, adaptive))


class _Adaptive(NamedTuple):
    a: float
    beta: float
    decay: float
    eps: float


def _init(parts: Assembly, params: PyTree) -> AdamSGLDState:
    params = check_params(params)
    zeros = jax.tree.map(jnp.zeros_like, params)
    moving = parts.integrator.init(params)
    return AdamSGLDState(jnp.zeros((), jnp.int32), params, zeros, zeros, moving)


def _step(gradients, options: Options, parts: Assembly, o: _Adaptive, key, state, batch):
    """One step: the averages m and V, the drift ``g + (a/N)·m ⊘ (eps/N + √V)`` handed to the
    identity metric's Euler–Maruyama move, uncorrected."""
    lr = jnp.asarray(options.schedule(state.step), jnp.float32)
    value, g, _ = gradients(state.params, batch)
    m = jax.tree.map(lambda m, g: o.beta * m + (1 - o.beta) * g, state.momentum, g)
    v = jax.tree.map(lambda v, g: o.decay * v + (1 - o.decay) * g**2, state.second_moment, g)
    n = options.num_data
    drift = jax.tree.map(lambda g, m, v: g + (o.a / n) * m / (o.eps / n + jnp.sqrt(v)), g, m, v)
    est = Estimate(value, drift, parts.metric.init(state.params), None)
    temperature = options.temperature(state.step)
    params, moved, _ = advance(parts, key, state.params, state.integrator, est, lr, temperature)
    return AdamSGLDState(state.step + 1, params, m, v, moved), step_info(value, g, lr, params)
