"""What Shampoo's periodic root refresh costs per step, branch included (step_throughput MLP).

Four steps timed interleaved inside one ``lax.scan`` of ``--steps`` each: Identity; Shampoo
refreshing every 100 updates (the benchmark's setting); Shampoo whose refresh branch is present
but never taken (``update_every`` beyond the run); Shampoo with no refresh branch at all (the same
statistic update, roots never recomputed). The last two differ by the cost of the branch and its
cache copies; the first two by the amortised refresh.

    python benchmarks/shampoo_refresh_cost.py [--rounds 7] [--steps 100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).parent))
import step_throughput as st  # noqa: E402

import sgrld  # noqa: E402

DECAY = 0.99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    params, batch, potential = st.problem()
    every = sgrld.metrics.shampoo(decay=DECAY, eps=1e-8, update_every=100, block_size=128)

    def update_without_refresh(state, grads):
        stat = jax.tree.map(
            lambda s, n: DECAY * s + (1 - DECAY) * n, state.stat, every.statistic(grads)
        )
        return state._replace(count=state.count + 1, stat=stat)

    metrics = {
        "Identity": sgrld.metrics.identity(),
        "Shampoo, refresh every 100": every,
        "Shampoo, branch never taken": sgrld.metrics.shampoo(
            decay=DECAY, eps=1e-8, update_every=10**8, block_size=128
        ),
        "Shampoo, no refresh branch": every._replace(update=update_without_refresh),
    }
    samplers = {
        name: sgrld.sgrld(potential, metric, learning_rate=1e-5, num_data=st.NUM_DATA)
        for name, metric in metrics.items()
    }
    ms = st.median_scan_ms(samplers, params, batch, args.rounds, args.steps)
    print(f"{jax.default_backend()}, jax {jax.__version__}, median of {args.rounds} rounds")
    for name, value in ms.items():
        print(f"  {name:28s} {value:6.2f} ms/step  {value / ms['Identity']:5.2f}x Identity")


if __name__ == "__main__":
    main()
