"""``sgrld reproduce natural-langevin`` with its Γ rows at another share of Γ (RESULTS §29).

The reproduction's Γ rows use the library's default share ĉ (``correction_scale="auto"``); this
script runs the same command with every corrected ``sgrld.sgrld`` given ``--share`` instead (a
number, e.g. 1 for the full Γ), so the two can be put side by side. Every other argument goes to
the reproduction unchanged::

    python benchmarks/right_by_default/natural_langevin_share.py --share 1 -- --quick \\
        --data-dir ../shared/data/mnist --methods dop-gamma qdop-gamma --seed 0 --out OUT
"""

from __future__ import annotations

import argparse
import sys
from functools import wraps

import sgrld
from sgrld.run import cli
from sgrld_reproductions.natural_langevin import runs


def with_share(share: float | str):
    """``sgrld.sgrld`` whose corrected samplers use ``share`` as their ``correction_scale``."""
    factory = sgrld.sgrld

    @wraps(factory)
    def sampler(*args, **options):
        if options.get("correction", "none") not in ("none", None):
            options["correction_scale"] = share
        return factory(*args, **options)

    return sampler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share", default="auto", help='a number, or "auto" (the default)')
    parser.add_argument("--eps", type=float, default=None, help="the Γ rows' ε (default 1e-3)")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="the reproduction's arguments")
    args = parser.parse_args()
    if args.eps is not None and not args.eps > 0:
        parser.error(f"--eps must be > 0, got {args.eps}")
    share = args.share if args.share == "auto" else float(args.share)
    sgrld.sgrld = with_share(share)  # the reproduction looks the factory up as sgrld.sgrld
    if args.eps is not None:
        gamma_rows = [m.with_eps(args.eps) if m.correction != "none" else m for m in runs.METHODS]
        runs.METHODS = tuple(gamma_rows)
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    return cli.main(["reproduce", "natural-langevin", *rest])


if __name__ == "__main__":
    sys.exit(main())
