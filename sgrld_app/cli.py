"""The ``sgrld`` command line: ``sgrld run``, ``sgrld sweep``, ``sgrld demo``, ``sgrld reproduce
NAME``, and ``sgrld export`` / ``sgrld diagnose`` of a results folder.

Exit codes: 0 success; 1 a chain diverged (results so far are written); 2 a bad configuration,
missing/corrupt data, a folder that holds no samples, or (``sgrld run``) a results folder that
already holds a run, or a ``--resume`` whose configuration differs (the message says which key or
file), or a coordinator of a multi-process run not reached; 3 another process of a multi-process
run failed (the results so far are written, not marked completed); 130 interrupted with Ctrl-C or
SIGTERM, at any moment (results so far are written; a run or sweep continues with ``--resume``);
4 an operating-system error while writing (a full disk, a read-only file system, no permission, a
missing or non-directory folder): one line names the file, says what was kept and how to go on.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from sgrld import interrupts
from sgrld.chains import devices
from sgrld.data import DataError
from sgrld.samples import arviz_export, atomic, diagnostics, stein
from sgrld.samples.results import ResultsError, draws_per_epoch, load_samples
from sgrld_app import demo, report, run_end, run_folder, sweep_resume
from sgrld_app import sweep as sgrld_sweep
from sgrld_app.argument_types import device_count
from sgrld_app.arguments import KSD_MAX_DIM, KSD_MAX_DRAWS, build_parser, device_arguments
from sgrld_app.config import Config, ConfigError, load_config
from sgrld_app.experiment import EXIT_CODES
from sgrld_app.from_config import log_posterior, observed_targets
from sgrld_app.launch import run_config


def sweep_command(args: argparse.Namespace) -> int:
    """``sgrld sweep``: check the grid, run all its chains at once, print and save the table."""
    config, path = _config_to_resume(args, list(args.overrides))
    grid_texts, replicates = args.grid, args.replicates
    stored = sweep_resume.stored_sweep(Path(args.resume)) if args.resume else None
    if stored is not None:  # what is not given is the sweep's own
        grid_texts = grid_texts or [f"{k}={json.dumps(v)}" for k, v in stored["grid"].items()]
        replicates = stored["replicates"] if replicates is None else replicates
    grids = [sgrld_sweep.parse_grid(text, config) for text in grid_texts]
    if not args.resume and not args.overwrite:
        run_folder.refuse_kept(Path(config.out.folder), "sweep")
    _writing(_kept_results(Path(config.out.folder), "sweep"))
    console = report.console()
    verb = "Resuming" if args.resume else "Sweeping"
    header = _header(console, f"{verb} {_what(path, config)} -> {config.out.folder}")
    existing = "resume" if args.resume else "overwrite" if args.overwrite else "refuse"
    replicates = 1 if replicates is None else replicates
    out = sgrld_sweep.run_sweep(
        config,
        grids,
        replicates,
        existing=existing,
        progress=True,
        devices=None if args.devices is None else device_count(args.devices),
        data_parallel=args.data_parallel,
        checked=header,
    )
    console.print(report.rich_table(out.caption, out.columns, out.rows))
    console.print(out.result.message)
    return EXIT_CODES[out.result.status]


def _join(argv: list[str] | None) -> None:
    """Join the multi-process run that ``sgrld run``'s flags ask for, before anything uses JAX
    (building the parser does: a reproduction's options list its problems)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["run"]:
        return
    parser = argparse.ArgumentParser(add_help=False)
    device_arguments(parser)
    args = parser.parse_known_args(argv[1:])[0]
    explicit = (args.coordinator, args.num_processes, args.process_id)
    if args.distributed or any(v is not None for v in explicit):
        where = f"the coordinator {args.coordinator}" if args.coordinator else "JAX's detection"
        print(f"sgrld: joining a multi-process run through {where}", file=sys.stderr, flush=True)
        devices.initialize(*explicit, timeout_s=args.init_timeout)


def _device_overrides(args: argparse.Namespace) -> list[str]:
    """The overrides of ``--devices`` and ``--data-parallel``."""
    overrides = []
    if args.devices is not None:
        value = args.devices if args.devices == "all" else device_count(args.devices)
        overrides.append(f"run.devices={json.dumps(value)}")
    if args.data_parallel is not None:
        overrides.append(f"run.data_parallel={args.data_parallel}")
    return overrides


def _config_to_resume(args: argparse.Namespace, overrides: list[str]) -> tuple[Config, Path | None]:
    """The configuration of ``sgrld run`` or ``sgrld sweep`` and its file: with ``--resume OUT``
    and no file, ``OUT/config.toml`` (with the ``--set`` overrides); the results folder is
    ``--resume`` or ``--out``."""
    out = args.resume or args.out
    if args.resume and args.out and Path(args.out) != Path(args.resume):
        raise ConfigError(f"--out {args.out} and --resume {args.resume} name different folders")
    if out is not None:
        overrides.append(f"out.folder={json.dumps(out)}")
    if args.data_dir is not None:
        overrides.append(f"data.data_dir={json.dumps(args.data_dir)}")
    path = args.config
    if args.resume and path is None:  # --set changes the run's own configuration
        path = Path(args.resume) / "config.toml"
        if not path.is_file():
            raise ResultsError(f"--resume {args.resume}: no run to resume there (no config.toml)")
    return load_config(path, overrides), path


def run_command(args: argparse.Namespace) -> int:
    """``sgrld run``: load the configuration, run it, print the final scores, plot the curves."""
    config, path = _config_to_resume(args, list(args.overrides) + _device_overrides(args))
    if not args.resume and not args.overwrite:
        run_folder.refuse_kept(Path(config.out.folder), "run")
    _writing(_kept_results(Path(config.out.folder), "run"))
    console = report.console()
    name = _what(path, config)
    verb = "Resuming" if args.resume else "Running"
    header = _header(console, f"{verb} {name} -> {config.out.folder}")
    existing = "resume" if args.resume else "overwrite" if args.overwrite else "refuse"
    result = run_config(config, existing=existing, progress=True, checked=header)
    if result.records and result.out is not None:  # another process of a multi-process run
        report.plot_curves({config.sampler.metric: result.records}, result.out / "curves.png")
        row = report.summary_row(result, metric=config.sampler.metric)
        caption = f"{name} after {len(result.records)} epochs"
        console.print(report.rich_table(caption, report.summary_columns(row), [row]))
    console.print(result.message)
    return EXIT_CODES[result.status]


def _header(console, line: str) -> Callable[[], None]:
    """``line`` printed when called: the header of ``sgrld run`` and ``sgrld sweep``, printed
    once the input is read and checked (:func:`~sgrld_app.launch.run_config`'s ``checked``), so
    that bad input (a data file's missing column or NaN, a model factory that fails, a resumed
    run's data file that changed) is the error's one line alone, stdout empty."""
    return lambda: console.print(line, soft_wrap=True)


def _what(path: Path | None, config: Config) -> str:
    """What ``sgrld run`` or ``sgrld sweep`` runs: the file, if any, and
    :func:`sgrld_app.report.describe` of its configuration."""
    return f"{path}: {report.describe(config)}" if path else report.describe(config)


def export_command(args: argparse.Namespace) -> int:
    """``sgrld export``: write the run's samples as netCDF or Zarr (refusing, before the data set
    loads, a folder without samples and a target that is not an earlier export, unless
    ``--overwrite``: :func:`sgrld.samples.arviz_export.check_target`)."""
    draws_per_epoch(args.folder)
    path = arviz_export.target(args.folder, args.format, args.to)
    arviz_export.check_target(path, args.overwrite)
    observed = observed_targets(args.folder)
    path = arviz_export.export(
        args.folder, args.format, args.to, observed_data=observed, overwrite=args.overwrite
    )
    report.console().print(f"wrote {path}")
    return 0


def diagnose_command(args: argparse.Namespace) -> int:
    """``sgrld diagnose``: print split R-hat and ESS of a few traces and plot them."""
    run, left_out = diagnostics.valid_part(load_samples(args.folder))
    series = diagnostics.traces(run, num_params=args.params, seed=args.seed)
    rows = diagnostics.convergence(series)
    chains, draws = next(iter(series.values())).shape
    console = report.console()
    console.print(f"{args.folder}: {chains} chain(s) x {draws} draws", soft_wrap=True)
    if left_out:
        console.print(left_out, soft_wrap=True)
    console.print(diagnostics.guarantee_line(args.folder), soft_wrap=True)
    console.print(report.rich_table("convergence", report.CONVERGENCE_COLUMNS, rows))
    plot = report.plot_traces(series, f"{args.folder}/diagnose.png")
    console.print(f"{diagnostics.mixing_verdict(rows, chains)}. Traces in {plot}", soft_wrap=True)
    if not args.no_ksd:
        line = ksd_line(
            Path(args.folder), args.ksd_coordinates, max_draws=args.ksd_draws, seed=args.seed
        )
        console.print(line, soft_wrap=True)
    return 0


def ksd_line(
    folder: Path, coordinates: int | None = None, *, max_draws: int = KSD_MAX_DRAWS, seed: int = 0
) -> str:
    """``sgrld diagnose``'s line on the IMQ kernel Stein discrepancy of the run's pooled draws
    against its full-batch log posterior (:func:`sgrld_app.from_config.log_posterior`), on all
    coordinates or on ``coordinates`` random ones (:func:`sgrld.samples.stein.ksd`), or on why it is
    skipped: more than :data:`KSD_MAX_DIM` parameters and no ``coordinates``, no readable
    ``config.toml``, or the data set's files not found.

    Raises:
        sgrld_app.config.ConfigError: if ``coordinates`` or ``max_draws`` is below 1.
    """
    for flag, value in (("--ksd-coordinates", coordinates), ("--ksd-draws", max_draws)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be at least 1, got {value}")
    draws = diagnostics.pooled_draws(folder)
    leaves = jax.tree.leaves(draws)
    n, dim = leaves[0].shape[0], sum(int(np.prod(a.shape[1:])) for a in leaves)
    skip = "kernel Stein discrepancy skipped: "
    if dim > KSD_MAX_DIM and coordinates is None:
        return (
            f"{skip}D = {dim:,} parameters, above the limit of {KSD_MAX_DIM:,} (--ksd-coordinates "
            f"{KSD_MAX_DIM} computes it on {KSD_MAX_DIM:,} random coordinates, at one full-batch "
            "gradient per draw)"
        )
    try:
        log_prob = log_posterior(load_config(folder / "config.toml", []))
    except (ConfigError, DataError, OSError) as err:
        return f"{skip}the run's configuration or data is not available ({err})"
    m, k = min(n, max_draws), min(dim, coordinates or dim)
    value = stein.ksd(draws, log_prob, max_draws=max_draws, coordinates=k, seed=seed)
    on = f"D = {dim:,}" if k == dim else f"{k:,} random coordinates of D = {dim:,}"
    return (
        f"kernel Stein discrepancy (IMQ): {value:.4g} over {m:,} draws ({on})\n"
        f"  {m:,} independent exact draws would give E[KSD²] = (E‖∇log p‖² + {k:,})/{m:,} (the "
        f"score on the kernel's coordinates), so a KSD of at least √({k:,}/{m:,}) = "
        f"{(k / m) ** 0.5:.3g}; correlated draws raise it, and a value far above that of exact "
        "draws says the draws are not from the posterior"
    )


EXIT_PROCESS_FAILED = 3
"""``sgrld``'s exit code when another process of a multi-process run failed."""
EXIT_OS_ERROR = 4
"""``sgrld``'s exit code for an operating-system error while writing (the disk full, ...)."""

COMMANDS = {
    "run": run_command,
    "sweep": sweep_command,
    "export": export_command,
    "diagnose": diagnose_command,
}
"""The commands other than ``demo`` and ``reproduce``."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sgrld`` command; returns the exit code."""
    code = _main(argv)
    if interrupts.GUARD is not None:
        interrupts.GUARD.finish(code)
    return code


def _main(argv: list[str] | None) -> int:
    try:
        _join(argv)
    except devices.DistributedError as err:
        print(f"sgrld: error: {err}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    guard = interrupts.GUARD
    if guard is not None and guard.signal is not None:
        return _interrupted(guard.signal, "nothing was written")
    _writing(_kept(args))
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        code = _dispatch(args)
    if guard is not None and guard.signal is not None and code == 0:  # it ended all the same
        return _interrupted(guard.signal, guard.kept())
    return code


def _dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command; its exit code."""
    try:
        if args.command in COMMANDS:
            return COMMANDS[args.command](args)
        if args.command == "demo":
            return demo.run(args)
        return args.reproduction.run(args)
    except (ConfigError, DataError, ResultsError) as err:
        print(f"sgrld: error: {err}", file=sys.stderr)
        return 2
    except jax.errors.JaxRuntimeError as err:
        if not devices.multi_process():
            raise
        print(
            f"sgrld: error: the multi-process run failed ({err}); another process has probably "
            "died. This process stops; the results are incomplete (summary.json does not say "
            '"completed")',
            file=sys.stderr,
            flush=True,
        )
        os._exit(EXIT_PROCESS_FAILED)  # not JAX's exit, which waits for the dead process, aborts
    except KeyboardInterrupt:  # before a run started (while loading data) or a second Ctrl-C
        print("sgrld: interrupted", file=sys.stderr)
        return EXIT_CODES["interrupted"]
    except OSError as err:
        print(f"sgrld: error: {os_error_line(err, _kept_now())}", file=sys.stderr, flush=True)
        return EXIT_OS_ERROR


FIXES = {
    errno.ENOSPC: "make room on that file system",
    errno.EDQUOT: "make room within your disk quota",
    errno.EROFS: "choose a folder on a writable file system",
    errno.EACCES: "choose a folder you may write to (or change its permissions)",
    errno.EPERM: "choose a folder you may write to (or change its permissions)",
    errno.ENOENT: "create the missing folder or choose another",
    errno.ENOTDIR: "choose a path whose folders are folders, not files",
    errno.EEXIST: "choose a path whose folders are folders, not files",
}
"""What the user can do about an ``OSError``, by ``errno``."""


def os_error_line(err: OSError, kept: str) -> str:
    """The one line of ``sgrld: error:`` for an operating-system error: the file, the error, what
    was kept (``kept``, which says how to continue) and what to fix first.

    Example:
        >>> err = atomic.WriteError(errno.ENOSPC, "No space left on device", "out/summary.json")
        >>> os_error_line(err, "nothing was written")
        'could not write out/summary.json (No space left on device); nothing was written; make
        room on that file system first'
    """
    doing = "could not write" if isinstance(err, atomic.WriteError) else "failed on"
    where = f" {err.filename}" if err.filename else ""
    fix = FIXES.get(err.errno, "fix that")
    return f"{doing}{where} ({err.strerror or err}); {kept}; {fix} first"


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one plain line (``sgrld: warning: ...``), without its source line."""
    print(f"sgrld: warning: {message}", file=sys.stderr if file is None else file, flush=True)


def _interrupted(name: str, kept: str) -> int:
    """Say that ``name`` (a signal) stopped the command and what was kept; the exit code."""
    print(f"sgrld: interrupted by {name}; {kept}", file=sys.stderr, flush=True)
    return EXIT_CODES["interrupted"]


_KEPT: list[Callable[[], str]] = []
"""What the running command has kept so far (the last one set by :func:`_writing`)."""


def _writing(kept: Callable[[], str]) -> None:
    """The command writes from now on; ``kept()`` says what is on disk if a signal or an OS
    error stops it."""
    _KEPT[:] = [kept]
    if interrupts.GUARD is not None:
        interrupts.GUARD.writing(kept)


def _kept_now() -> str:
    return _KEPT[-1]() if _KEPT else "nothing was written"


def _kept_results(out: Path, command: str) -> Callable[[], str]:
    """What is kept of ``sgrld run`` or ``sgrld sweep`` into ``out``."""

    def kept() -> str:
        if not (out / "config.toml").is_file():
            return "nothing was written"
        return run_end.kept(out, command)  # from what is on disk: summary, checkpoints

    return kept


def _kept(args: argparse.Namespace) -> Callable[[], str]:
    """What is kept of a command stopped by a signal (``sgrld run`` and ``sgrld sweep`` say it
    again once they know their results folder)."""
    if args.command == "export":
        text = "the export was not written (an earlier one is unchanged)"
    elif args.command == "diagnose":
        text = f"nothing but {Path(args.folder) / 'diagnose.png'} was to be written"
    elif args.command in ("demo", "reproduce") and getattr(args, "out", None) is not None:
        again = " (the same command with --resume continues)" if "resume" in args else ""
        text = f"the runs finished so far are in {args.out}{again}"
    else:
        text = "nothing was written"
    return lambda: text


if __name__ == "__main__":
    sys.exit(main())
