"""What a full-batch epoch costs through the runner's data source, with and without a permutation.

The runner walks every chain through epochs of shuffled minibatches
(:func:`sgrld.chains.engine.epochs`). At ``batch_size == n_train`` an epoch is one step over
every example, whose order changes only the sum's rounding, so the source draws no permutation.
This script times that source beside ``batch_size = n_train − 1`` (one step over all but one
example, a permutation drawn per chain and step: what a full batch cost before) on the BLR
problem of ``tests/blr_reference.py`` (australian, 690 rows, 15 parameters), DOP at decay 0.99,
one epoch per jitted call as the runner calls it. Interleaved rounds (``timing.interleave``);
milliseconds per step (median) and the ratio paired by round, median [range].

    python benchmarks/full_batch_epochs.py [--chains 16 256] [--rounds 7] [--calls 50]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from timing import environment, fmt_spread, interleave, paired, table  # noqa: E402

import sgrld  # noqa: E402
from sgrld.chains import engine as eng  # noqa: E402
from tests import blr_reference as ref  # noqa: E402


def candidate(sampler, data, params, batch_size: int, chains: int, calls: int):
    """A function running ``calls`` one-step epochs of ``chains`` chains (compiled first)."""
    n = len(data[1])
    engine = eng.Engine(sampler, eng.epochs(n, batch_size), burn_in=0, thin=10)
    stack = jax.tree.map(lambda a: jnp.broadcast_to(a, (chains, *a.shape)), params)
    keys = eng.chain_keys(jax.random.key(0), chains)
    state = {"carry": engine.init(jax.vmap(sampler.init)(stack)), "step": 0}
    state["carry"], _, _ = engine.run_chunk(state["carry"], keys, data, start=0, num_steps=1)

    def run():
        for _ in range(calls):
            state["step"] += 1
            state["carry"], _, _ = engine.run_chunk(
                state["carry"], keys, data, start=state["step"], num_steps=1
            )

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, nargs="+", default=[16, 256])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50, help="one-step epochs per round")
    args = parser.parse_args()
    problem = ref.load_problem(ref.DATA_FILE)
    data = (jnp.asarray(problem.x, jnp.float32), jnp.asarray(problem.y, jnp.float32))
    n = len(problem.y)
    sampler = sgrld.sgrld(
        sgrld.potential(ref.loglik_fn, ref.logprior_fn, n),
        sgrld.metrics.fisher_diag(decay=0.99),
        learning_rate=0.02,
        num_data=n,
    )
    params = ref.as_params(np.load(ref.REFERENCE)["mean"])
    print(environment())
    rows = []
    for chains in args.chains:
        runs = {
            f"{name} ({size} of {n})": candidate(sampler, data, params, size, chains, args.calls)
            for name, size in (("permuted", n - 1), ("full batch", n))
        }
        times = interleave(runs, args.rounds)
        (old, new) = times
        ratio = paired(times[old], times[new])
        for name in runs:
            ms = 1e3 * float(np.median(times[name])) / args.calls
            rows.append([f"{chains} chains, {name}", f"{ms:.2f}", ""])
        rows[-1][2] = fmt_spread(ratio, 2)
    print(table(["candidate", "ms/step", "permuted / full batch"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
