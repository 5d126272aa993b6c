"""Prototype for issue 36: SGRLD whose Γ is scaled by an online estimate of the share ĉ it needs.

DERIVATION.md derives the drift: for a metric ``G⁻¹ = F(S_t)`` with ``S_t`` a moving average of a
statistic ``s(θ)``, the θ-marginal of the chain is the target iff the applied correction has the
conditional mean ``∇·E[F(S_t) | θ_t = θ]``. Linearising ``E[S_t | θ_t]`` in θ gives, for a probe z,

    Γ̂ = D_S[F(S_t)·z] ( s′(g)·H(C z) ),    C = Cov(θ̄_t, θ_t) Var(θ_t)⁻¹,

with θ̄ the metric's own moving average applied to θ. C is estimated here by its diagonal (per
coordinate, or pooled per leaf), ``ĉ = Cov(θ_t, θ̄_t)/Var(θ_t)`` clipped to [0, 1], from running
moments whose window is ``window`` times the metric's memory. It enters only the probe of the
Hessian-vector product, so the step costs what the fixed-share Γ step costs plus a few
elementwise operations per parameter. ``order=2`` regresses the quadratic feature (θ − μ)²
instead (the share of a statistic that is quadratic in θ about the mode, Σ_k w_k ρ_k²).

Nothing here edits the library: the step is assembled from sgrld's own parts (the metric,
``gradient_fn``, ``gamma_from_probes``, the preconditioner, the Euler–Maruyama integrator,
``step_info``). FINDINGS.md says which library change it stands for.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld.metrics.metric import INVERSE_SQRT, Metric, MetricState, ema_step
from sgrld.numerics.checks import as_schedule, as_temperature
from sgrld.numerics.noise import normal_like
from sgrld.parts.correction import gamma_from_probes, rademacher_like
from sgrld.parts.integrators import euler_maruyama, langevin_scales
from sgrld.samplers.sampler import gradient_fn, step_info

PyTree = Any


class ShareState(NamedTuple):
    """Running moments of the share estimator (one set per chain; leaves shaped like θ).

    Attributes:
      count: int32 updates folded in.
      center: running mean of θ (the centre of the quadratic feature, ``order=2``).
      bar: x̄, the metric's moving average (same decay or 1/√t schedule) applied to the feature x.
      mean: running mean of x.
      mean_bar: running mean of x̄.
      var: running variance of x.
      cov: running covariance of x and x̄.
    """

    count: jax.Array
    center: PyTree
    bar: PyTree
    mean: PyTree
    mean_bar: PyTree
    var: PyTree
    cov: PyTree


def metric_weight(decay: float | str, count: jax.Array) -> jax.Array:
    """The weight of the ``count``-th statistic in the metric's average: 1 − decay or 1/√t."""
    if decay == INVERSE_SQRT:
        return jax.lax.rsqrt(jnp.maximum(count, 1).astype(jnp.float32))
    return jnp.asarray(1.0 - decay, jnp.float32)


def share_init(params: PyTree) -> ShareState:
    """Zero moments; x̄ starts at the first feature (set by the first update, weight 1)."""
    f32 = lambda x: jnp.zeros(jnp.shape(x), jnp.float32)
    z = jax.tree.map(f32, params)
    return ShareState(jnp.zeros((), jnp.int32), z, z, z, z, z, z)


def share_update(
    state: ShareState,
    params: PyTree,
    *,
    decay: float | str,
    window: Any,
    order: Any,
    lag: bool = False,
) -> ShareState:
    """Fold θ_t into the moments.

    x̄ follows the metric's schedule exactly (``ema_step``); its first update has weight 1 so x̄
    starts at x_1 instead of at 0 (for a constant decay the metric starts from S_0, which only
    its warm-up forgets). The moments use the weight ``max(1/t, w_t/window)``: a plain mean at
    first, then a moving window of ``window`` memories of the metric (``w_t`` its weight).
    ``lag=True`` pairs x_t with x̄_{t−1} (a metric applied before it folds in the step's
    statistic: C = Cov(θ_t, θ̄_{t−1})/Var(θ_t)).
    """
    count = state.count + 1
    w = metric_weight(decay, count)
    lam = jnp.maximum(1.0 / count.astype(jnp.float32), w / window)
    theta = jax.tree.map(lambda p: p.astype(jnp.float32), params)
    center = jax.tree.map(lambda c, p: c + lam * (p - c), state.center, theta)
    if isinstance(order, int) and order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order}")
    if isinstance(order, int):
        x = (
            theta
            if order == 1
            else jax.tree.map(lambda p, c: jnp.square(p - c), theta, state.center)
        )
    else:  # a traced order (variants side by side)
        x = jax.tree.map(
            lambda p, c: jnp.where(order == 2, jnp.square(p - c), p), theta, state.center
        )
    first = count == 1
    bar = jax.tree.map(
        lambda b, xi: jnp.where(first, xi, ema_step(decay, count, b, xi)), state.bar, x
    )

    def moments(m, mb, v, c, xi, bi):
        d, e = xi - m, bi - mb
        return (
            m + lam * d,
            mb + lam * e,
            (1 - lam) * (v + lam * d * d),
            (1 - lam) * (c + lam * d * e),
        )

    paired = jax.tree.map(lambda b, old: jnp.where(first, b, old), bar, state.bar) if lag else bar
    out = jax.tree.map(moments, state.mean, state.mean_bar, state.var, state.cov, x, paired)
    pick = lambda i: jax.tree.map(lambda t: t[i], out, is_leaf=lambda t: isinstance(t, tuple))
    return ShareState(count, center, bar, pick(0), pick(1), pick(2), pick(3))


def share_value(state: ShareState, pool: str = "coordinate") -> PyTree:
    """ĉ = Cov(x, x̄)/Var(x), clipped to [0, 1]; 1 where x has not varied (a still chain).

    ``pool="leaf"`` pools each leaf: Σ Cov / Σ Var (a variance-weighted mean of the ratios).
    """

    def ratio(c, v):
        if pool == "leaf":
            c, v = jnp.sum(c), jnp.sum(v)
        r = jnp.where(v > 0, c / jnp.where(v > 0, v, 1.0), 1.0)
        return jnp.broadcast_to(jnp.clip(r, 0.0, 1.0), jnp.shape(c) if pool != "leaf" else ())

    if pool not in ("coordinate", "leaf"):
        raise ValueError(f"pool must be 'coordinate' or 'leaf', got {pool!r}")
    return jax.tree.map(ratio, state.cov, state.var)


class Config(NamedTuple):
    """What one chain applies (arrays, so that variants can be vmapped side by side).

    Attributes:
      scale: the fixed share c (used where ``auto`` is False).
      auto: use ĉ instead of ``scale``.
      freeze_at: steps after which the metric is frozen and Γ dropped (a huge number: never).
      freeze_average: at ``freeze_at`` replace the statistic by its plain average over the steps
        ``[freeze_at/2, freeze_at)`` (Stan's windowed warm-up) instead of keeping the last EMA.
      window: the share's moment window in memories of the metric (``None``: make_step's).
      order: 1 or 2 (``None``: make_step's).
    """

    scale: Any = 1.0
    auto: Any = True
    freeze_at: Any = None
    freeze_average: Any = False
    window: Any = None
    order: Any = None


class AdaptiveState(NamedTuple):
    """State of a chain: step, θ, the metric's state, the share's moments and a window average
    of the statistic (for ``freeze_average``; zeros otherwise)."""

    step: jax.Array
    params: PyTree
    metric_state: MetricState
    share: ShareState
    stat_sum: PyTree


class AdaptiveInfo(NamedTuple):
    """SGRLDInfo's fields (``sgrld.sample`` reads them) and the share's diagnostics."""

    potential: jax.Array
    grad_norm: jax.Array
    learning_rate: jax.Array
    gamma_norm: jax.Array
    drift_fallback: jax.Array
    metric_fallbacks: jax.Array
    is_finite: jax.Array
    nonfinite_leaf: jax.Array
    share_mean: jax.Array
    gamma: PyTree
    inv_one: PyTree


def _tree_where(pred, a, b):
    return jax.tree.map(lambda x, y: jnp.where(pred, x, y), a, b)


def make_step(
    potential_fn: Callable,
    metric: Metric,
    *,
    decay: float | str,
    learning_rate: float | Callable,
    num_data: int,
    temperature: float = 1.0,
    window: float = 20.0,
    order: int = 1,
    pool: str = "coordinate",
    warmup: int | None = None,
    prior_in_metric: bool = True,
    record: bool = False,
    lag: bool = False,
) -> tuple[Callable, Callable]:
    """``(init, step)`` with ``step(cfg, key, state, batch) -> (state, info)``.

    Args:
      potential_fn: ``(params, batch) -> Û/N`` (:func:`sgrld.potential`).
      metric: the metric; ``decay`` must be the decay it was built with.
      decay: the metric's decay (a float or ``"inverse_sqrt"``): x̄ uses the same schedule.
      learning_rate: lr = h·N, a float or schedule.
      num_data: N.
      temperature: T.
      window: the share's moment window, in memories of the metric.
      order: 1 (regress θ) or 2 (regress (θ − μ)²).
      pool: ``"coordinate"`` or ``"leaf"``.
      warmup: metric updates before Γ (``None``: the metric's warm-up, as the library).
      prior_in_metric: as :func:`sgrld.sgrld`.
      record: put Γ̂ and ``G⁻¹·1`` in ``info`` (diagnostics of the 1-D runs; else zeros).
      lag: precondition with the metric *before* it folds in the step's statistic (S_{t−1}), so
        that G⁻¹ is independent of the step's minibatch noise; the share pairs θ_t with θ̄_{t−1}.
    """
    schedule, temperatures = as_schedule(learning_rate), as_temperature(temperature)
    gradients = gradient_fn(potential_fn, prior_in_metric, metric)
    integrator = euler_maruyama()
    steps_warm = metric.warmup if warmup is None else warmup

    def init(params):
        ms = metric.init(params)
        zeros = jax.tree.map(lambda s: jnp.zeros_like(s), ms.stat)
        return AdaptiveState(jnp.zeros((), jnp.int32), params, ms, share_init(params), zeros)

    def step(cfg: Config, key, state: AdaptiveState, batch):
        noise_key, probe_key = jax.random.split(key)
        params = state.params
        lr = jnp.asarray(schedule(state.step), jnp.float32)
        temp = temperatures(state.step)
        share_state = share_update(
            state.share,
            params,
            decay=decay,
            window=window if cfg.window is None else cfg.window,
            order=order if cfg.order is None else cfg.order,
            lag=lag,
        )
        if cfg.auto is True:
            c = share_value(share_state, pool)
        else:
            auto = share_value(share_state, pool)
            c = jax.tree.map(lambda a: jnp.where(cfg.auto, a, cfg.scale), auto)
        z = jax.tree.map(lambda x: x[0], rademacher_like(probe_key, params, 1))
        tangent = jax.tree.map(lambda ci, zi: (ci * zi).astype(zi.dtype), c, z)
        grad_fn = partial(gradients, batch=batch, key=jax.random.fold_in(probe_key, 1))
        (value, g, gm), (_, _, hgm) = jax.jvp(grad_fn, (params,), (tangent,))
        ms = metric.update(state.metric_state, gm)
        stat_sum = state.stat_sum
        adapting = True
        if cfg.freeze_at is not None:
            adapting = state.step < cfg.freeze_at
            half = cfg.freeze_at // 2
            in_window = (state.step >= half) & adapting
            stat_sum = jax.tree.map(
                lambda a, s: a + jnp.where(in_window, s, 0.0), state.stat_sum, ms.stat
            )
            averaged = jax.tree.map(
                lambda a: a / jnp.maximum(cfg.freeze_at - half, 1).astype(a.dtype), stat_sum
            )
            at_freeze = (state.step == cfg.freeze_at) & cfg.freeze_average
            frozen = _tree_where(
                at_freeze, state.metric_state._replace(stat=averaged), state.metric_state
            )
            ms = _tree_where(adapting, ms, frozen)
        applied = ms
        if lag:  # the metric the step applies: the state before this step's statistic
            applied = state.metric_state
            if cfg.freeze_at is not None:
                applied = _tree_where(adapting, state.metric_state, ms)
        gamma = gamma_from_probes(
            metric,
            applied,
            gm,
            jax.tree.map(lambda x: x[None], z),
            jax.tree.map(lambda x: x[None], hgm),
            reduce="mean",
        )
        on = applied.count > steps_warm
        if cfg.freeze_at is not None:
            on = on & adapting
        gamma = jax.tree.map(lambda x: jnp.where(on, x, jnp.zeros_like(x)), gamma)
        xi = normal_like(noise_key, params)
        drift = metric.inv(applied, g)
        noise = metric.inv_sqrt(applied, xi)
        scales = langevin_scales(lr, temperature=temp, num_data=num_data, correction_scale=1.0)
        new_params = integrator.move(params, drift, noise, gamma, scales)
        base = step_info(value, g, lr, new_params, gamma=gamma, metric_fallbacks=ms.fallbacks)
        leaves = jax.tree.leaves(c)
        share_mean = sum(jnp.sum(x) for x in leaves) / sum(jnp.size(x) for x in leaves)
        if record:
            inv_one = metric.inv(applied, jax.tree.map(jnp.ones_like, params))
            rec_gamma = jax.tree.map(lambda x: x * scales.gamma, gamma)
        else:
            inv_one = rec_gamma = jax.tree.map(lambda x: jnp.zeros((), x.dtype), params)
        info = AdaptiveInfo(*base, share_mean, rec_gamma, inv_one)
        new = AdaptiveState(state.step + 1, new_params, ms, share_state, stat_sum)
        return new, info

    return init, step


class Sampler(NamedTuple):
    """``init(params) -> state``, ``step(key, state, batch) -> (state, info)``: the contract."""

    init: Callable
    step: Callable


def adaptive_sgrld(
    potential_fn: Callable,
    metric: Metric,
    *,
    decay: float | str,
    learning_rate: float | Callable,
    num_data: int,
    temperature: float = 1.0,
    window: float = 20.0,
    order: int = 1,
    pool: str = "coordinate",
    warmup: int | None = None,
    prior_in_metric: bool = True,
) -> Sampler:
    """SGRLD with Γ̂ along the probe ĉ⊙z: the prototype of ``correction_scale="auto"``.

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> u = sgrld.samples.targets.standard_normal().potential
      >>> s = adaptive_sgrld(u, sgrld.metrics.monge(decay=0.9), decay=0.9, learning_rate=1e-3,
      ...                    num_data=1)
      >>> state, info = jax.jit(s.step)(jax.random.key(0), s.init(jnp.ones(())), jnp.zeros(()))
      >>> int(state.step), bool(info.is_finite)
      (1, True)
    """
    init, step = make_step(
        potential_fn,
        metric,
        decay=decay,
        learning_rate=learning_rate,
        num_data=num_data,
        temperature=temperature,
        window=window,
        order=order,
        pool=pool,
        warmup=warmup,
        prior_in_metric=prior_in_metric,
    )
    return Sampler(init, partial(step, Config()))
