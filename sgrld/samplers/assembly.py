"""What every sampler is assembled from: its checked options and its parts.

Every sampler of :mod:`sgrld.samplers` checks its ``learning_rate``, ``num_data`` and
``temperature`` once, here (:func:`check_options`), and moves through the same parts
(:class:`Assembly`): a metric, a correction, a preconditioner and an integrator. :func:`advance`
is the move they share: the noise drawn, drift and noise preconditioned, the integrator's scales
and its step.

Example:
  >>> import jax, jax.numpy as jnp, sgrld
  >>> from sgrld.parts import correction, integrators, preconditioning
  >>> m = sgrld.metrics.identity()
  >>> parts = Assembly(m, correction.none(), preconditioning.by_metric(m),
  ...                  integrators.euler_maruyama(), num_data=1)
  >>> est = correction.Estimate(jnp.float32(0.0), jnp.ones(2), m.init(jnp.zeros(2)), None)
  >>> params, _, _ = advance(parts, jax.random.key(0), jnp.zeros(2), (), est, jnp.float32(0.5), 0.0)
  >>> params.tolist()  # T = 0: θ − lr·g
  [-0.5, -0.5]
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.metric import Metric
from sgrld.numerics.checks import (
    LEARNING_RATE,
    TEMPERATURE,
    Bound,
    as_schedule,
    as_temperature,
    check_num_data,
)
from sgrld.numerics.potential import Potential
from sgrld.numerics.pytrees import PyTree
from sgrld.numerics.schedules import Schedule
from sgrld.parts.correction import Correction, Estimate
from sgrld.parts.integrators import Forces, Integrator
from sgrld.parts.preconditioning import Directions, Precondition, clip_drift, tame_gamma

COMMON_BOUNDS: dict[str, Bound] = {"learning_rate": LEARNING_RATE, "temperature": TEMPERATURE}
"""The ranges of the options every sampler takes; each sampler module's ``BOUNDS`` adds its own
(read by the configuration's validation, :func:`sgrld_app.config.registries.sampler_bounds`)."""


class Options(NamedTuple):
    """The options every sampler takes, checked (:func:`check_options`).

    Attributes:
      schedule: ``step -> lr`` (float32); ``None`` where the sampler takes no learning rate.
      num_data: N.
      temperature: ``step -> T`` (float32).
    """

    schedule: Schedule | None
    num_data: int
    temperature: Schedule


def check_options(
    potential_fn: Callable,
    *,
    learning_rate: float | Schedule | None,
    num_data: int,
    temperature: float | Schedule,
) -> Options:
    """The one check of every sampler's common options; each error names its argument.

    ``learning_rate`` is a number > 0 or a schedule (``None``: the sampler has its own rule);
    ``num_data`` a positive integer, equal to the N of a :class:`~sgrld.Potential` (the noise
    scale ``√(2·lr·T/N)`` and the prior's weight 1/N must use the same N); ``temperature`` a
    number >= 0 or a schedule.

    Example:
      >>> import sgrld
      >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, None, num_data=4)
      >>> check_options(u, learning_rate=0.1, num_data=4, temperature=1.0).num_data
      4
      >>> check_options(u, learning_rate=0.1, num_data=5, temperature=1.0)
      Traceback (most recent call last):
      ...
      ValueError: num_data=5 differs from the potential's num_data=4; the noise scale and ...
    """
    schedule = None if learning_rate is None else as_schedule(learning_rate)
    num_data = check_num_data(num_data)
    if isinstance(potential_fn, Potential) and potential_fn.num_data != num_data:
        raise ValueError(
            f"num_data={num_data} differs from the potential's num_data={potential_fn.num_data}; "
            "the noise scale and the potential's prior weight 1/N must use the same N"
        )
    return Options(schedule, num_data, as_temperature(temperature))


def check_metric(metric: Metric) -> Metric:
    """``metric``, or ``TypeError`` unless it is an :class:`~sgrld.metrics.Metric`."""
    if not isinstance(metric, Metric):
        raise TypeError(f"metric must be an sgrld.metrics.Metric, got {type(metric).__name__}")
    return metric


class Assembly(NamedTuple):
    """The parts of a sampler.

    Attributes:
      metric: the :class:`~sgrld.metrics.Metric` (its ``inv`` preconditions a momentum).
      correction: the :class:`~sgrld.parts.correction.Correction` (its ``scale`` is c).
      precondition: the :data:`~sgrld.parts.preconditioning.Precondition` of drift and noise.
      integrator: the :class:`~sgrld.parts.integrators.Integrator`.
      num_data: N.
      gamma_kick_limit: Γ̂'s kick tamed to this many noise sds per coordinate
        (:func:`~sgrld.parts.preconditioning.tame_gamma`); ``None``: not tamed.
    """

    metric: Metric
    correction: Correction
    precondition: Precondition
    integrator: Integrator
    num_data: int
    gamma_kick_limit: float | None = None


def advance(
    parts: Assembly,
    key: jax.Array,
    params: PyTree,
    moving: PyTree,
    est: Estimate,
    lr: jax.Array,
    temperature: jax.Array,
    noise: PyTree | None = None,
    drift_limit: jax.Array | None = None,
) -> tuple[PyTree, PyTree, Directions]:
    """One move of ``params`` and the integrator's state ``moving`` (the sampler state's field
    ``integrator``, :mod:`sgrld.parts.integrators`) from a correction's
    :class:`~sgrld.parts.correction.Estimate` (``gamma=None``: no correction): the integrator's
    noise drawn with ``key``, drift and noise preconditioned at the estimate's metric state, the
    integrator's scales (``noise`` replaces their noise scale, e.g. SGHMC's ``α·T − β̂``), Γ̂
    tamed where ``parts.gamma_kick_limit`` is set (the directions returned hold the tamed Γ̂), the
    drift clipped to ``drift_limit`` noise sds where it is given
    (:func:`~sgrld.parts.preconditioning.clip_drift`; ``fallback`` True where it bound).

    Returns:
      ``(params, moving, directions)``, the :class:`~sgrld.parts.preconditioning.Directions` for
      the step's diagnostics.
    """
    ms = est.metric_state
    xi = parts.integrator.noise(key, params)
    d = parts.precondition(ms, est.grad, xi, est.gamma)
    scales = parts.integrator.scales(
        lr,
        temperature=temperature,
        num_data=parts.num_data,
        correction_scale=parts.correction.scale,
    )
    if noise is not None:
        scales = scales._replace(noise=noise)
    if parts.gamma_kick_limit is not None and d.gamma is not None:
        rademacher = jax.tree.map(lambda x: jnp.where(x < 0, -1.0, 1.0).astype(x.dtype), xi)
        spread = parts.metric.inv_sqrt(ms, rademacher)
        limit = parts.gamma_kick_limit
        d = d._replace(gamma=tame_gamma(d.gamma, spread, scales.gamma, scales.noise, limit))
    if drift_limit is not None:
        drift, clipped = clip_drift(
            parts.metric, ms, d.drift, est.grad, scales.lr, scales.noise, drift_limit
        )
        clipped = clipped & ~d.fallback  # max_drift_norm's identity step is not the metric's
        drift = jax.tree.map(partial(jnp.where, clipped), drift, d.drift)
        d = d._replace(drift=drift, fallback=d.fallback | clipped)
    forces = Forces(est.grad, d.drift, d.noise, d.gamma, partial(parts.metric.inv, ms))
    params, moving = parts.integrator.move(params, moving, forces, scales)
    return params, moving, d
