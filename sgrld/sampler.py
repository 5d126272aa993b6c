"""Stochastic-gradient Riemannian Langevin dynamics (SGRLD) with a pluggable metric."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld import correction as corr
from sgrld.metrics.base import Metric, MetricState, branch_over_chains, tree_vdot
from sgrld.noise import normal_like
from sgrld.potential import Potential

PyTree = Any
Schedule = Callable[[jax.Array], jax.Array]


class SGRLDState(NamedTuple):
    """State of an SGRLD chain.

    Attributes:
      step: int32 number of steps taken.
      params: the current sample θ_t.
      metric_state: the metric's state.
    """

    step: jax.Array
    params: PyTree
    metric_state: MetricState


class SGRLDInfo(NamedTuple):
    """Diagnostics of one step (returned, never stored in the state).

    Attributes:
      potential: Û(θ_t)/N on the step's batch.
      grad_norm: ‖∇Û(θ_t)/N‖.
      learning_rate: the learning rate used.
      gamma_norm: ‖Γ̂(θ_t)‖ (0 without a correction or once the metric is frozen).
      drift_fallback: True where ``max_drift_norm`` replaced the metric by a scaled identity.
      metric_fallbacks: cumulative count of metric refreshes that kept their previous value.
      is_finite: True if θ_{t+1} and the gradient are finite.
      nonfinite_leaf: index (in ``jax.tree.leaves`` order) of the first non-finite leaf, or −1.
    """

    potential: jax.Array
    grad_norm: jax.Array
    learning_rate: jax.Array
    gamma_norm: jax.Array
    drift_fallback: jax.Array
    metric_fallbacks: jax.Array
    is_finite: jax.Array
    nonfinite_leaf: jax.Array


class Sampler(NamedTuple):
    """A sampler: ``init(params) -> state`` and ``step(key, state, batch) -> (state, info)``."""

    init: Callable[[PyTree], Any]
    step: Callable[[jax.Array, Any, PyTree], tuple[Any, Any]]


def check_params(params: PyTree) -> PyTree:
    """Convert leaves to arrays; raise ``TypeError`` naming a leaf that is not floating point."""
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    if not leaves:
        raise ValueError("params has no array leaves")
    for path, x in leaves:
        dtype = jnp.result_type(x)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(
                f"parameter {jax.tree_util.keystr(path) or '(root)'} has dtype {dtype}; "
                "SGRLD samples real-valued parameters: cast it to a floating dtype"
            )
    return jax.tree.map(jnp.asarray, params)


def as_schedule(learning_rate: float | Schedule) -> Schedule:
    """Return a schedule ``step -> learning rate``, validating constants and ``schedule(0)``."""
    if callable(learning_rate):
        first = learning_rate(0)
        try:
            first = float(first)
        except (TypeError, jax.errors.ConcretizationTypeError):
            return learning_rate
        if not (math.isfinite(first) and first > 0):
            raise ValueError(f"learning_rate schedule gives {first} at step 0; it must be > 0")
        return learning_rate
    lr = float(learning_rate)
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"learning_rate must be a finite number > 0, got {learning_rate}")
    return lambda step: jnp.asarray(lr, jnp.float32)


def first_nonfinite(*trees: PyTree) -> jax.Array:
    """Index of the first leaf (over the leaves of each tree, in order) with a NaN/inf, or −1."""
    bad = jnp.stack(
        [~jnp.all(jnp.isfinite(x)) for tree in trees for x in jax.tree.leaves(tree)]
    ).reshape(len(trees), -1)
    per_leaf = jnp.any(bad, axis=0)
    return jnp.where(jnp.any(per_leaf), jnp.argmax(per_leaf), -1).astype(jnp.int32)


def sgrld(
    potential_fn: Callable[[PyTree, PyTree], jax.Array],
    metric: Metric,
    learning_rate: float | Schedule,
    num_data: int,
    temperature: float = 1.0,
    adapt_until: int | None = None,
    *,
    correction: str | None = None,
    correction_scale: float = 1.0,
    num_probes: int = 1,
    correction_warmup: int | None = None,
    prior_in_metric: bool = True,
    max_drift_norm: float | None = None,
) -> Sampler:
    """SGRLD: an Euler–Maruyama step of Riemannian Langevin dynamics with a stochastic gradient.

    With ``g = ∇Û(θ_t)/N`` (the per-datum potential, :func:`sgrld.potential`), ``lr`` the learning
    rate, ``T`` the temperature and ``ξ ~ N(0, I)``::

        θ_{t+1} = θ_t − lr·G⁻¹g + c·(lr/N)·T·Γ̂(θ_t) + √(2·lr·T/N)·G^{−1/2}ξ,

    the step ``h = lr/N`` of ``dθ = −G⁻¹∇U dt + TΓ dt + √(2T) G^{−1/2} dW``, whose stationary
    density is ``p(θ|D)^{1/T}`` when ``c = 1``. The metric's statistic is updated with ``g`` before
    it is applied; after ``adapt_until`` steps it is frozen (a constant preconditioner, Γ = 0).

    Args:
      potential_fn: ``(params, batch) -> Û(θ)/N``; :func:`sgrld.potential` builds one.
      metric: a :class:`~sgrld.metrics.Metric` from :mod:`sgrld.metrics`.
      learning_rate: ``lr = h·N``, a float or a schedule ``step -> lr``.
      num_data: N, the training-set size.
      temperature: T ≥ 0; 0 gives the deterministic preconditioned gradient step.
      adapt_until: freeze the metric after this many steps (``None``: adapt forever).
      correction: ``None`` (Γ dropped, as published), ``"hutchinson"`` or ``"exact"``
        (:mod:`sgrld.correction`).
      correction_scale: c; 1 is the correct sampler, ``1 − decay`` reproduces TensorFlow
        Probability's pSGLD (autodiff through the moving average), 0 equals ``None``.
      num_probes: Rademacher probes per step for ``"hutchinson"``.
      correction_warmup: metric updates before Γ is applied (``None``: the metric's ``warmup``,
        ``⌈3/(1 − decay)⌉``, so that D_S F is not evaluated at a statistic still near its initial
        value). The sampler is uncorrected during this transient.
      prior_in_metric: whether the prior's gradient enters the metric's statistic (the paper: yes;
        Marceau-Caron & Ollivier: no). ``False`` needs a potential from :func:`sgrld.potential`.
      max_drift_norm: if set, a step whose ‖G⁻¹g‖ exceeds it uses the identity metric scaled by
        ``max_drift_norm/‖g‖`` instead (Yu et al. App. A.4 use 1000 for Monge on the funnel);
        counted in ``info.drift_fallback``.

    Returns:
      A :class:`Sampler` with ``init(params) -> SGRLDState`` and
      ``step(key, state, batch) -> (SGRLDState, SGRLDInfo)``, both pure and jit/vmap-able.

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
    if not isinstance(metric, Metric):
        raise TypeError(f"metric must be an sgrld.metrics.Metric, got {type(metric).__name__}")
    schedule = as_schedule(learning_rate)
    if isinstance(num_data, bool) or int(num_data) != num_data or num_data < 1:
        raise ValueError(f"num_data must be a positive integer, got {num_data!r}")
    num_data = int(num_data)
    if isinstance(potential_fn, Potential) and potential_fn.num_data != num_data:
        raise ValueError(
            f"num_data={num_data} differs from the potential's num_data={potential_fn.num_data}; "
            "the noise scale √(2·lr·T/N) and the potential's prior weight 1/N must use the same N"
        )
    temperature = float(temperature)
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
    if adapt_until is not None and (int(adapt_until) != adapt_until or adapt_until < 0):
        raise ValueError(f"adapt_until must be None or an integer >= 0, got {adapt_until!r}")
    correction = corr.check_mode(correction)
    correction_scale = float(correction_scale)
    if not math.isfinite(correction_scale):
        raise ValueError(f"correction_scale must be finite, got {correction_scale}")
    if int(num_probes) < 1:
        raise ValueError(f"num_probes must be >= 1, got {num_probes}")
    warmup = metric.warmup if correction_warmup is None else int(correction_warmup)
    if warmup < 0:
        raise ValueError(f"correction_warmup must be None or >= 0, got {correction_warmup}")
    if not prior_in_metric and not isinstance(potential_fn, Potential):
        raise TypeError("prior_in_metric=False needs a potential built by sgrld.potential(...)")
    if max_drift_norm is not None and not float(max_drift_norm) > 0:
        raise ValueError(f"max_drift_norm must be None or > 0, got {max_drift_norm}")
    use_gamma = (
        correction is not None
        and correction_scale != 0.0
        and temperature > 0.0
        and metric.statistic is not None
    )

    def gradients(params, batch):
        value, g = jax.value_and_grad(potential_fn)(params, batch)
        if jnp.shape(value) != ():
            raise ValueError(f"potential_fn must return a scalar, got shape {jnp.shape(value)}")
        if prior_in_metric:
            return value, g, g
        g_prior = jax.grad(potential_fn.prior_term)(params)
        return value, g, jax.tree.map(jnp.subtract, g, g_prior)

    def plain(key, params, batch, metric_state):
        value, g, gm = gradients(params, batch)
        return value, g, metric.update(metric_state, gm), jax.tree.map(jnp.zeros_like, params)

    def corrected(key, params, batch, metric_state):
        z = corr.probes(correction, key, params, num_probes)
        fn = lambda p: gradients(p, batch)
        if correction == "hutchinson" and num_probes == 1:
            (value, g, gm), (_, _, hz) = jax.jvp(fn, (params,), (jax.tree.map(lambda x: x[0], z),))
            hz = jax.tree.map(lambda x: x[None], hz)
        else:
            (value, g, gm), linear = jax.linearize(fn, params)
            hz = jax.vmap(lambda v: linear(v)[2])(z)
        metric_state = metric.update(metric_state, gm)
        reduce = "sum" if correction == "exact" else "mean"
        gamma = corr.gamma_from_probes(metric, metric_state, gm, z, hz, reduce=reduce)
        if warmup:
            warm = metric_state.count > warmup
            gamma = jax.tree.map(lambda x: jnp.where(warm, x, jnp.zeros_like(x)), gamma)
        return value, g, metric_state, gamma

    def frozen(key, params, batch, metric_state):
        value, g, _ = gradients(params, batch)
        return value, g, metric_state, jax.tree.map(jnp.zeros_like, params)

    def init(params: PyTree) -> SGRLDState:
        params = check_params(params)
        return SGRLDState(jnp.zeros((), jnp.int32), params, metric.init(params))

    def step(key: jax.Array, state: SGRLDState, batch: PyTree) -> tuple[SGRLDState, SGRLDInfo]:
        noise_key, probe_key = jax.random.split(key)
        params = state.params
        lr = jnp.asarray(schedule(state.step), jnp.float32)
        adapting = corrected if use_gamma else plain
        if adapt_until is None:
            value, g, metric_state, gamma = adapting(probe_key, params, batch, state.metric_state)
        else:
            value, g, metric_state, gamma = branch_over_chains(
                state.step < adapt_until,
                adapting,
                frozen,
                probe_key,
                params,
                batch,
                state.metric_state,
            )

        xi = normal_like(noise_key, params)
        drift = metric.inv(metric_state, g)
        noise = metric.inv_sqrt(metric_state, xi)
        fallback = jnp.zeros((), bool)
        if max_drift_norm is not None:
            drift_norm = jnp.sqrt(tree_vdot(drift, drift))
            fallback = drift_norm > max_drift_norm
            c = max_drift_norm / jnp.sqrt(tree_vdot(g, g))
            pick = lambda a, b: jax.tree.map(lambda x, y: jnp.where(fallback, x, y), a, b)
            drift = pick(jax.tree.map(lambda x: (c * x).astype(x.dtype), g), drift)
            noise = pick(jax.tree.map(lambda x: (jnp.sqrt(c) * x).astype(x.dtype), xi), noise)
            gamma = pick(jax.tree.map(jnp.zeros_like, gamma), gamma)

        noise_scale = jnp.sqrt(2.0 * lr * temperature / num_data)
        gamma_scale = correction_scale * lr * temperature / num_data

        def move(x, d, n, gm):
            dt = x.dtype
            return x - lr.astype(dt) * d + noise_scale.astype(dt) * n + gamma_scale.astype(dt) * gm

        new_params = jax.tree.map(move, params, drift, noise, gamma)
        bad_leaf = first_nonfinite(new_params, g)
        info = SGRLDInfo(
            potential=value,
            grad_norm=jnp.sqrt(tree_vdot(g, g)),
            learning_rate=lr,
            gamma_norm=jnp.sqrt(tree_vdot(gamma, gamma)),
            drift_fallback=fallback,
            metric_fallbacks=metric_state.fallbacks,
            is_finite=bad_leaf < 0,
            nonfinite_leaf=bad_leaf,
        )
        return SGRLDState(state.step + 1, new_params, metric_state), info

    return Sampler(init, step)
