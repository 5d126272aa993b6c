"""sgrld: stochastic-gradient Riemannian Langevin dynamics in JAX.

The public API is listed here and nowhere else.
"""

from sgrld import bnn, correction, data, evaluation, metrics, noise, targets
from sgrld.adam_sgld import AdamSGLDState, adam_sgld
from sgrld.potential import Potential, potential
from sgrld.sampling import DivergenceError, Samples, minibatch_fn, sample
from sgrld.sampler import Sampler, SGRLDInfo, SGRLDState, sgrld

__all__ = [
    "AdamSGLDState",
    "adam_sgld",
    "DivergenceError",
    "Potential",
    "Sampler",
    "SGRLDInfo",
    "SGRLDState",
    "Samples",
    "bnn",
    "correction",
    "data",
    "evaluation",
    "metrics",
    "minibatch_fn",
    "noise",
    "potential",
    "sample",
    "sgrld",
    "targets",
]
__version__ = "0.1.0"
