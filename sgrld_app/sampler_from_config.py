"""From a configuration's ``[sampler]`` and ``[schedule]`` sections to a sampler: the factory of
``sampler.kind`` with its options, the metric, the step-size schedule, and the size check of the
exact correction."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax

from sgrld.chains.sampling import with_burn_in
from sgrld.metrics.monge import AUTO, SEARCHED_ALPHA2
from sgrld.numerics import schedules
from sgrld.numerics.potential import Potential
from sgrld.numerics.pytrees import PyTree
from sgrld.parts.correction import resolved_mode
from sgrld.samplers.guarantee import Adaptation, auto_freeze, guarantee
from sgrld.samplers.rate_search import is_auto
from sgrld.samplers.sampler import Sampler
from sgrld.samplers.sampler import sgrld as langevin_sgrld
from sgrld_app.config import METRICS, SAMPLERS, Config, ConfigError
from sgrld_app.config.schema import SamplerConfig, ScheduleConfig

EXACT_MAX_BYTES = 2**30
"""The largest [D, D] float32 Jacobian ``correction = "exact"`` may need (D parameters)."""


def check_exact_size(config: Config, params: PyTree) -> None:
    """Refuse ``sampler.correction = "exact"`` when its D × D matrix of Hessian-vector products
    would exceed :data:`EXACT_MAX_BYTES`, with the size it would need (before compiling)."""
    if config.sampler.correction != "exact":
        return
    size = sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(params))
    need = 4 * size**2
    if need > EXACT_MAX_BYTES:
        raise ConfigError(
            f'sampler.correction = "exact" takes D = {size:,} Hessian-vector products a step and '
            f"a {size:,} x {size:,} matrix ({need / 2**30:,.0f} GiB in float32); use "
            '"hutchinson" (one product a step, unbiased) for a model this size'
        )


def sampler_of(
    s: SamplerConfig,
    potential: Potential,
    num_data: int,
    values: Mapping[str, Any] | None = None,
    schedule: ScheduleConfig | None = None,
    num_steps: int | None = None,
    burn_in: int | None = None,
) -> Sampler:
    """The sampler of ``[sampler]``: ``sampler.kind``'s factory with its options; the metric of
    sgrld, and of sghmc unless it is the identity without options (plain SGHMC).

    Args:
        s: the ``[sampler]`` section.
        potential: the potential ``Û/N``.
        num_data: the training-set size N.
        values: options replaced by other values, by key within ``[sampler]``
            (``"learning_rate"``, ``"metric_params.alpha2"``); they may be traced, one per chain
            (:func:`sgrld.samplers.swept.swept`).
        schedule: the ``[schedule]`` section (``None``: constant), applied to the learning rate
            and temperature (:func:`schedule_options`).
        num_steps: the run's steps, which a cyclical schedule divides into cycles.
        burn_in: the run's burn-in, from which ``adapt_until = "auto"`` is resolved
            (:func:`sgrld.chains.sampling.with_burn_in`; ``None``: not resolved).

    Example:
        >>> import jax, jax.numpy as jnp, sgrld
        >>> u = sgrld.potential(lambda p, b: -0.5 * jnp.sum((p - b) ** 2, -1),
        ...                     lambda p: 0.0, num_data=4)
        >>> s = sampler_of(SamplerConfig(), u, 4, {"learning_rate": 0.5})
        >>> float(s.step(jax.random.key(0), s.init(jnp.zeros(2)), jnp.zeros((4, 2)))[1]
        ...       .learning_rate)
        0.5
    """
    options, metric_params = _options(s, values)
    if is_auto(options.get("learning_rate")) and schedule is not None:
        return _searched(s, potential, num_data, values, schedule, num_steps, burn_in)
    if schedule is not None:
        options |= schedule_options(schedule, options, num_steps)
    metric = METRICS[s.metric](**metric_params)
    if s.kind == "sgrld":
        options["adapt_until"] = adapt_until_of(s.adapt_until)
        sampler = langevin_sgrld(potential, metric, num_data=num_data, **options)
        if burn_in is None:
            return sampler
        try:
            return with_burn_in(sampler, burn_in)
        except ValueError:
            raise ConfigError(
                f"sampler.adapt_until = {s.adapt_until} is after run.burn_in = {burn_in}: the "
                "first samples would come from a metric still adapting; raise run.burn_in or "
                "lower sampler.adapt_until"
            ) from None
    if s.kind == "sghmc" and (s.metric != "identity" or metric_params):
        options["metric"] = metric
    return SAMPLERS[s.kind](potential, num_data=num_data, **options)


def _options(
    s: SamplerConfig, values: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``[sampler]``'s options and metric parameters, ``values`` replacing theirs by key
    (``"learning_rate"``, ``"metric_params.alpha2"``)."""
    options, metric_params = s.sampler_options(), dict(s.metric_params)
    for key, value in (values or {}).items():
        section, _, name = key.rpartition(".")
        (metric_params if section == "metric_params" else options)[name] = value
    return options, metric_params


def configured_sampler(
    config: Config, potential: Potential, n: int, values: Mapping[str, Any] | None = None
) -> Sampler:
    """:func:`sampler_of` a whole configuration: its ``[sampler]`` under its ``[schedule]`` over
    the run's steps on ``n`` training rows, the burn-in ``run.burn_in``; ``values`` as there."""
    return sampler_of(
        config.sampler,
        potential,
        n,
        values,
        schedule=config.schedule,
        num_steps=config.num_steps(n),
        burn_in=config.burn_in_steps(n),
    )


def searched_option(s: SamplerConfig) -> tuple[str, tuple[float, ...]] | None:
    """The option of ``[sampler]`` a ``learning_rate = "auto"`` search chooses beside the rate
    (:attr:`sgrld_app.experiment.Experiment.searched_option`): Monge's α²
    (:data:`sgrld.metrics.monge.SEARCHED_ALPHA2`; two halvings keep ``sgrld run`` on MNIST within
    1.5× a run at the chosen rate, three took 1.92×) where the metric is Monge's, preconditions
    the sampler and α² is not given or is ``"auto"``; else ``None``.

    Example:
        >>> searched_option(SamplerConfig(metric="monge", metric_params={"alpha2": "auto"}))
        ('metric_params.alpha2', (0.1, 0.0))
        >>> searched_option(SamplerConfig(metric="monge", metric_params={"alpha2": 0.5}))
    """
    auto = is_auto(s.sampler_options().get("learning_rate"))
    if auto and s.metric == "monge" and s.kind in ("sgrld", "sghmc"):
        if s.metric_params.get("alpha2", AUTO) == AUTO:
            return "metric_params.alpha2", SEARCHED_ALPHA2
    return None


def _searched(s, potential, num_data, values, schedule, num_steps, burn_in) -> Sampler:
    """The ``learning_rate="auto"`` sampler of ``[sampler]`` under ``[schedule]``: the search
    chooses the schedule's scale (its rate at step 0)."""
    constant = sampler_of(s, potential, num_data, values, None, num_steps, burn_in)

    def build(lr):
        return sampler_of(
            s,
            potential,
            num_data,
            {**(values or {}), "learning_rate": lr},
            schedule,
            num_steps,
            burn_in,
        )

    return constant._replace(rate_search=constant.rate_search._replace(build=build))


def adapt_until_of(value: int | str | None) -> int | str | None:
    """``sampler.adapt_until`` as :func:`sgrld.sgrld` takes it: ``"never"`` (TOML has no null)
    is ``None``; an integer or ``"auto"`` as it is.

    Example:
        >>> adapt_until_of("never"), adapt_until_of("auto"), adapt_until_of(500)
        (None, 'auto', 500)
    """
    if value == "never":
        return None
    if isinstance(value, str) and value != "auto":
        raise ConfigError(f'sampler.adapt_until: an integer >= 0, "auto" or "never", got {value!r}')
    return value


def guarantee_of(
    config: Config, num_train: int | None = None, values: Mapping[str, Any] | None = None
) -> str:
    """The guarantee of the run ``config`` describes (:func:`sgrld.samplers.guarantee.guarantee`),
    from its ``[sampler]`` (``values`` replacing options by key, as :func:`sampler_of`'s: Monge's
    α² once chosen) and ``run.burn_in`` (``"auto"``: of the run on ``num_train`` training rows);
    what ``summary.json`` records as ``guarantee``.

    Example:
        >>> from sgrld_app.config import load_config
        >>> guarantee_of(load_config(None, ["sampler.metric=rmsprop", "run.burn_in=1000"]))
        'exact: metric frozen at step 750 (window average of the statistic)'
        >>> guarantee_of(load_config(None, ["sampler.metric=rmsprop", "sampler.adapt_until=never"]))
        'uncorrected: stationary density p·G^{1−c}, c = 0 (Rensmeyer & Niggemann)'
    """
    s = config.sampler
    if s.kind not in ("sgrld", "sghmc") or (s.kind == "sghmc" and s.metric == "identity"):
        return guarantee(None)
    metric = METRICS[s.metric](**_options(s, values)[1])
    until = adapt_until_of(s.adapt_until) if s.kind == "sgrld" else None
    averaged = False
    if until == "auto":
        until, average_from = auto_freeze(metric, config.burn_in_steps(num_train))
        averaged = average_from is not None
    limit = s.gamma_kick_limit if s.kind == "sgrld" else None
    mode = resolved_mode(s.correction, metric, until if s.kind == "sgrld" else None)
    about = Adaptation(metric, until, averaged, mode, s.correction_scale, gamma_kick_limit=limit)
    return guarantee(about)


def cyclical_of(schedule: ScheduleConfig, num_steps: int | None) -> schedules.Cyclical:
    """The unit cyclical schedule (learning rate from 1, temperature 1 in the sampling phases)
    of a ``schedule.kind = "cyclical"`` section over ``num_steps`` steps."""
    if not num_steps:
        raise ValueError("a cyclical schedule needs the run's number of steps (num_steps)")
    if schedule.cycles > num_steps:
        raise ConfigError(
            f"schedule.cycles = {schedule.cycles} is more than the run's {num_steps} steps"
        )
    return schedules.cyclical(
        1.0, num_steps=num_steps, num_cycles=schedule.cycles, exploration=schedule.exploration
    )


def schedule_options(
    schedule: ScheduleConfig, options: Mapping[str, Any], num_steps: int | None
) -> dict[str, Any]:
    """The ``learning_rate`` (and, cyclical, ``temperature``) options of a sampler under
    ``[schedule]``: schedules ``step -> value`` scaling the options' own values, which may be
    traced per-chain values (:func:`sgrld.samplers.swept.swept`); ``{}`` for a constant schedule.

    Example:
        >>> opts = schedule_options(ScheduleConfig(kind="polynomial", offset=10.0, power=1.0),
        ...                         {"learning_rate": 0.5, "temperature": 1.0}, 100)
        >>> [float(opts["learning_rate"](t)) for t in (0, 10)]
        [0.5, 0.25]
        >>> opts = schedule_options(ScheduleConfig(kind="cyclical", cycles=2, exploration=0.5),
        ...                         {"learning_rate": 0.5, "temperature": 1.0}, 8)
        >>> [round(float(opts["learning_rate"](t)), 3) for t in range(4)]
        [0.5, 0.427, 0.25, 0.073]
        >>> [float(opts["temperature"](t)) for t in range(4)]
        [0.0, 0.0, 1.0, 1.0]
    """
    if schedule.kind == "constant":
        return {}
    lr, temperature = options["learning_rate"], options.get("temperature", 1.0)
    if schedule.kind == "polynomial":
        unit = schedules.polynomial(1.0, offset=schedule.offset, power=schedule.power)
        return {"learning_rate": lambda t: lr * unit(t)}
    if schedule.kind == "cyclical":
        unit = cyclical_of(schedule, num_steps)
        return {
            "learning_rate": lambda t: lr * unit.learning_rate(t),
            "temperature": lambda t: temperature * unit.temperature(t),
        }
    raise ValueError(f"unknown schedule.kind {schedule.kind!r}")
