"""Layer 0, numerics: what every sampler computes with, and nothing about samplers.

Gaussian and Rademacher noise, dense linear algebra, the potential Û/N, per-example gradients
(layer taps, im2col), argument checks and step-size schedules.
"""

from sgrld.numerics import (
    checks,
    im2col,
    layer_taps,
    linalg,
    noise,
    per_example,
    potential,
    schedules,
)

__all__ = [
    "checks",
    "im2col",
    "layer_taps",
    "linalg",
    "noise",
    "per_example",
    "potential",
    "schedules",
]
