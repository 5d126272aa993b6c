"""Layer 0, numerics: what every sampler computes with, and nothing about samplers.

Gaussian and Rademacher noise, dense linear algebra, the potential Û/N, per-example gradients
(the traced log-likelihood's products and their statistics, im2col), argument checks and
step-size schedules.
"""

from sgrld.numerics import (
    checks,
    im2col,
    jaxpr_taps,
    linalg,
    noise,
    per_example,
    potential,
    schedules,
    tap_statistics,
)

__all__ = [
    "checks",
    "im2col",
    "jaxpr_taps",
    "linalg",
    "noise",
    "per_example",
    "potential",
    "schedules",
    "tap_statistics",
]
