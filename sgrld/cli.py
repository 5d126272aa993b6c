"""The ``sgrld`` command line: ``sgrld reproduce NAME``, ``sgrld demo``."""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help); each module defines add_arguments(parser) and run(args) -> int.
REPRODUCTIONS = {
    "funnel": (
        "sgrld.experiments.funnel",
        "Yu et al. (2023) Fig. 2: the 2-D funnel in four metrics",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``sgrld`` command."""
    parser = argparse.ArgumentParser(
        prog="sgrld",
        description="Stochastic-gradient Riemannian Langevin dynamics: run and reproduce experiments.",
        epilog="Every command writes its results to --out (a folder) and prints a table.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser(
        "demo", help="the main job on embedded defaults (quick funnel reproduction)"
    )
    demo.add_argument("--out", default="results/demo", help="results folder (default: %(default)s)")
    rep = sub.add_parser("reproduce", help="reproduce a figure or table of the papers")
    experiments = rep.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    for name, (module, help_text) in REPRODUCTIONS.items():
        p = experiments.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).add_arguments(p)
        p.set_defaults(module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sgrld`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        args = parser.parse_args(["reproduce", "funnel", "--quick", "--out", args.out])
    return importlib.import_module(args.module).run(args)


if __name__ == "__main__":
    sys.exit(main())
