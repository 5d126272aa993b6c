"""The application's API for the reproductions (:mod:`sgrld_reproductions`): the names of
:mod:`sgrld_app` they may use, and the only module of it they may import (the architecture test
holds them to it). Everything else in the application is free to change.

* **configurations**: :class:`Config`, :func:`load_config`, :func:`from_dict`, :data:`PRIORS`,
  :class:`ConfigError`;
* **experiments and runs**: :func:`build_experiment` and :func:`run_plan_of` of a configuration,
  :func:`run_config` (the whole ``sgrld run``), :func:`run` (the runner, on an
  :class:`Experiment` and a :class:`RunPlan` of one's own), its :class:`Result`,
  :data:`EXIT_CODES`, the kept steps (:func:`sample_steps`, :func:`first_kept_window`), a
  run folder's resumption (:func:`existing_of`, :func:`resume_point`), batched scoring
  (:func:`chunked`, :data:`EVAL_BATCH`);
* **sweeps**: :class:`Grid`, :func:`run_sweep`, its :class:`SweepResult`, :func:`mean_std`;
* **tables and figures**: :func:`columns`, :class:`Column`, :func:`format_value`,
  :func:`finite`, :data:`MISSING`, :data:`TEXT`, :data:`BAND`, :func:`console`,
  :func:`print_table`, :func:`markdown_table`, :func:`write_tables`, :func:`plot_curves`,
  :func:`pyplot`, :func:`save_figure`.
"""

from sgrld_app.config import PRIORS, Config, ConfigError, from_dict, load_config
from sgrld_app.experiment import (
    EXIT_CODES,
    Experiment,
    Result,
    RunPlan,
    first_kept_window,
    sample_steps,
)
from sgrld_app.from_config import build_experiment, run_plan_of
from sgrld_app.launch import run_config
from sgrld_app.report import (
    BAND,
    MISSING,
    TEXT,
    Column,
    columns,
    console,
    finite,
    format_value,
    markdown_table,
    plot_curves,
    print_table,
    pyplot,
    save_figure,
    write_tables,
)
from sgrld_app.run_folder import existing_of, resume_point
from sgrld_app.runner import run
from sgrld_app.scoring import EVAL_BATCH, chunked
from sgrld_app.sweep import Grid, run_sweep
from sgrld_app.sweep_table import SweepResult, mean_std

__all__ = [
    "BAND",
    "EVAL_BATCH",
    "EXIT_CODES",
    "MISSING",
    "PRIORS",
    "TEXT",
    "Column",
    "Config",
    "ConfigError",
    "Experiment",
    "Grid",
    "Result",
    "RunPlan",
    "SweepResult",
    "build_experiment",
    "chunked",
    "columns",
    "console",
    "existing_of",
    "finite",
    "first_kept_window",
    "format_value",
    "from_dict",
    "load_config",
    "markdown_table",
    "mean_std",
    "plot_curves",
    "print_table",
    "pyplot",
    "resume_point",
    "run",
    "run_config",
    "run_plan_of",
    "run_sweep",
    "sample_steps",
    "save_figure",
    "write_tables",
]
