"""SGD as a :class:`~sgrld.Sampler`: the plain MAP/ML "baseline" of Franzese et al. (2021), and the
optimiser step every baseline of :mod:`sgrld.samplers.baselines` trains with.

With ``g_t = ∇loss(θ_t; batch_t)`` (for a :func:`sgrld.potential`, ``loss = Û/N``: the minibatch
mean NLL minus ``log p(θ)/N``, whose minimum is the MAP estimate), an optional velocity ``v`` and
weight decay ``wd``::

    v_{t+1} = μ·v_t + g_t + wd·θ_t          (μ = momentum; v = g + wd·θ when μ = 0)
    θ_{t+1} = θ_t − lr_t·v_{t+1}

which at ``μ = wd = 0`` is the drift of every sampler at temperature 0 in the units of the README
("Conventions": ``learning_rate = h·N``). The step is optax's (``add_decayed_weights``, ``trace``,
``scale_by_learning_rate``); its state rides in :class:`SGDState`, so epochs run on the engine and
the runner like any sampler's. Kept as the runner keeps samples, the iterates are scored by the
same ensemble evaluation: keeping only the last one (``burn_in = 0``, ``thin`` = the number of
steps) gives the single-network baseline, keeping every ``k``-th after a burn-in at a constant
learning rate is :func:`sgrld.samplers.baselines.vsgd`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from sgrld.numerics.checks import as_schedule, check_params
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.contract import Sampler
from sgrld.samplers.info import step_info

Loss = Callable[..., jax.Array]
"""``(params, batch) -> scalar``, or ``(params, batch, key) -> scalar`` with ``takes_key``."""


class SGDState(NamedTuple):
    """State of an SGD chain.

    Attributes:
      step: int32 number of steps taken.
      params: the iterate θ_t.
      opt_state: optax's state (the velocity, the schedule's count).
    """

    step: jax.Array
    params: PyTree
    opt_state: Any


class Descent(NamedTuple):
    """The optimiser of a baseline: the optax transformation, the loss with a key argument, the
    learning-rate schedule (for ``info``)."""

    transform: optax.GradientTransformation
    loss: Callable[[PyTree, PyTree, jax.Array], jax.Array]
    schedule: Callable[[jax.Array], jax.Array]


def descent(
    loss_fn: Loss,
    learning_rate: float | Callable,
    *,
    momentum: float,
    weight_decay: float,
    takes_key: bool = False,
) -> Descent:
    """The :class:`Descent` of ``θ ← θ − lr·v``, ``v ← μ·v + ∇loss + wd·θ`` (checked options).

    Args:
      loss_fn: the loss (:data:`Loss`).
      learning_rate: ``lr``, a float > 0 or a schedule ``step -> lr``.
      momentum: μ ∈ [0, 1).
      weight_decay: wd ≥ 0 (on top of any prior in the loss).
      takes_key: whether ``loss_fn`` takes a PRNG key (dropout masks) as its third argument.

    Example:
      >>> import jax.numpy as jnp
      >>> d = descent(lambda w, b: jnp.sum((w - b) ** 2), 0.25, momentum=0.0, weight_decay=0.0)
      >>> float(d.loss(jnp.zeros(()), 1.0, None)), float(d.schedule(0))
      (1.0, 0.25)
    """
    schedule = as_schedule(learning_rate)
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"momentum must lie in [0, 1), got {momentum}")
    if not weight_decay >= 0.0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    parts = [optax.add_decayed_weights(weight_decay)] if weight_decay else []
    if momentum:
        parts.append(optax.trace(decay=momentum))
    parts.append(optax.scale_by_learning_rate(schedule))
    loss = loss_fn if takes_key else (lambda params, batch, key: loss_fn(params, batch))
    return Descent(optax.chain(*parts), loss, schedule)


def descend(
    d: Descent, key: jax.Array, params: PyTree, opt_state: Any, batch: PyTree
) -> tuple[jax.Array, PyTree, PyTree, Any]:
    """One optimiser step from ``params``: ``(loss, gradient, new_params, new_opt_state)``, the
    loss and its gradient at ``params`` on ``batch`` (its masks, if any, from ``key``)."""
    value, grads = jax.value_and_grad(d.loss)(params, batch, key)
    updates, opt_state = d.transform.update(grads, opt_state, params)
    return value, grads, optax.apply_updates(params, updates), opt_state


def sgd(
    loss_fn: Loss,
    learning_rate: float | Callable,
    *,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    takes_key: bool = False,
) -> Sampler:
    """SGD (optionally with momentum and weight decay) as a sampler whose states are its iterates:
    ``v ← μ·v + ∇loss(θ) + wd·θ``, ``θ ← θ − lr_t·v`` (module docstring).

    Args:
      loss_fn: ``(params, batch) -> scalar``, e.g. a :func:`sgrld.potential` (MAP) or a
        likelihood-only potential (ML); with ``takes_key``, ``(params, batch, key)``.
      learning_rate: ``lr``, a float > 0 or a schedule ``step -> lr``
        (:mod:`sgrld.numerics.schedules`).
      momentum: μ ∈ [0, 1).
      weight_decay: wd ≥ 0.
      takes_key: ``loss_fn`` takes the step's PRNG key (e.g. for dropout masks).

    Returns:
      A :class:`~sgrld.Sampler` with :class:`SGDState` and :class:`~sgrld.StepInfo` (Γ = 0).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> s = sgd(lambda w, b: 0.5 * jnp.sum((w - b) ** 2), 0.5)
      >>> state = s.init(jnp.zeros(2))
      >>> for _ in range(3):
      ...     state, info = s.step(jax.random.key(0), state, jnp.ones(2))
      >>> state.params.tolist(), int(state.step)   # 1 − 0.5³
      ([0.875, 0.875], 3)

    References:
      Franzese et al., Entropy 2021 (the "baseline" rows of its tables).
    """
    d = descent(
        loss_fn, learning_rate, momentum=momentum, weight_decay=weight_decay, takes_key=takes_key
    )
    return Sampler(partial(_init, d), partial(_step, d))


def init_state(d: Descent, params: PyTree) -> tuple[PyTree, Any]:
    """Checked parameters and the optimiser's initial state."""
    params = check_params(params)
    return params, d.transform.init(params)


def _init(d: Descent, params: PyTree) -> SGDState:
    params, opt_state = init_state(d, params)
    return SGDState(jnp.zeros((), jnp.int32), params, opt_state)


def _step(d: Descent, key, state: SGDState, batch):
    value, grads, params, opt_state = descend(d, key, state.params, state.opt_state, batch)
    info = step_info(value, grads, d.schedule(state.step), params)
    return SGDState(state.step + 1, params, opt_state), info
