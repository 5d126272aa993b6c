"""sgrld_app: the application of the :mod:`sgrld` library (which never imports it):
configurations, the experiment runner and its files, sweeps, reports and the ``sgrld`` command.

Its modules are in layers, each importing only from its own and those below (a test walks the
imports, as the library's):

====  ========  ================================================================================
rank  layer     modules
====  ========  ================================================================================
0     config    :mod:`sgrld_app.config`: the schema, TOML and ``--set``, validation, registries
1     run       an experiment over epochs, knowing no configuration: :mod:`~sgrld_app.experiment`,
                :mod:`~sgrld_app.runner`, :mod:`~sgrld_app.epoch_writer`,
                :mod:`~sgrld_app.scoring`, :mod:`~sgrld_app.records`,
                :mod:`~sgrld_app.checkpoint`, :mod:`~sgrld_app.run_folder`,
                :mod:`~sgrld_app.run_end`, :mod:`~sgrld_app.auto_rate`, :mod:`~sgrld_app.report`
2     build     configurations into experiments, runs and sweeps: :mod:`~sgrld_app.from_config`,
                :mod:`~sgrld_app.data_and_model`, :mod:`~sgrld_app.sampler_from_config`,
                :mod:`~sgrld_app.launch`, :mod:`~sgrld_app.sweep`, :mod:`~sgrld_app.sweep_table`,
                :mod:`~sgrld_app.sweep_rates`, :mod:`~sgrld_app.sweep_resume`
3     commands  :mod:`~sgrld_app.cli` (the console script's ``main``), :mod:`~sgrld_app.arguments`,
                :mod:`~sgrld_app.argument_types`, :mod:`~sgrld_app.demo`, and
                :mod:`~sgrld_app.api`: the names the reproductions may use, and nothing else
====  ========  ================================================================================

The library is imported first: when this process is the ``sgrld`` command, its package installs
the signal guard (:mod:`sgrld.interrupts`) before it loads JAX. The modules here load on first
attribute access (PEP 562), so that ``sgrld_app.config`` loads no Flax.
"""

import importlib
from typing import Any

import sgrld  # noqa: F401 - first: the sgrld command's signal guard, before JAX loads

__all__ = [
    "api",
    "argument_types",
    "arguments",
    "auto_rate",
    "checkpoint",
    "cli",
    "config",
    "data_and_model",
    "demo",
    "epoch_writer",
    "experiment",
    "from_config",
    "launch",
    "records",
    "report",
    "run_end",
    "run_folder",
    "runner",
    "sampler_from_config",
    "scoring",
    "sweep",
    "sweep_rates",
    "sweep_resume",
    "sweep_table",
]


def __getattr__(name: str) -> Any:
    """A module of the application, imported on first use (PEP 562): ``sgrld_app.config`` loads no
    Flax until a prior is built, though ``sgrld_app.from_config`` needs it."""
    if name not in __all__:
        raise AttributeError(f"module 'sgrld_app' has no attribute {name!r}")
    return importlib.import_module(f"sgrld_app.{name}")


def __dir__() -> list[str]:
    return sorted(__all__)
