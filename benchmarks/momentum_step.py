"""Step cost of SGHMC, SGNHT and i-SGD against an SGLD step on the MNIST MLP (or Li et al.'s CNN).

Issue 16's speed targets: on the 784-400-400-10 ReLU MLP (Flax, 478,410 parameters), batch 100,
N = 50,000, one chain, CPU,

    SGHMC step ≤ 1.1× SGLD's,    i-SGD step ≤ 1.3× SGLD's (per-example variances by the cheap
                                  Dense route, sgrld.numerics.per_example).

``--model cnn`` times the same rows on Li et al.'s CNN (:class:`sgrld.bnn.CNN`: 5x5 convolutions
of 32 and 64 channels, dense 200-200; 299,306 parameters; its convolutions as the runner computes
them on this backend, ``model.conv = "auto"``), batch 100, N = 50,000: the cost of the
convolutions' per-example statistics (the patches route of :mod:`sgrld.numerics.tap_statistics`).

SGHMC with the per-example minibatch-noise estimate B̂ (``gradient_noise="per_example"``) and
SGNHT are timed beside them. Every step runs ``--chunk`` at a time inside one jitted
``lax.scan`` (:class:`mlp.ScanChain`, the Linen MLP of :func:`fisher_step.problem`); R interleaved
rounds, the order rotating, ratios paired per round (``timing.py``). The step sizes only keep
the chains finite; timing does not depend on them.

Usage::

    python benchmarks/momentum_step.py            # 7 rounds of 100 steps
    python benchmarks/momentum_step.py --quick    # smoke run: 2 rounds of 20 steps
    python benchmarks/momentum_step.py --model cnn --rounds 5 --chunk 20
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import mlp
from fisher_step import log_prior, problem
from timing import Candidate, environment, fmt_spread, interleave, paired, table

import sgrld
from sgrld.bnn.convolutions import resolve_conv

LR = 1e-3
"""lr = h·N of every chain (small enough that none diverges on the benchmark's minibatch)."""
TARGETS = {"SGHMC": 1.1, "i-SGD": 1.3}
"""The issue's bounds on a step / SGLD's."""


def samplers(potential) -> dict[str, sgrld.Sampler]:
    """The rows: SGLD (the reference), SGHMC, SGHMC + B̂, SGNHT, i-SGD (the λ rule)."""
    n = mlp.NUM_DATA
    return {
        "SGLD": sgrld.sgrld(potential, sgrld.metrics.identity(), learning_rate=LR, num_data=n),
        "SGHMC": sgrld.sghmc(potential, learning_rate=LR, num_data=n, friction=0.1),
        "SGHMC + B̂ (per example)": sgrld.sghmc(
            potential, learning_rate=LR, num_data=n, friction=0.1, gradient_noise="per_example"
        ),
        "SGNHT": sgrld.sgnht(potential, learning_rate=LR, num_data=n, diffusion=0.1),
        "i-SGD": sgrld.isgd(potential, num_data=n, warmup=10),
    }


def cnn_problem():
    """Li et al.'s CNN at its initialisation, a random MNIST-shaped minibatch of :data:`mlp.BATCH`
    and its potential (N = :data:`mlp.NUM_DATA`, the prior of :func:`fisher_step.log_prior`)."""
    model = sgrld.bnn.CNN()
    params = {"net": sgrld.bnn.init_params(model, jax.random.key(0), (1, 28, 28, 1))}
    kx, ky = jax.random.split(jax.random.key(1))
    batch = (jax.random.normal(kx, (mlp.BATCH, 784)), jax.random.randint(ky, (mlp.BATCH,), 0, 10))
    loglik = sgrld.bnn.likelihoods.categorical(sgrld.bnn.apply_fn(model))
    return batch, params, sgrld.potential(loglik, log_prior, mlp.NUM_DATA)


def per_step(c: Candidate) -> list[float]:
    return [t / c.steps for t in c.times]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    parser.add_argument("--chunk", type=int, default=100, help="steps per candidate per round")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 rounds of 20 steps")
    parser.add_argument(
        "--model", choices=("mlp", "cnn"), default="mlp", help="the network (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.chunk = 2, 20
    if args.rounds < 1 or args.chunk < 1:
        parser.error("--rounds and --chunk must be >= 1")
    print(environment())
    if args.model == "cnn":
        batch, params, potential = cnn_problem()
        size = sum(x.size for x in jax.tree.leaves(params))
        network = f"Li et al.'s CNN ({size:,} params, conv {resolve_conv('auto')})"
    else:
        params, potential, batch = problem("linen-mlp")
        network = f"784-400-400-10 MLP ({mlp.NUM_PARAMS:,} params)"
    print(
        f"backend {jax.default_backend()}; {network}, batch {mlp.BATCH}, one chain; "
        f"{args.rounds} rounds x {args.chunk} steps, each chunk one scan"
    )
    t0 = time.perf_counter()
    cands = []
    for name, sampler in samplers(potential).items():
        chain = mlp.ScanChain(sampler, params, batch, args.chunk)
        cands.append(
            Candidate(
                name, chain, args.chunk, finite=lambda c=chain: c.finite, compile_s=chain.compile_s
            )
        )
    print(f"compile/warm-up of {len(cands)} candidates: {time.perf_counter() - t0:.1f} s")
    times = interleave({c.name: c.run for c in cands}, args.rounds)
    for c in cands:
        c.times = times[c.name]
    ref = cands[0]
    rows, ratios = [], {}
    for c in cands:
        s = paired(per_step(c), per_step(ref))
        ratios[c.name] = s.median
        finite = "yes" if c.finite() else "NO"
        rows.append([c.name, f"{1e3 * c.step_s:.2f}", fmt_spread(s, 2), finite])
    print(table(["candidate", "ms/step", "/ SGLD [range over rounds]", "finite"], rows))
    if args.model != "mlp":
        return 0 if all(c.finite() for c in cands) else 1
    print("Targets (issue 16):")
    for name, limit in TARGETS.items():
        mark = "✓" if ratios[name] <= limit else "✗"
        print(f"  {mark} {name} / SGLD: {ratios[name]:.2f}x (<= {limit}x)")
    return 0 if all(c.finite() for c in cands) else 1


if __name__ == "__main__":
    sys.exit(main())
