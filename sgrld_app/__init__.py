"""sgrld_app: the application of the :mod:`sgrld` library. Configurations, the experiment runner
and its files, sweeps, reports and the ``sgrld`` command line (the console script's entry point is
:func:`sgrld_app.cli.main`); the library never imports it.

The library is imported first: when this process is the ``sgrld`` command, its package installs
the signal guard (:mod:`sgrld.interrupts`) before it loads JAX. The modules here load on first
attribute access (PEP 562).
"""

import importlib
from typing import Any

import sgrld  # noqa: F401 - first: the sgrld command's signal guard, before JAX loads

__all__ = [
    "arguments",
    "checkpoint",
    "cli",
    "config",
    "demo",
    "epoch_writer",
    "from_config",
    "records",
    "report",
    "run_folder",
    "runner",
    "sampler_from_config",
    "scoring",
    "sweep",
    "sweep_resume",
]


def __getattr__(name: str) -> Any:
    """A module of the application, imported on first use (PEP 562): ``sgrld_app.config`` loads no
    Flax until a prior is built, though ``sgrld_app.from_config`` needs it."""
    if name not in __all__:
        raise AttributeError(f"module 'sgrld_app' has no attribute {name!r}")
    return importlib.import_module(f"sgrld_app.{name}")


def __dir__() -> list[str]:
    return sorted(__all__)
