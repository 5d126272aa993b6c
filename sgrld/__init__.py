"""sgrld: stochastic-gradient Riemannian Langevin dynamics in JAX.

The public API is listed here and nowhere else. The samplers and their parts, and the readers of
samples (``load_samples``, ``to_arviz``, which imports ArviZ on first call), load with
``import sgrld``; the Bayesian-NN stack (``bnn``, ``data``, ``evaluation``), the baselines
(``baselines``), the experiment runner and its configuration load on first use, so
``import sgrld`` imports neither Flax nor scikit-learn.
"""

import importlib
from typing import Any

from sgrld import (
    correction,
    devices,
    engine,
    integrators,
    metrics,
    noise,
    per_example,
    preconditioning,
    schedules,
)
from sgrld.adam_sgld import AdamSGLDState, adam_sgld
from sgrld.arviz_export import to_arviz
from sgrld.devices import make_mesh
from sgrld.isgd import ISGDInfo, ISGDState, isgd
from sgrld.momentum import MomentumInfo
from sgrld.potential import Potential, potential
from sgrld.results import RunSamples, load_samples
from sgrld.sampler import Sampler, SGRLDInfo, SGRLDState, riemannian_langevin, sgrld
from sgrld.sampling import DivergenceError, Samples, minibatch_fn, sample
from sgrld.sghmc import SGHMCState, sghmc
from sgrld.sgnht import SGNHTState, sgnht

_LAZY = (
    "baselines",
    "bnn",
    "config",
    "data",
    "diagnostics",
    "evaluation",
    "experiments",
    "from_config",
    "report",
    "runner",
    "stein",
    "targets",
)
"""Submodules imported on first attribute access (PEP 562)."""

__all__ = [
    "AdamSGLDState",
    "adam_sgld",
    "DivergenceError",
    "ISGDInfo",
    "ISGDState",
    "MomentumInfo",
    "Potential",
    "RunSamples",
    "Sampler",
    "SGRLDInfo",
    "SGRLDState",
    "SGHMCState",
    "SGNHTState",
    "Samples",
    "correction",
    "devices",
    "engine",
    "integrators",
    "isgd",
    "load_samples",
    "make_mesh",
    "metrics",
    "minibatch_fn",
    "noise",
    "per_example",
    "potential",
    "preconditioning",
    "riemannian_langevin",
    "sample",
    "schedules",
    "sghmc",
    "sgnht",
    "sgrld",
    "to_arviz",
    *_LAZY,
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f"sgrld.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'sgrld' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
