"""The sampler contract: :class:`Sampler`, a NamedTuple ``(init, step)`` with
``step(key, state, batch) -> (state, info)`` (BlackJAX's), which every sampler of the library
returns and :func:`sgrld.sample`, the engine and the runner run unchanged.

Example:
  >>> import jax, jax.numpy as jnp
  >>> s = Sampler(lambda params: params, lambda key, state, batch: (state + batch, ()))
  >>> s.step(jax.random.key(0), s.init(jnp.zeros(())), 1.0)[0].item()
  1.0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.guarantee import Adaptation
from sgrld.samplers.rate_search import RateSearch


class Sampler(NamedTuple):
    """A sampler: ``init(params) -> state`` and ``step(key, state, batch) -> (state, info)``.

    ``adaptation`` (SGRLD's; ``None`` for the others) says how the metric adapts, and resolves
    ``adapt_until="auto"`` from a run's burn-in (:class:`sgrld.samplers.guarantee.Adaptation`).
    ``rate_search`` (``learning_rate="auto"``; ``None`` otherwise) builds the sampler at the rate
    a run chooses in its burn-in (:class:`sgrld.samplers.rate_search.RateSearch`).
    """

    init: Callable[[PyTree], Any]
    step: Callable[[jax.Array, Any, PyTree], tuple[Any, Any]]
    adaptation: Adaptation | None = None
    rate_search: RateSearch | None = None
