"""Does Shampoo with the Γ correction stay finite on the MLP? One chain per eps, same data.

Runs ``sgrld.sgrld(..., shampoo(eps=...), correction="hutchinson")`` on the 784-400-400-10 MLP and
random MNIST-shaped batch of ``step_throughput.py`` (lr 1e-5, update_every 100) for ``--steps``
steps and prints, per eps, the first step whose parameters or gradient were not finite. Γ starts
after the metric's warm-up of ⌈3/(1 − decay)⌉ = 300 updates.

    python benchmarks/shampoo_gamma_eps.py [--steps 600] [--eps 1e-8 1e-6 1e-4 1e-2]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_throughput as mlp  # noqa: E402

import sgrld  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--eps", type=float, nargs="+", default=[1e-8, 1e-6, 1e-4, 1e-2])
    args = parser.parse_args()

    key = jax.random.key(0)
    params = mlp.init_mlp(key)
    x = jax.random.uniform(jax.random.key(1), (mlp.BATCH, mlp.LAYERS[0]))
    y = jax.random.randint(jax.random.key(2), (mlp.BATCH,), 0, mlp.LAYERS[-1])
    potential = sgrld.potential(mlp.loglik, mlp.logprior, mlp.NUM_DATA)
    for eps in args.eps:
        metric = sgrld.metrics.shampoo(eps=eps, update_every=100, block_size=128)
        sampler = sgrld.sgrld(potential, metric, 1e-5, mlp.NUM_DATA, correction="hutchinson")
        step = jax.jit(sampler.step)
        state, first_bad = sampler.init(params), None
        for t in range(args.steps):
            state, info = step(jax.random.fold_in(key, t), state, (x, y))
            if not bool(info.is_finite):
                first_bad = t
                break
        verdict = f"non-finite at step {first_bad}" if first_bad is not None else "finite"
        print(f"eps={eps:g}: {verdict} ({args.steps} steps, warm-up {metric.warmup})", flush=True)


if __name__ == "__main__":
    main()
