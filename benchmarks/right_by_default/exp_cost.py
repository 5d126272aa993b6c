"""Experiment c: what the adaptive share costs, against the library's fixed-share Γ step.

On the 784-400-400-10 MLP of ``benchmarks/step_throughput.py`` (478,410 parameters, batch 100),
per metric, three candidates, each ``--chunk`` steps inside one jitted ``lax.scan``
(``mlp.ScanChain``), timed in interleaved rounds (``timing.interleave``):

* ``fixed``: ``sgrld.sgrld(correction="hutchinson", correction_scale=0.5)``, the library's step;
* ``auto``: share.py's step with ĉ (one more moving average of θ and four running moments);
* ``proto-fixed``: share.py's step with the fixed share 0.5 (the prototype's own overhead).

Reported: median ms per step and the median over rounds of the ratio to ``fixed`` in the same
round, with its range; and ``auto`` over ``proto-fixed`` (the estimator's own cost).

    python benchmarks/right_by_default/exp_cost.py [--metrics rmsprop monge dop] [--rounds 7]
        [--chunk 20] [--chains 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax.numpy as jnp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import mlp  # noqa: E402
from share import Config, Sampler, adaptive_sgrld, make_step  # noqa: E402
from timing import environment, fmt_spread, interleave, paired, spread  # noqa: E402

import sgrld  # noqa: E402

METRICS = {
    "rmsprop": (lambda: sgrld.metrics.rmsprop(decay=0.99), 0.99, 1e-5),
    "monge": (lambda: sgrld.metrics.monge(alpha2=1.0, decay=0.9), 0.9, 1e-4),
    "dop": (lambda: sgrld.metrics.fisher_diag(decay=0.99), 0.99, 1e-4),
    "shampoo": (
        lambda: sgrld.metrics.shampoo(decay=0.99, eps=1e-2, update_every=100, block_size=128),
        0.99,
        1e-5,
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", nargs="+", default=["rmsprop", "monge", "dop"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--chunk", type=int, default=20)
    parser.add_argument("--chains", type=int, default=None, help="vmapped chains (default 1)")
    args = parser.parse_args()
    print(environment())
    params, batch, potential = mlp.problem()
    n = mlp.NUM_DATA
    rows = []
    for name in args.metrics:
        make, decay, lr = METRICS[name]
        fixed = sgrld.sgrld(
            potential,
            make(),
            learning_rate=lr,
            num_data=n,
            correction="hutchinson",
            correction_scale=0.5,
        )
        auto = adaptive_sgrld(potential, make(), decay=decay, learning_rate=lr, num_data=n)
        init, step = make_step(potential, make(), decay=decay, learning_rate=lr, num_data=n)
        proto = Sampler(
            init, lambda k, s, b, step=step: step(Config(scale=0.5, auto=False), k, s, b)
        )
        cands = {
            k: mlp.ScanChain(mlp.over_chains(v, args.chains), params, batch, args.chunk)
            for k, v in (("fixed", fixed), ("auto", auto), ("proto-fixed", proto))
        }
        times = interleave(cands, args.rounds)
        ref = times["fixed"]
        own = fmt_spread(paired(times["auto"], times["proto-fixed"]))
        print(f"| {name} | auto / proto-fixed | | {own} | |", flush=True)
        rows.append((name, "auto / proto-fixed", "", own, ""))
        for k, t in times.items():
            ms = spread(x / args.chunk * 1e3 for x in t).median
            ratio = fmt_spread(paired(t, ref)) if k != "fixed" else "1"
            ok = cands[k].finite
            rows.append((name, k, f"{ms:.1f}", ratio, str(ok)))
            print(f"| {name} | {k} | {ms:.1f} | {ratio} | {ok} |", flush=True)
    print("\n| metric | step | ms/step | ratio to fixed [range] | finite |\n|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    jnp.zeros(())
    sys.exit(main())
