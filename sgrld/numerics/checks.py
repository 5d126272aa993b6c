"""Validation shared by every sampler: arguments checked once, with messages that name them."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld.numerics.pytrees import PyTree
from sgrld.numerics.schedules import Schedule


class Bound(NamedTuple):
    """Where an option's number may lie, declared once beside the factory that checks it and read
    by the configuration's validation (:mod:`sgrld_app.config.validation`), so the two never
    disagree. ``high=None``: no upper bound; ``open_low``/``open_high``: the end is excluded.

    Example:
        >>> friction = Bound(0, 1, open_low=True)
        >>> friction.text(), friction.holds(1.0), friction.rule(0.0), friction.rule(1.5)
        ('in (0, 1]', True, 'must be > 0', 'must lie in (0, 1]')
        >>> Bound(1).text(), Bound(1).holds(float("nan"))
        ('>= 1', False)
    """

    low: float
    high: float | None = None
    open_low: bool = False
    open_high: bool = False

    def _above_low(self, value: float) -> bool:
        return value > self.low if self.open_low else value >= self.low

    def _below_high(self, value: float) -> bool:
        if self.high is None:
            return True
        return value < self.high if self.open_high else value <= self.high

    def holds(self, value: float) -> bool:
        """Whether ``value`` lies inside (NaN never does)."""
        return self._above_low(value) and self._below_high(value)

    def text(self) -> str:
        """The range in words: ``"> 0"``, ``">= 1"``, ``"in (0, 1]"``."""
        if self.high is None:
            return f"{'>' if self.open_low else '>='} {self.low}"
        left, right = "(" if self.open_low else "[", ")" if self.open_high else "]"
        return f"in {left}{self.low}, {self.high}{right}"

    def rule(self, value: float) -> str | None:
        """The rule ``value`` breaks, ``"must be > 0"`` or ``"must lie in (0, 1]"``; ``None``
        where it holds."""
        if not self._above_low(value):
            return f"must be {'>' if self.open_low else '>='} {self.low}"
        if not self._below_high(value):
            return f"must lie {self.text()}"
        return None


LEARNING_RATE = Bound(0, open_low=True)
"""``learning_rate`` (a number; :func:`as_schedule`)."""
TEMPERATURE = Bound(0)
"""``temperature`` (a number; :func:`check_temperature`)."""


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


def is_traced(value: Any) -> bool:
    """Whether ``value`` is traced: a per-chain hyperparameter inside a jitted, vmapped step
    (:func:`sgrld.samplers.swept.swept`), whose number Python cannot check; the configuration that
    chose it checks it instead (:func:`sgrld_app.sweep.parse_grid`).

    Example:
        >>> import jax
        >>> is_traced(0.1), bool(jax.jit(lambda x: is_traced(x))(0.1))
        (False, True)
    """
    return isinstance(value, jax.core.Tracer)


def as_schedule(learning_rate: float | Schedule) -> Schedule:
    """Return a schedule ``step -> learning rate``, validating constants and ``schedule(0)``
    (a traced constant, :func:`is_traced`, is taken as it is)."""
    if callable(learning_rate):
        first = learning_rate(0)
        try:
            first = float(first)
        except (TypeError, jax.errors.ConcretizationTypeError):
            return learning_rate
        if not (math.isfinite(first) and LEARNING_RATE.holds(first)):
            raise ValueError(
                f"learning_rate schedule gives {first} at step 0; it must be {LEARNING_RATE.text()}"
            )
        return learning_rate
    if is_traced(learning_rate):
        return lambda step: jnp.asarray(learning_rate, jnp.float32)
    lr = float(learning_rate)
    if not (math.isfinite(lr) and LEARNING_RATE.holds(lr)):
        raise ValueError(
            f"learning_rate must be a finite number {LEARNING_RATE.text()}, got {learning_rate}"
        )
    return lambda step: jnp.asarray(lr, jnp.float32)


def check_num_data(num_data: int) -> int:
    """``num_data`` as an int, or ``ValueError`` unless it is a positive integer."""
    if isinstance(num_data, bool) or int(num_data) != num_data or num_data < 1:
        raise ValueError(f"num_data must be a positive integer, got {num_data!r}")
    return int(num_data)


def check_temperature(temperature: float) -> float:
    """``temperature`` as a float, or ``ValueError`` unless it is finite and >= 0."""
    temperature = float(temperature)
    if not (math.isfinite(temperature) and TEMPERATURE.holds(temperature)):
        raise ValueError(
            f"temperature must be a finite number {TEMPERATURE.text()}, got {temperature}"
        )
    return temperature


def as_temperature(temperature: float | Schedule) -> Schedule:
    """A schedule ``step -> T`` (float32) from a number (checked ``>= 0``; a traced one, a
    per-chain value of :func:`sgrld.samplers.swept.swept`, is taken as it is) or a schedule such as
    :func:`sgrld.numerics.schedules.cyclical`'s ``temperature``.

    Example:
        >>> float(as_temperature(0.5)(3))
        0.5
    """
    if callable(temperature):
        return lambda step: jnp.asarray(temperature(step), jnp.float32)
    value = temperature if is_traced(temperature) else check_temperature(temperature)
    return lambda step: jnp.asarray(value, jnp.float32)


def is_zero(value: float | Schedule) -> bool:
    """Whether a temperature is the constant 0 (not a schedule, not traced): a sampler then
    skips what the noise would multiply (the correction Γ)."""
    return not callable(value) and not is_traced(value) and float(value) == 0.0


def checked_squares(grads: PyTree, new_params: PyTree) -> jax.Array:
    """Per leaf ``l``: ``Σ g_l² + Σ θ'_l·0``, stacked (shape ``[leaves]``, at least float32).

    The sum is finite exactly when leaf ``l`` of both trees is finite and its ``Σ g²`` does not
    overflow (a NaN or an inf times 0 is NaN), so one reduction per leaf gives a step's squared
    gradient norm and its check for NaN/inf, where there were three (RESULTS §23 measures the
    difference). Both trees pass an optimization barrier first, meant to keep XLA from computing
    ``θ'`` inside these reductions (on an H200 it still did, RESULTS §23).

    Example:
        >>> checked_squares({"a": jnp.ones(3), "b": jnp.ones(2)}, {"a": jnp.zeros(3), "b":
        ...     jnp.array([1.0, jnp.inf])}).tolist()
        [3.0, nan]
    """
    grads, new_params = jax.lax.optimization_barrier((grads, new_params))
    wide = lambda x: x.astype(jnp.promote_types(x.dtype, jnp.float32))
    return jnp.stack(
        [
            jnp.sum(jnp.square(wide(g))) + jnp.sum(wide(p) * 0)
            for g, p in zip(jax.tree.leaves(grads), jax.tree.leaves(new_params), strict=True)
        ]
    )


def first_nonfinite(squares: jax.Array) -> jax.Array:
    """Index of the first non-finite entry of :func:`checked_squares`' result, or −1."""
    bad = ~jnp.isfinite(squares)
    return jnp.where(jnp.any(bad), jnp.argmax(bad), -1).astype(jnp.int32)


def is_step(value: Any) -> bool:
    """Whether ``value`` is a step counter: an integer >= 0 (a float of integer value too).

    Example:
        >>> [is_step(v) for v in (0, 7.0, -1, 2.5, float("nan"), "3", True)]
        [True, True, False, False, False, False, False]
    """
    try:
        return not isinstance(value, bool | str) and float(value) == int(value) >= 0
    except (TypeError, ValueError, OverflowError):
        return False
