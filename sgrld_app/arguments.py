"""The arguments of the ``sgrld`` command: one parser, a subcommand each for ``run``, ``demo``,
``export``, ``diagnose``, ``sweep`` and ``reproduce NAME`` (one per installed reproduction, found
through the :data:`REPRODUCTIONS_GROUP` entry points); the commands themselves are
:mod:`sgrld_app.cli`'s.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import textwrap
from collections.abc import Callable
from typing import Any, NamedTuple

from sgrld_app import demo
from sgrld_app import sweep as sgrld_sweep
from sgrld_app.argument_types import integer_at_least, positive_int
from sgrld_app.config import Config, to_toml

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
  sgrld run --set sampler.metric=fisher_qdiag --set sampler.learning_rate=0.001 \\
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
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in _COMMANDS.items():
        raw = {"formatter_class": argparse.RawDescriptionHelpFormatter}
        after = {} if command.epilog is None else {"epilog": command.epilog(), **raw}
        command.add_arguments(
            sub.add_parser(name, help=command.help, description=command.description, **after)
        )
    _reproduce_parser(sub)
    return parser


class _Command(NamedTuple):
    """A subcommand of ``sgrld`` (:data:`_COMMANDS`): its one-line help, its description, what
    adds its arguments and, for ``sgrld run``, the text after them (printed as it is)."""

    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    epilog: Callable[[], str] | None = None


def _version() -> str:
    """The installed version of sgrld."""
    try:
        return importlib.metadata.version("sgrld")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _run_arguments(run: argparse.ArgumentParser) -> None:
    """The ``sgrld run`` subcommand's arguments."""
    run.add_argument(
        "config",
        metavar="CONFIG.toml",
        nargs="?",
        help="the configuration file (left out: the defaults below, changed by --set)",
    )
    _output_arguments(
        run,
        overrides="override a key, e.g. --set run.epochs=3 or --set model.widths=[800,800] (a TOML "
        "value; repeatable)",
        resume="continue the run in OUT from its newest checkpoint (its config.toml unless a "
        "configuration is given, which must be the same)",
        overwrite="replace the run already in the results folder (without it, sgrld run refuses)",
    )
    device_arguments(run)


def _output_arguments(
    parser: argparse.ArgumentParser, *, overrides: str, resume: str, overwrite: str
) -> None:
    """``--set``, ``--out``, ``--data-dir`` and ``--resume`` | ``--overwrite``, with these helps:
    the flags ``sgrld run`` and ``sgrld sweep`` share."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=overrides,
    )
    parser.add_argument("--out", help="results folder (default: out.folder of the configuration)")
    parser.add_argument(
        "--data-dir",
        help="the data sets' folder (as --set data.data_dir=DIR; default: $SGRLD_DATA_DIR, else "
        "~/.cache/sgrld/data)",
    )
    again = parser.add_mutually_exclusive_group()
    again.add_argument("--resume", metavar="OUT", help=resume)
    again.add_argument("--overwrite", action="store_true", help=overwrite)


def _export_arguments(export: argparse.ArgumentParser) -> None:
    """The ``sgrld export`` subcommand's arguments."""
    export.add_argument("folder", metavar="OUT", help="the results folder of the run")
    export.add_argument(
        "--format",
        choices=("netcdf", "zarr"),
        default="netcdf",
        help="netcdf: one file (.nc); zarr: a folder (.zarr), which xarray opens lazily "
        "(default: %(default)s)",
    )
    export.add_argument("--to", help="where to write it (default: OUT/inference_data.nc or .zarr)")
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing file or Zarr store at the target that is not an earlier export "
        "(without it, sgrld export refuses; an earlier export is replaced, another folder never)",
    )


def _diagnose_arguments(diagnose: argparse.ArgumentParser) -> None:
    """The ``sgrld diagnose`` subcommand's arguments."""
    diagnose.add_argument("folder", metavar="OUT", help="the results folder of the run")
    options = {
        "--params": dict(
            type=positive_int,
            default=8,
            help="how many scalar parameters to trace, chosen at random (>= 1; default: "
            "%(default)s)",
        ),
        "--seed": dict(
            type=integer_at_least(0),
            default=0,
            help="seed of the parameters' choice and of the KSD's coordinates (default: "
            "%(default)s)",
        ),
        "--no-ksd": dict(action="store_true", help="do not compute the kernel Stein discrepancy"),
        "--ksd-coordinates": dict(
            type=positive_int,
            metavar="K",
            help=f"the KSD on K random coordinates (seed --seed) with the joint score; needed "
            f"above D = {KSD_MAX_DIM:,} (default: all coordinates, for D <= {KSD_MAX_DIM:,})",
        ),
        "--ksd-draws": dict(
            type=positive_int,
            default=KSD_MAX_DRAWS,
            metavar="M",
            help=f"the KSD of at most M pooled draws, evenly thinned (default "
            f"{KSD_MAX_DRAWS:,}); each costs one full-batch gradient",
        ),
    }
    for flag, settings in options.items():
        diagnose.add_argument(flag, **settings)


def _reproduce_parser(sub: argparse._SubParsersAction) -> None:
    """``sgrld reproduce NAME``: one subcommand per installed reproduction."""
    rep = sub.add_parser("reproduce", help="reproduce a figure or table of the papers")
    found = reproductions()
    if not found:  # a checkout on PYTHONPATH that pip never installed has no entry points
        rep.add_argument("experiment", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        rep.set_defaults(reproduction=_NoReproductions())
        return
    experiments = rep.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    for name, reproduction in found.items():
        p = experiments.add_parser(
            name, help=reproduction.summary, description=reproduction.summary
        )
        reproduction.add_arguments(p)
        p.set_defaults(reproduction=reproduction)


class _NoReproductions:
    """``sgrld reproduce`` where no package declares a reproduction: says how to install them."""

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        print(
            f"sgrld: error: no reproductions are installed (entry-point group "
            f"{REPRODUCTIONS_GROUP!r}): `pip install -e .` in sgrld's checkout installs the "
            "papers' (package sgrld_reproductions); a checkout on PYTHONPATH alone has none",
            file=sys.stderr,
        )
        return 2


def _sweep_arguments(sweep: argparse.ArgumentParser) -> None:
    """The ``sgrld sweep`` subcommand's arguments."""
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
        "--replicates",
        type=positive_int,
        help="seeds per setting (default: 1; with --resume: the sweep's)",
    )
    _output_arguments(
        sweep,
        overrides="override a key of the configuration (as sgrld run)",
        resume="continue the sweep in OUT from its newest checkpoint (its config.toml, grid and "
        "replicates unless given, which must be the same)",
        overwrite="replace a run already in the results folder",
    )
    device_arguments(sweep, hosts=False)


def device_arguments(parser: argparse.ArgumentParser, hosts: bool = True) -> None:
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
        "--data-parallel",
        type=positive_int,
        metavar="D",
        help="run.data_parallel: devices per minibatch",
    )
    if not hosts:
        return
    group.add_argument(
        "--distributed",
        action="store_true",
        help="join a multi-process run (jax.distributed), its processes found by JAX",
    )
    group.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address")
    group.add_argument("--num-processes", type=positive_int, metavar="N")
    group.add_argument("--process-id", type=integer_at_least(0), metavar="I")
    group.add_argument(
        "--init-timeout",
        type=positive_int,
        default=300,
        metavar="SECONDS",
        help="how long to wait for the coordinator and the other processes",
    )


def reproductions() -> dict[str, Any]:
    """The reproductions installed under :data:`REPRODUCTIONS_GROUP`, by name."""
    found = importlib.metadata.entry_points(group=REPRODUCTIONS_GROUP)
    return {ep.name: ep.load() for ep in sorted(found, key=lambda ep: ep.name)}


KSD_MAX_DIM = 1000
"""``sgrld diagnose`` prints the KSD of runs with at most this many parameters (D)."""


KSD_MAX_DRAWS = 1000
"""... of at most this many pooled draws (evenly thinned): the scores are one full-batch gradient
each, and the kernel sum is O(n²)."""


_COMMANDS = {
    "run": _Command(
        "run the experiment of a TOML configuration file",
        "Sample a Bayesian neural network with SGRLD as a TOML file says, scoring the ensemble of "
        "samples after every epoch.",
        _run_arguments,
        epilog=_run_help,
    ),
    "demo": _Command(
        "the main job: four metrics on the digits data set (no files needed, ~1 minute)",
        "Identity, RMSprop, Monge and Shampoo SGRLD on scikit-learn's digits with a 64-100-100-10 "
        "MLP and the horseshoe prior: a table of log-likelihood, accuracy, ECE and time, and the "
        "curves of Yu et al.'s Fig. 3.",
        demo.add_arguments,
    ),
    "export": _Command(
        "write a run's samples as ArviZ data (netCDF or Zarr)",
        "Write the samples of a run with run.save_samples = true as an ArviZ DataTree (groups "
        "posterior and sample_stats, dims chain and draw).",
        _export_arguments,
    ),
    "diagnose": _Command(
        "split R-hat and bulk/tail ESS of a run's potential, test log-likelihood and a few "
        "parameters",
        "Convergence diagnostics (ArviZ) of a run with run.save_samples = true: split R-hat and "
        "bulk/tail ESS of the potential, of each draw's mean log-likelihood on the evaluation sets "
        "(test_log_likelihood, ...) and of a fixed random subset of scalar parameters, and their "
        "traces in OUT/diagnose.png. R-hat above 1.01: not mixed. For a run with at most "
        f"{KSD_MAX_DIM:,} parameters it also prints the IMQ kernel Stein discrepancy of the pooled "
        f"draws (at most {KSD_MAX_DRAWS:,}, evenly thinned) against the full-batch log posterior, "
        "rebuilt from OUT/config.toml and the data set (skipped, with a line why, if either is "
        "missing); for a larger run, --ksd-coordinates K computes it on K random coordinates with "
        "the joint score (one full-batch gradient per draw).",
        _diagnose_arguments,
    ),
    "sweep": _Command(
        "learning rates (or Monge's α², temperatures) x replicates as the chains of one program",
        "Run every (setting, replicate) pair of a grid as the chains of one compiled program "
        "(replicate r: seed run.seed + r, the initialisations, keys and minibatches of `sgrld "
        "run` with that seed; the same numbers up to float rounding, which a chaotic chain can "
        "amplify), then print "
        "and save (sweep.md, sweep.json, summary.json) the mean ± std over replicates of the test "
        "scores per setting and the best setting on the validation log-likelihood. Sweepable "
        f"keys: {', '.join(sgrld_sweep.SWEEPABLE)}.",
        _sweep_arguments,
    ),
}
"""The subcommands besides ``reproduce``, in the order ``sgrld --help`` lists them."""
