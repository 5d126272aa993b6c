"""Layer 6, run: the application. Configurations, the experiment runner and its files, sweeps,
reports and the ``sgrld`` command line; nothing below imports it.
"""

from sgrld.run import (
    arguments,
    checkpoint,
    cli,
    config,
    demo,
    epoch_writer,
    from_config,
    interrupts,
    records,
    report,
    run_folder,
    runner,
    sampler_from_config,
    scoring,
    sweep,
    sweep_resume,
)

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
