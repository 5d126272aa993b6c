"""A sampler whose hyperparameters (learning rate, Monge's α², temperature …) are part of each
chain's state, so that chains with different values run as one vmapped program (the settings of
``sgrld sweep``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld.samplers.contract import Sampler


class SweptState(NamedTuple):
    """The state of a :func:`swept` sampler: the inner sampler's state and this chain's
    hyperparameters (fixed: no step changes them)."""

    inner: Any
    hyper: dict[str, jax.Array]

    @property
    def params(self) -> Any:
        """The inner state's parameters (the sample)."""
        return self.inner.params

    @property
    def step(self) -> jax.Array:
        """The inner state's step counter."""
        return self.inner.step


def swept(build: Callable[[Mapping[str, jax.Array]], Sampler]) -> Sampler:
    """A sampler whose hyperparameters are part of each chain's state.

    ``init(params, hyper)`` stores ``hyper`` (name -> scalar) next to ``build(hyper).init(params)``;
    ``step(key, state, batch)`` runs ``build(state.hyper).step``, the hyperparameters traced, so
    under ``jax.vmap`` every chain steps with its own values in one compiled program. ``build``
    must accept traced values (:func:`sgrld_app.sampler_from_config.sampler_of` does).

    Args:
        build: ``hyper -> sampler``.

    Returns:
        The :class:`~sgrld.Sampler`; its state is a :class:`SweptState`.

    Example:
        >>> import jax, jax.numpy as jnp, sgrld
        >>> t = sgrld.samples.targets.standard_normal()
        >>> s = swept(lambda h: sgrld.sgrld(t.potential, sgrld.metrics.identity(),
        ...     learning_rate=h["learning_rate"], num_data=1, temperature=0.0))
        >>> lrs = {"learning_rate": jnp.array([0.1, 0.5])}
        >>> state = jax.vmap(s.init, (None, 0))(t.init_params, lrs)  # θ = 1 in both chains
        >>> step = jax.jit(jax.vmap(s.step, (None, 0, None)))
        >>> state, _ = step(jax.random.key(0), state, t.batch_fn(jax.random.key(1)))
        >>> state.params.round(3).tolist()  # θ − lr·θ at T = 0
        [0.9, 0.5]
    """

    def init(params, hyper: Mapping[str, Any]) -> SweptState:
        hyper = {name: jnp.asarray(value, jnp.float32) for name, value in hyper.items()}
        return SweptState(build(hyper).init(params), hyper)

    def step(key, state: SweptState, batch):
        inner, info = build(state.hyper).step(key, state.inner, batch)
        return SweptState(inner, state.hyper), info

    return Sampler(init, step)
