"""The ``sgrld`` command line: ``sgrld run``, ``sgrld sweep``, ``sgrld demo``, ``sgrld reproduce
NAME``, and ``sgrld export`` / ``sgrld diagnose`` of a results folder.

Exit codes: 0 success; 1 a chain diverged (results so far are written); 2 a bad configuration,
missing/corrupt data, a folder that holds no samples, or (``sgrld run``) a results folder that
already holds a run, or a ``--resume`` whose configuration differs (the message says which key or
file), or a coordinator of a multi-process run not reached; 3 another process of a multi-process
run failed (the results so far are written, not marked completed); 130 interrupted with Ctrl-C or
SIGTERM (results so far and a checkpoint are written).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import jax
import numpy as np

from sgrld.chains import devices
from sgrld.data import DataError
from sgrld.run import report, runner
from sgrld.run import sweep as sgrld_sweep
from sgrld.run.config import Config, ConfigError, load_config, to_toml
from sgrld.run.from_config import log_posterior, observed_targets, run_config
from sgrld.samples import arviz_export, diagnostics, stein
from sgrld.samples.results import ResultsError

REPRODUCTIONS_GROUP = "sgrld.reproductions"
"""The entry-point group of ``sgrld reproduce NAME``: each entry point names an object with a
one-line ``summary``, ``add_arguments(parser)`` and ``run(args) -> exit code`` (the
``Reproduction`` of the ``sgrld_reproductions`` package, or any package's own)."""

EPILOG = """\
examples:
  sgrld demo                          four metrics on the digits data set (about a minute)
  sgrld run my.toml                   run the experiment of a TOML configuration file
  sgrld run my.toml --set run.epochs=10 --set sampler.metric=monge \\
        --set sampler.metric_params.alpha2=1.25 --out results/monge
  sgrld run --set data.name=uci_boston --set model.kind=regression_mlp --set model.widths=[50] \\
        --set prior.kind=gaussian --set data.batch_size=32 --set sampler.learning_rate=0.01
  sgrld reproduce mnist-mlp --quick --data-dir ~/data/mnist
  sgrld reproduce natural-langevin --quick --data-dir ~/data/mnist
  sgrld run --set sampler.metric=fisher_qdiag --set sampler.learning_rate=0.001 \
        --set sampler.prior_in_metric=false --set prior.kind=gaussian
  sgrld reproduce funnel --quick
  sgrld run --help                    every configuration key, with its default
  sgrld run my.toml --set run.save_samples=true --out results/a
  sgrld diagnose results/a            split R-hat and ESS: potential, log-likelihoods, parameters;
                                      the kernel Stein discrepancy if D <= 1,000, on K random
                                      coordinates with --ksd-coordinates K (--no-ksd: not)
  sgrld export results/a --format netcdf   the samples as ArviZ data (inference_data.nc)
  sgrld sweep my.toml --grid sampler.learning_rate=[0.05,0.1,0.25,0.5] --replicates 3
                                      4 learning rates x 3 seeds as the chains of one program:
                                      mean ± std per learning rate, the best on validation

Results go to a folder (--out): the resolved configuration (config.toml, config.json), one JSON
line per epoch (metrics.jsonl), summary.json and curves.png. Data sets are read from --data-dir,
else $SGRLD_DATA_DIR, else ~/.cache/sgrld/data; nothing is downloaded. Ctrl-C stops a run after
writing what it has; so does SIGTERM. A run writes a checkpoint every run.checkpoint_every epochs
(none within run.checkpoint_seconds of the last, default 60):
`sgrld run --resume OUT` continues it; a folder that holds a run needs --resume or --overwrite.
"""


def _run_help() -> str:
    return (
        "Configuration keys with their defaults (Yu et al.'s MNIST setup); a file lists only "
        "what differs:\n\n" + textwrap.indent(to_toml(Config()), "  ")
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``sgrld`` command."""
    parser = argparse.ArgumentParser(
        prog="sgrld",
        description="Stochastic-gradient Riemannian Langevin dynamics (SGRLD) for Bayesian neural "
        "networks: run an experiment from a configuration file, the demo, or a reproduction of "
        "the papers' experiments.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run the experiment of a TOML configuration file",
        description="Sample a Bayesian neural network with SGRLD as a TOML file says, scoring "
        "the ensemble of samples after every epoch.",
        epilog=_run_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "config",
        metavar="CONFIG.toml",
        nargs="?",
        help="the configuration file (left out: the defaults below, changed by --set)",
    )
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key, e.g. --set run.epochs=3 or --set model.widths=[800,800] (a TOML "
        "value; repeatable)",
    )
    run.add_argument("--out", help="results folder (default: out.folder of the configuration)")
    again = run.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        metavar="OUT",
        help="continue the run in OUT from its newest checkpoint (its config.toml unless a "
        "configuration is given, which must be the same)",
    )
    again.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run already in the results folder (without it, sgrld run refuses)",
    )
    _device_arguments(run)

    demo = sub.add_parser(
        "demo",
        help="the main job: four metrics on the digits data set (no files needed, ~1 minute)",
        description="Identity, RMSprop, Monge and Shampoo SGRLD on scikit-learn's digits with a "
        "64-100-100-10 MLP and the horseshoe prior: a table of log-likelihood, accuracy, ECE and "
        "time, and the curves of Yu et al.'s Fig. 3.",
    )
    importlib.import_module("sgrld.run.demo").add_arguments(demo)

    export = sub.add_parser(
        "export",
        help="write a run's samples as ArviZ data (netCDF or Zarr)",
        description="Write the samples of a run with run.save_samples = true as an ArviZ "
        "DataTree (groups posterior and sample_stats, dims chain and draw).",
    )
    export.add_argument("folder", metavar="OUT", help="the results folder of the run")
    export.add_argument("--format", choices=("netcdf", "zarr"), default="netcdf")
    export.add_argument("--to", help="where to write it (default: OUT/inference_data.nc or .zarr)")

    diagnose = sub.add_parser(
        "diagnose",
        help="split R-hat and bulk/tail ESS of a run's potential, test log-likelihood and a "
        "few parameters",
        description="Convergence diagnostics (ArviZ) of a run with run.save_samples = true: split "
        "R-hat and bulk/tail ESS of the potential, of each draw's mean log-likelihood on the "
        "evaluation sets (test_log_likelihood, ...) and of a fixed random subset of scalar "
        "parameters, and their traces in OUT/diagnose.png. R-hat above 1.01: not mixed. For a run "
        f"with at most {KSD_MAX_DIM:,} parameters it also prints the IMQ kernel Stein discrepancy "
        f"of the pooled draws (at most {KSD_MAX_DRAWS:,}, evenly thinned) against the full-batch "
        "log posterior, rebuilt from OUT/config.toml and the data set (skipped, with a line why, "
        "if either is missing); for a larger run, --ksd-coordinates K computes it on K random "
        "coordinates with the joint score (one full-batch gradient per draw).",
    )
    diagnose.add_argument("folder", metavar="OUT", help="the results folder of the run")
    diagnose.add_argument("--params", type=int, default=8, help="how many scalar parameters")
    diagnose.add_argument("--seed", type=int, default=0, help="seed of the parameters' choice")
    diagnose.add_argument(
        "--no-ksd", action="store_true", help="do not compute the kernel Stein discrepancy"
    )
    diagnose.add_argument(
        "--ksd-coordinates",
        type=int,
        metavar="K",
        help=f"the KSD on K random coordinates (seed --seed) with the joint score; needed above "
        f"D = {KSD_MAX_DIM:,} (default: all coordinates, for D <= {KSD_MAX_DIM:,})",
    )
    diagnose.add_argument(
        "--ksd-draws",
        type=int,
        default=KSD_MAX_DRAWS,
        metavar="M",
        help=f"the KSD of at most M pooled draws, evenly thinned (default {KSD_MAX_DRAWS:,}); "
        "each costs one full-batch gradient",
    )

    _sweep_parser(sub)

    rep = sub.add_parser("reproduce", help="reproduce a figure or table of the papers")
    experiments = rep.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    for name, reproduction in reproductions().items():
        p = experiments.add_parser(
            name, help=reproduction.summary, description=reproduction.summary
        )
        reproduction.add_arguments(p)
        p.set_defaults(reproduction=reproduction)
    return parser


def _sweep_parser(sub: argparse._SubParsersAction) -> None:
    """The ``sgrld sweep`` subcommand's arguments."""
    sweep = sub.add_parser(
        "sweep",
        help="learning rates (or Monge's α², temperatures) x replicates as the chains of one "
        "program",
        description="Run every (setting, replicate) pair of a grid as the chains of one compiled "
        "program (replicate r: seed run.seed + r, the chains of `sgrld run` with that seed), then "
        "print and save (sweep.md, sweep.json, summary.json) the mean ± std over replicates of "
        "the test scores per setting and the best setting on the validation log-likelihood. "
        f"Sweepable keys: {', '.join(sgrld_sweep.SWEEPABLE)}.",
    )
    sweep.add_argument(
        "config", metavar="CONFIG.toml", nargs="?", help="the configuration file (as sgrld run)"
    )
    sweep.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=[V1,V2,...]",
        help="a key and its values, e.g. --grid sampler.learning_rate=[0.05,0.1,0.25] "
        "(repeatable: every combination is a setting)",
    )
    sweep.add_argument(
        "--replicates", type=int, help="seeds per setting (default: 1; with --resume: the sweep's)"
    )
    sweep.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key of the configuration (as sgrld run)",
    )
    sweep.add_argument("--out", help="results folder (default: out.folder of the configuration)")
    again = sweep.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        metavar="OUT",
        help="continue the sweep in OUT from its newest checkpoint (its config.toml, grid and "
        "replicates unless given, which must be the same)",
    )
    again.add_argument(
        "--overwrite", action="store_true", help="replace a run already in the results folder"
    )
    _device_arguments(sweep, hosts=False)


def sweep_command(args: argparse.Namespace) -> int:
    """``sgrld sweep``: check the grid, run all its chains at once, print and save the table."""
    config, path = _config_to_resume(args, list(args.overrides))
    grid_texts, replicates = args.grid, args.replicates
    stored = sgrld_sweep.stored_sweep(Path(args.resume)) if args.resume else None
    if stored is not None:  # what is not given is the sweep's own
        grid_texts = grid_texts or [f"{k}={json.dumps(v)}" for k, v in stored["grid"].items()]
        replicates = stored["replicates"] if replicates is None else replicates
    grids = [sgrld_sweep.parse_grid(text, config) for text in grid_texts]
    console = report.console()
    name = str(path) if path else "the default configuration"
    console.print(f"{'Resuming' if args.resume else 'Sweeping'} {name} -> {config.out.folder}")
    existing = "resume" if args.resume else "overwrite" if args.overwrite else "refuse"
    replicates = 1 if replicates is None else replicates
    out = sgrld_sweep.run_sweep(
        config,
        grids,
        replicates,
        existing=existing,
        progress=True,
        devices=None if args.devices is None else _count(args.devices),
        data_parallel=args.data_parallel,
    )
    console.print(report.rich_table(out.caption, out.columns, out.rows))
    console.print(out.result.message)
    return runner.EXIT_CODES[out.result.status]


def _device_arguments(parser: argparse.ArgumentParser, hosts: bool = True) -> None:
    """``sgrld run``'s flags for devices (``run.devices``, ``run.data_parallel``) and, with
    ``hosts``, for a multi-process run (:func:`sgrld.chains.devices.initialize`)."""
    if not hosts:
        group = parser.add_argument_group(
            "devices",
            "Shard the chains over devices and each minibatch over data_parallel of them.",
        )
    else:
        group = parser.add_argument_group(
            "devices and hosts",
            "Shard the chains over devices and each minibatch over data_parallel of them. A "
            "multi-process run starts the same command in every process: --distributed finds the "
            "processes on SLURM, Open MPI or a TPU pod; elsewhere give --coordinator, "
            "--num-processes and --process-id. Process 0 writes the results.",
        )
    group.add_argument(
        "--devices", metavar="all|N", help='run.devices: "all" devices or the first N'
    )
    group.add_argument(
        "--data-parallel", type=int, metavar="D", help="run.data_parallel: devices per minibatch"
    )
    if not hosts:
        return
    group.add_argument(
        "--distributed",
        action="store_true",
        help="join a multi-process run (jax.distributed), its processes found by JAX",
    )
    group.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address")
    group.add_argument("--num-processes", type=int, metavar="N")
    group.add_argument("--process-id", type=int, metavar="I")
    group.add_argument(
        "--init-timeout",
        type=int,
        default=300,
        metavar="SECONDS",
        help="how long to wait for the coordinator and the other processes",
    )


def _join(argv: list[str] | None) -> None:
    """Join the multi-process run that ``sgrld run``'s flags ask for, before anything uses JAX
    (building the parser does: a reproduction's options list its problems)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["run"]:
        return
    parser = argparse.ArgumentParser(add_help=False)
    _device_arguments(parser)
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
        value = args.devices if args.devices == "all" else _count(args.devices)
        overrides.append(f"run.devices={json.dumps(value)}")
    if args.data_parallel is not None:
        overrides.append(f"run.data_parallel={args.data_parallel}")
    return overrides


def _count(text: str) -> int | str:
    """``--devices N`` as a number (other text is left for the configuration check)."""
    return int(text) if text.isdigit() else text


def reproductions() -> dict[str, Any]:
    """The reproductions installed under :data:`REPRODUCTIONS_GROUP`, by name."""
    found = importlib.metadata.entry_points(group=REPRODUCTIONS_GROUP)
    return {ep.name: ep.load() for ep in sorted(found, key=lambda ep: ep.name)}


def _config_to_resume(args: argparse.Namespace, overrides: list[str]) -> tuple[Config, Path | None]:
    """The configuration of ``sgrld run`` or ``sgrld sweep`` and its file: with ``--resume OUT``
    and neither a file nor ``--set``, ``OUT/config.toml``; the results folder is ``--resume`` or
    ``--out``."""
    out = args.resume or args.out
    if args.resume and args.out and Path(args.out) != Path(args.resume):
        raise ConfigError(f"--out {args.out} and --resume {args.resume} name different folders")
    if out is not None:
        overrides.append(f"out.folder={json.dumps(out)}")
    path = args.config
    if args.resume and path is None and not args.overrides:
        path = Path(args.resume) / "config.toml"
        if not path.is_file():
            raise ResultsError(f"--resume {args.resume}: no run to resume there (no config.toml)")
    return load_config(path, overrides), path


def run_command(args: argparse.Namespace) -> int:
    """``sgrld run``: load the configuration, run it, print the final scores, plot the curves."""
    config, path = _config_to_resume(args, list(args.overrides) + _device_overrides(args))
    console = report.console()
    name = str(path) if path else "the default configuration"
    verb = "Resuming" if args.resume else "Running"
    console.print(f"{verb} {name} -> {config.out.folder}")
    existing = "resume" if args.resume else "overwrite" if args.overwrite else "refuse"
    result = run_config(config, existing=existing, progress=True)
    if result.records and result.out is not None:  # another process of a multi-process run
        report.plot_curves({config.sampler.metric: result.records}, result.out / "curves.png")
        row = report.summary_row(result, metric=config.sampler.metric)
        caption = f"{name} after {len(result.records)} epochs"
        console.print(report.rich_table(caption, report.summary_columns(row), [row]))
    console.print(result.message)
    return runner.EXIT_CODES[result.status]


def export_command(args: argparse.Namespace) -> int:
    """``sgrld export``: write the run's samples as netCDF or Zarr."""
    observed = observed_targets(args.folder)
    path = arviz_export.export(args.folder, args.format, args.to, observed_data=observed)
    report.console().print(f"wrote {path}")
    return 0


def diagnose_command(args: argparse.Namespace) -> int:
    """``sgrld diagnose``: print split R-hat and ESS of a few traces and plot them."""
    series = diagnostics.traces(args.folder, num_params=args.params, seed=args.seed)
    rows = diagnostics.convergence(series)
    chains, draws = next(iter(series.values())).shape
    console = report.console()
    console.print(f"{args.folder}: {chains} chain(s) x {draws} draws", soft_wrap=True)
    console.print(report.rich_table("convergence", report.CONVERGENCE_COLUMNS, rows))
    plot = report.plot_traces(series, f"{args.folder}/diagnose.png")
    console.print(f"split R-hat above 1.01: the chains have not mixed. Traces in {plot}")
    if not args.no_ksd:
        line = ksd_line(
            Path(args.folder), args.ksd_coordinates, max_draws=args.ksd_draws, seed=args.seed
        )
        console.print(line, soft_wrap=True)
    return 0


KSD_MAX_DIM = 1000
"""``sgrld diagnose`` prints the KSD of runs with at most this many parameters (D)."""
KSD_MAX_DRAWS = 1000
"""... of at most this many pooled draws (evenly thinned): the scores are one full-batch gradient
each, and the kernel sum is O(n²)."""


def ksd_line(
    folder: Path, coordinates: int | None = None, *, max_draws: int = KSD_MAX_DRAWS, seed: int = 0
) -> str:
    """``sgrld diagnose``'s line on the IMQ kernel Stein discrepancy of the run's pooled draws
    against its full-batch log posterior (:func:`sgrld.run.from_config.log_posterior`), on all
    coordinates or on ``coordinates`` random ones (:func:`sgrld.samples.stein.ksd`), or on why it is
    skipped: more than :data:`KSD_MAX_DIM` parameters and no ``coordinates``, no readable
    ``config.toml``, or the data set's files not found.

    Raises:
        sgrld.run.config.ConfigError: if ``coordinates`` or ``max_draws`` is below 1.
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

COMMANDS = {
    "run": run_command,
    "sweep": sweep_command,
    "export": export_command,
    "diagnose": diagnose_command,
}
"""The commands other than ``demo`` and ``reproduce``."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sgrld`` command; returns the exit code."""
    try:
        _join(argv)
    except devices.DistributedError as err:
        print(f"sgrld: error: {err}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    try:
        if args.command in COMMANDS:
            return COMMANDS[args.command](args)
        if args.command == "demo":
            return importlib.import_module("sgrld.run.demo").run(args)
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
        return runner.EXIT_CODES["interrupted"]


if __name__ == "__main__":
    sys.exit(main())
