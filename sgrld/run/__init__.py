"""Layer 6, run: the application. Configurations, the experiment runner and its files, sweeps,
reports and the ``sgrld`` command line; nothing below imports it.

The modules load on first attribute access (PEP 562), so that the ``sgrld`` command can install
its signal guard (:mod:`sgrld.run.interrupts`) before anything imports JAX.
"""

import importlib
from typing import Any

__all__ = [
    "arguments",
    "checkpoint",
    "cli",
    "config",
    "demo",
    "epoch_writer",
    "from_config",
    "interrupts",
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
    """A module of the application, imported on first use (PEP 562): ``sgrld.run.config`` loads no
    Flax until a prior is built, though ``sgrld.run.from_config`` needs it."""
    if name not in __all__:
        raise AttributeError(f"module 'sgrld.run' has no attribute {name!r}")
    return importlib.import_module(f"sgrld.run.{name}")


def __dir__() -> list[str]:
    return sorted(__all__)
