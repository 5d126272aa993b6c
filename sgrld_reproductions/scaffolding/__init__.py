"""What the reproductions share, and all they may share: each reproduction (a subpackage of
:mod:`sgrld_reproductions`) imports the library, its own modules and this package's names, never
another reproduction's modules (``tests/test_architecture.py``).

* :mod:`~sgrld_reproductions.scaffolding.driver`: :class:`Reproduction`, the skeleton every
  ``sgrld reproduce NAME`` runs on (options, run, table, files), and the timing its
  reproductions have in common;
* :mod:`~sgrld_reproductions.scaffolding.options`: the command-line options they have in common
  (``--resume``, ``--epochs``, ``--data-dir``, ...) and the argument types they parse;
* :mod:`~sgrld_reproductions.scaffolding.outcomes`: the runs' progress lines and exit codes;
* :mod:`~sgrld_reproductions.scaffolding.run_spec`: :class:`RunSpec`, a run's folder, progress bar
  and resumption (``natural-langevin``, ``psgld``);
* :mod:`~sgrld_reproductions.scaffolding.yu_mnist`: Yu et al. (2023)'s MNIST MLP setting
  (``mnist-mlp``, ``monge-alpha``, ``cifar-resnet``; the MNIST data options also ``isgd-mnist``
  and ``natural-langevin``);
* :mod:`~sgrld_reproductions.scaffolding.isgd_methods`: Franzese et al. (2021)'s i-SGD methods
  (``isgd-uci``, ``isgd-mnist``);
* :mod:`~sgrld_reproductions.scaffolding.step_sizes`: the halving step size (``natural-langevin``,
  ``psgld``).
"""

from sgrld_reproductions.scaffolding.driver import (
    MODULE_NAMES,
    OnResult,
    Reproduction,
    Results,
    equal_time_epochs,
    ignore,
    paper_caption,
    quick_note,
    sample_timed,
    stored_rows,
)
from sgrld_reproductions.scaffolding.isgd_methods import (
    ISGD_METHODS,
    ISGD_NOISE_WINDOW,
    SMALL_GRID,
    ISGDMethod,
    grid_of,
    lr_label,
    lr_note,
    method_lr,
    method_options,
    run_summary,
    sampler_overrides,
    select_rate,
    spread,
)
from sgrld_reproductions.scaffolding.options import (
    choices_option,
    data_dir_option,
    data_overrides,
    epochs_option,
    no_verify_option,
    positive_int,
    positive_number,
    replicates_option,
    resume_option,
    subset_option,
)
from sgrld_reproductions.scaffolding.outcomes import (
    exit_code_of,
    last_run_message,
    progress_line,
    record_run,
    run_progress,
    worst_run_exit_code,
)
from sgrld_reproductions.scaffolding.run_spec import RunSpec
from sgrld_reproductions.scaffolding.step_sizes import (
    HALVE_EVERY,
    halving,
)
from sgrld_reproductions.scaffolding.yu_mnist import (
    IDENTITY_OPTIMAL,
    METRIC_LABELS,
    MNIST_FOLDER,
    MNIST_METRICS,
    MNIST_PAPER,
    MNIST_QUICK,
    MnistCell,
    YuPaper,
    at_epoch,
    curvature_option,
    data_options,
    data_settings,
    lr_ladder,
    metric_params,
    metrics_option,
    mnist_caption,
    mnist_config,
    run_cell,
    start_results,
)

__all__ = [
    "Results",
    "OnResult",
    "MODULE_NAMES",
    "ignore",
    "stored_rows",
    "worst_run_exit_code",
    "last_run_message",
    "record_run",
    "exit_code_of",
    "progress_line",
    "run_progress",
    "RunSpec",
    "quick_note",
    "paper_caption",
    "Reproduction",
    "resume_option",
    "equal_time_epochs",
    "subset_option",
    "choices_option",
    "positive_int",
    "positive_number",
    "epochs_option",
    "replicates_option",
    "data_dir_option",
    "no_verify_option",
    "data_overrides",
    "sample_timed",
    "MNIST_METRICS",
    "METRIC_LABELS",
    "MNIST_FOLDER",
    "YuPaper",
    "IDENTITY_OPTIMAL",
    "MNIST_PAPER",
    "MNIST_QUICK",
    "metric_params",
    "mnist_config",
    "MnistCell",
    "lr_ladder",
    "at_epoch",
    "metrics_option",
    "curvature_option",
    "data_options",
    "data_settings",
    "start_results",
    "run_cell",
    "mnist_caption",
    "ISGDMethod",
    "SMALL_GRID",
    "ISGD_METHODS",
    "ISGD_NOISE_WINDOW",
    "sampler_overrides",
    "run_summary",
    "grid_of",
    "method_lr",
    "select_rate",
    "spread",
    "method_options",
    "lr_note",
    "lr_label",
    "HALVE_EVERY",
    "halving",
]
