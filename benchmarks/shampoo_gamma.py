"""Shampoo's Γ correction on the MLP of ``mlp.py``: what it costs by each route, and which eps
keeps it finite.

``cost`` (the default): Shampoo's Γ needs the derivative of ``F(S)·z`` along the statistic's change
``D s(g)[H z]``. The generic route (``Metric.inv_grad_tangent`` set to ``None``) differentiates the
statistic and then ``inv`` through the cached roots (Daleckii–Krein per factor: about 8k blocked
products for a k-factor block); Shampoo's ``inv_grad_tangent`` does the same in the eigenbases of
its factors (about 6k). This times the uncorrected step and the corrected one by both routes, each
``--steps`` steps inside one jitted ``lax.scan``, in interleaved rounds (``timing.py``), and prints
the median ms per step and the ratio to the uncorrected step paired by round.

``eps``: runs ``sgrld.sgrld(potential, shampoo(eps=...), correction="hutchinson")`` (lr 1e-5,
update every 100, block 128) for ``--steps`` steps per eps and prints the first step whose
parameters or gradient were not finite. Γ starts after the metric's warm-up of ⌈3/(1 − decay)⌉
= 300 updates.

    python benchmarks/shampoo_gamma.py cost [--rounds 7] [--steps 100]
    python benchmarks/shampoo_gamma.py eps [--steps 600] [--eps 1e-8 1e-6 1e-4 1e-2]
"""

from __future__ import annotations

import argparse
import statistics
import sys

import jax
import mlp
from timing import environment, fmt_spread, interleave, paired, table

import sgrld


def cost(args) -> None:
    """The uncorrected and the two corrected steps, interleaved; ms/step and paired ratios."""
    params, batch, potential = mlp.problem()
    metric = mlp.make_metric("shampoo", corrected=True)
    routes = {
        "uncorrected": (metric, None),
        "Γ, eigenbasis": (metric, "hutchinson"),
        "Γ, composed": (metric._replace(inv_grad_tangent=None), "hutchinson"),
    }
    chains = {}
    for name, (m, mode) in routes.items():
        extra = {"correction": mode, "correction_scale": 1.0} if mode else {}  # the full Γ
        sampler = sgrld.sgrld(potential, m, learning_rate=1e-4, num_data=mlp.NUM_DATA, **extra)
        chains[name] = mlp.ScanChain(sampler, params, batch, args.steps)
    times = interleave(chains, args.rounds)
    print(f"Shampoo (update_every 100, block 128), {args.rounds} rounds x {args.steps} steps")
    rows = [
        [
            name,
            f"{1e3 * statistics.median(t) / args.steps:.2f}",
            fmt_spread(paired(t, times["uncorrected"])),
            "yes" if chains[name].finite else "NO",
        ]
        for name, t in times.items()
    ]
    print(table(["step", "ms/step", "/uncorrected [range]", "finite"], rows))


def eps(args) -> None:
    """One corrected chain per eps; the first non-finite step of each."""
    params, batch, potential = mlp.problem()
    key = jax.random.key(0)
    for e in args.eps:
        metric = sgrld.metrics.shampoo(eps=e, update_every=100, block_size=128)
        sampler = sgrld.sgrld(
            potential,
            metric,
            learning_rate=1e-5,
            num_data=mlp.NUM_DATA,
            correction="hutchinson",
            correction_scale=1.0,
        )
        step = jax.jit(sampler.step)
        state, first_bad = sampler.init(params), None
        for t in range(args.steps):
            state, info = step(jax.random.fold_in(key, t), state, batch)
            if not bool(info.is_finite):
                first_bad = t
                break
        verdict = "finite" if first_bad is None else f"non-finite at step {first_bad}"
        print(f"eps={e:g}: {verdict} ({args.steps} steps, warm-up {metric.warmup})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what")
    p_cost = sub.add_parser("cost", help="the corrected step by both routes (the default)")
    p_cost.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    p_cost.add_argument("--steps", type=int, default=100, help="steps per timed scan")
    p_eps = sub.add_parser("eps", help="which eps keeps the corrected chain finite")
    p_eps.add_argument("--steps", type=int, default=600)
    p_eps.add_argument("--eps", type=float, nargs="+", default=[1e-8, 1e-6, 1e-4, 1e-2])
    args = parser.parse_args(sys.argv[1:] or ["cost"])
    if args.steps < 1 or getattr(args, "rounds", 1) < 1:
        parser.error("--rounds and --steps must be >= 1")
    print(environment())
    (eps if args.what == "eps" else cost)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
