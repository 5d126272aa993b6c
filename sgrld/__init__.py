"""sgrld: stochastic-gradient Riemannian Langevin dynamics in JAX.

The public API is listed here and nowhere else. The library is in layers, each a subpackage that
imports only from the layers below it (a test walks the imports):

====  ==========================================  ==============================================
rank  layer                                       what it holds
====  ==========================================  ==============================================
0     :mod:`sgrld.numerics`                       noise, linear algebra, the potential, per-example
                                                  gradients, checks, schedules
1     :mod:`sgrld.metrics`                        the Riemannian metrics G(θ)
2     :mod:`sgrld.parts`                          Γ, the preconditioned drift, the move
3     :mod:`sgrld.samplers`                       SGRLD, SGHMC, SGNHT, i-SGD, Adam-SGLD, baselines
4     :mod:`sgrld.chains`                         many chains: the engine, devices, ``sample``
5     :mod:`sgrld.samples`, :mod:`sgrld.bnn`,     sample files, ArviZ, diagnostics; networks and
      :mod:`sgrld.data`, :mod:`sgrld.evaluation`  priors; data sets; ensemble scores
====  ==========================================  ==============================================

The samplers, their parts and the readers of samples (``load_samples``, ``to_arviz``, which
imports ArviZ on first call) load with ``import sgrld``; ``bnn``, ``data`` and ``evaluation``
load on first use, so ``import sgrld`` imports neither Flax nor scikit-learn. The application
(configurations, the runner, sweeps, the ``sgrld`` command) is another package, :mod:`sgrld_app`,
and the reproductions of the papers' experiments a third, :mod:`sgrld_reproductions`; the library
imports neither. Beside the layers stands :mod:`sgrld.interrupts` (the standard library only):
when this process is the ``sgrld`` command, this package installs its signal guard before any
layer loads JAX, since ``python -m sgrld`` imports this package before anything else.
"""

import importlib as _importlib
import os as _os
import sys as _sys


def _is_command() -> bool:
    """Whether this process is the ``sgrld`` command: ``python -m sgrld`` (while Python imports
    the package, ``sys.argv[0]`` is ``"-m"``) or the ``sgrld`` script."""
    argv = getattr(_sys, "orig_argv", [])
    if _sys.argv[:1] == ["-m"] and "-m" in argv:
        return argv[argv.index("-m") + 1 : argv.index("-m") + 2] == ["sgrld"]
    return bool(_sys.argv) and _os.path.basename(_sys.argv[0]) == "sgrld"


if _is_command():  # before JAX is imported: Ctrl-C at any moment stops the command cleanly
    from sgrld.interrupts import guard_command

    guard_command()

from sgrld import chains, metrics, numerics, parts, samplers, samples
from sgrld.chains.devices import make_mesh
from sgrld.chains.sampling import DivergenceError, Samples, minibatch_fn, sample
from sgrld.numerics.potential import Potential, potential
from sgrld.samplers.adam_sgld import AdamSGLDState, adam_sgld
from sgrld.samplers.info import SGRLDInfo, StepInfo
from sgrld.samplers.isgd import ISGDInfo, ISGDState, isgd
from sgrld.samplers.momentum import MomentumInfo
from sgrld.samplers.sampler import Sampler, SGRLDState, riemannian_langevin, sgrld
from sgrld.samplers.sghmc import SGHMCState, sghmc
from sgrld.samplers.sgnht import SGNHTState, sgnht
from sgrld.samples.arviz_export import to_arviz
from sgrld.samples.results import RunSamples, load_samples

_LAZY = ("bnn", "data", "evaluation")
"""Layers imported on first attribute access (PEP 562)."""

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
    "StepInfo",
    "chains",
    "isgd",
    "load_samples",
    "make_mesh",
    "metrics",
    "minibatch_fn",
    "numerics",
    "parts",
    "potential",
    "riemannian_langevin",
    "sample",
    "samplers",
    "samples",
    "sghmc",
    "sgnht",
    "sgrld",
    "to_arviz",
    "bnn",
    "data",
    "evaluation",
]
"""The API: the samplers, their layers and the BNN stack."""
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    if name in _LAZY:
        module = _importlib.import_module(f"sgrld.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'sgrld' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API (``__all__``) and the dunders: ``dir(sgrld)`` and tab completion list no
    helper and no module sgrld imports for itself."""
    return sorted({*__all__, "__version__", *(n for n in globals() if n.startswith("__"))})
