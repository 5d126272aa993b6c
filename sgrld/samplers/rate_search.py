"""``learning_rate="auto"``: a sampler whose rate is chosen by the run that samples with it.

Every sampler factory that takes a ``learning_rate`` (:func:`sgrld.sgrld`, :func:`sgrld.sghmc`,
:func:`sgrld.sgnht`, :func:`sgrld.adam_sgld`) also takes ``"auto"`` (:func:`searchable`). It then
returns a :class:`~sgrld.Sampler` whose ``init`` works and whose ``rate_search`` is a
:class:`RateSearch`: ``build(lr)`` gives the sampler at a rate (a number, or a traced value, one per
pilot chain), and the potential, metric, N and T that the search needs. :func:`sgrld.sample`, the
runner, ``sgrld run`` and ``sgrld sweep`` resolve it during the burn-in
(:func:`sgrld.chains.step_size.choose_learning_rate`), as they resolve ``adapt_until="auto"``.
Its ``step`` refuses to run: stepped by hand, no burn-in is known to choose a rate in.

Example:
  >>> import jax.numpy as jnp, sgrld
  >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, lambda w: -0.5 * w**2, 4)
  >>> s = sgrld.sgrld(u, sgrld.metrics.identity(), learning_rate="auto", num_data=4)
  >>> s.rate_search.num_data, s.rate_search.temperature
  (4, 1.0)
  >>> s.step(None, s.init(jnp.zeros(())), jnp.ones(2))
  Traceback (most recent call last):
  ...
  ValueError: learning_rate="auto" is chosen during a run's burn-in by sgrld.sample, ...
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

from sgrld.metrics.metric import Metric

AUTO = "auto"
"""``learning_rate="auto"``: chosen during the burn-in (:mod:`sgrld.chains.step_size`)."""


class RateSearch(NamedTuple):
    """What choosing a sampler's learning rate needs (``Sampler.rate_search``).

    Attributes:
      build: ``lr -> Sampler`` at that rate (``lr`` a number or a traced scalar).
      potential_fn: ``(params, batch) -> Û/N``, the sampler's potential.
      metric: the sampler's metric (``None``: the identity), which scales the rates it tries.
      num_data: N.
      temperature: T at step 0, the target's temperature the criterion checks.
      option: ``(name, values, value -> RateSearch)``: the metric's option chosen beside the
        rate (:attr:`~sgrld.metrics.metric.Metric.searched_option`, Monge's α² where not given):
        the search of the sampler at each value; ``None``: nothing to choose.
    """

    build: Callable[[Any], Any]
    potential_fn: Callable
    metric: Metric | None
    num_data: int
    temperature: float
    option: tuple[str, tuple[float, ...], Callable[[float], RateSearch]] | None = None


def is_auto(learning_rate: Any) -> bool:
    """Whether ``learning_rate`` is ``"auto"`` (and not a number, schedule or array)."""
    return isinstance(learning_rate, str) and learning_rate == AUTO


def _refuse(key, state, batch):
    del key, state, batch
    raise ValueError(
        'learning_rate="auto" is chosen during a run\'s burn-in by sgrld.sample, sgrld run or '
        "sgrld sweep (sgrld.chains.step_size); to step by hand, give a number, or take "
        "sampler.rate_search.build(lr)"
    )


def _temperature_at_start(temperature: Any) -> float:
    t = float(temperature(0)) if callable(temperature) else float(temperature)
    if not t > 0:
        raise ValueError(
            'learning_rate="auto" needs a temperature > 0 (its criterion compares the chains\' '
            f"spread with the target's at T); got T = {t} at step 0: give a number"
        )
    return t


def searchable(metric_of: Callable[[dict[str, Any]], Metric | None]) -> Callable:
    """Decorate a sampler factory so that ``learning_rate="auto"`` gives a searchable sampler.

    Args:
      metric_of: ``arguments -> metric`` of the factory's bound arguments (the metric that
        preconditions its drift, ``None`` for the identity).

    Returns:
      The decorator. With a number or a schedule the factory runs unchanged; with ``"auto"`` it
      returns the factory's sampler at a placeholder rate with ``step`` refused and
      ``rate_search`` set (module docstring).
    """

    def decorate(factory: Callable) -> Callable:
        signature = inspect.signature(factory)

        @functools.wraps(factory)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            if not is_auto(bound.arguments.get("learning_rate")):
                return factory(*args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)

            def build(lr: Any) -> Any:
                return factory(**{**arguments, "learning_rate": lr})

            placeholder = build(1.0)
            adaptation = getattr(placeholder, "adaptation", None)
            if adaptation is not None:
                adaptation = adaptation._replace(learning_rate=None)
            metric = metric_of(arguments)
            search = RateSearch(
                build,
                arguments["potential_fn"],
                metric,
                int(arguments["num_data"]),
                _temperature_at_start(arguments["temperature"]),
                _option(wrapped, arguments, metric),
            )
            return placeholder._replace(step=_refuse, adaptation=adaptation, rate_search=search)

        return wrapped

    return decorate


def _option(factory: Callable, arguments: dict[str, Any], metric: Metric | None) -> Any:
    """:attr:`RateSearch.option` of a sampler whose ``metric`` has an option to choose."""
    if metric is None or metric.searched_option is None:
        return None
    name, values, metric_at = metric.searched_option
    key = next(k for k, v in arguments.items() if v is metric)

    def search_at(value: float) -> RateSearch:
        return factory(**{**arguments, key: metric_at(value)}).rate_search

    return name, values, search_at
