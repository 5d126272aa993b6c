"""Step-size schedules of the reproductions beyond :mod:`sgrld.numerics.schedules`: the halving
schedule of ``sgrld reproduce natural-langevin`` and ``psgld``.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

HALVE_EVERY = 10_000
"""The step size is halved every this many updates by default (natural-langevin's paper, after
Li et al. 2016)."""


def halving(learning_rate: float, every: int = HALVE_EVERY):
    """The schedule ``η_t = η · 2^{−⌊t/every⌋}``: η halved every ``every`` updates.

    Example:
      >>> lr = halving(0.1, every=10)
      >>> [round(float(lr(t)), 3) for t in (0, 9, 10, 25)]
      [0.1, 0.1, 0.05, 0.025]
    """
    if not (math.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"learning_rate must be a finite number > 0, got {learning_rate}")
    if isinstance(every, bool) or int(every) != every or every < 1:
        raise ValueError(f"every must be a positive integer, got {every!r}")

    def schedule(step):
        halvings = (jnp.asarray(step) // every).astype(jnp.float32)
        return jnp.float32(learning_rate) * jnp.exp2(-halvings)

    return schedule
