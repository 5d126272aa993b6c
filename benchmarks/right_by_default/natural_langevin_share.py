"""``sgrld reproduce natural-langevin`` with its Γ rows at another share of Γ (RESULTS §29).

The reproduction's Γ rows use the library's default share ĉ (``correction_scale="auto"``); this
script runs the same command with every corrected ``sgrld.sgrld`` given ``--share`` instead (a
number, e.g. 1 for the full Γ), so the two can be put side by side. ``--eps`` and
``--uncorrected-eps`` replace the ε of the Γ rows and of the uncorrected Fisher and RMSProp rows;
``--gamma-kick-limit`` replaces the Γ rows' ``gamma_kick_limit`` (``none``: Γ̂ untamed).
Every other argument goes to the reproduction unchanged::

    python benchmarks/right_by_default/natural_langevin_share.py --share 1 -- --quick \\
        --data-dir ../shared/data/mnist --methods dop-gamma qdop-gamma --seed 0 --out OUT
"""

from __future__ import annotations

import argparse
import sys
from functools import wraps

import sgrld
from sgrld_app import cli
from sgrld_reproductions.natural_langevin import runs


def with_share(share: float | str, gamma_kick_limit: float | str | None = None):
    """``sgrld.sgrld`` whose corrected samplers use ``share`` as their ``correction_scale`` and,
    unless it is ``None``, ``gamma_kick_limit`` (``"none"``: untamed)."""
    factory = sgrld.sgrld

    @wraps(factory)
    def sampler(*args, **options):
        if options.get("correction", "none") not in ("none", None):
            options["correction_scale"] = share
            if gamma_kick_limit is not None:
                options["gamma_kick_limit"] = (
                    None if gamma_kick_limit == "none" else float(gamma_kick_limit)
                )
        return factory(*args, **options)

    return sampler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share", default="auto", help='a number, or "auto" (the default)')
    parser.add_argument(
        "--eps", type=float, default=None, help="the Γ rows' ε (default the authors' 1e-4)"
    )
    parser.add_argument(
        "--uncorrected-eps",
        type=float,
        default=None,
        help="the uncorrected Fisher and RMSProp rows' ε (default the authors' 1e-4)",
    )
    parser.add_argument(
        "--gamma-kick-limit",
        default=None,
        help='the Γ rows\' gamma_kick_limit: a number, or "none" (untamed); default the '
        "reproduction's (1)",
    )
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="the reproduction's arguments")
    args = parser.parse_args()
    limit = args.gamma_kick_limit
    if limit not in (None, "none"):
        try:
            limit = float(limit)
        except ValueError:
            parser.error(f'--gamma-kick-limit must be a number or "none", got {limit!r}')
    for name, value in (("eps", args.eps), ("uncorrected-eps", args.uncorrected_eps)):
        if value is not None and not value > 0:
            parser.error(f"--{name} must be > 0, got {value}")
    if isinstance(limit, float) and not limit > 0:
        parser.error(f"--gamma-kick-limit must be > 0, got {limit}")
    share = args.share if args.share == "auto" else float(args.share)
    sgrld.sgrld = with_share(
        share, args.gamma_kick_limit
    )  # the reproduction looks the factory up as sgrld.sgrld

    def eps_of(method: runs.Method) -> float | None:
        if method.metric is None or "eps" not in method.metric.keywords:
            return None
        return args.eps if method.correction != "none" else args.uncorrected_eps

    runs.METHODS = tuple(m if eps_of(m) is None else m.with_eps(eps_of(m)) for m in runs.METHODS)
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    return cli.main(["reproduce", "natural-langevin", *rest])


if __name__ == "__main__":
    sys.exit(main())
