"""XLA's CPU convolution inside a loop body against outside one (jax-ml/jax#12868).

A LeNet-sized CNN (two 5×5 convolutions of 16 and 32 channels with 2×2 max-pooling, a dense
head; batch 100 of 28×28 inputs) takes gradient steps on a sum-of-squares loss, timed in the same
run as (a) a Python loop of jitted steps and (b) one jitted ``lax.scan`` of ``--length`` steps
with ``unroll=--unroll``; prints ms/step of each and their ratio per round.

Usage::

    python benchmarks/conv_in_loop.py --length 5 --unroll 1    # a loop: 12-13x slower (RESULTS §21)
    python benchmarks/conv_in_loop.py --length 5 --unroll 5    # fully unrolled, no loop: 0.8x
    python benchmarks/conv_in_loop.py --length 10 --unroll 5   # a loop left: slow again
"""

from __future__ import annotations

import argparse
import time

import flax.linen as nn
import jax
import jax.numpy as jnp


class LeNet(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.max_pool(nn.relu(nn.Conv(16, (5, 5))(x)), (2, 2), (2, 2))
        x = nn.max_pool(nn.relu(nn.Conv(32, (5, 5))(x)), (2, 2), (2, 2))
        return nn.Dense(10)(x.reshape(x.shape[0], -1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=5, help="steps in the scan")
    parser.add_argument("--unroll", type=int, default=1, help="lax.scan's unroll")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    model, x = LeNet(), jnp.ones((100, 28, 28, 1))
    params = model.init(jax.random.key(0), x)
    loss = lambda p: jnp.sum(model.apply(p, x) ** 2)
    update = lambda p: jax.tree.map(lambda a, g: a - 1e-6 * g, p, jax.grad(loss)(p))
    step = jax.jit(update)
    scan = jax.jit(
        lambda p: jax.lax.scan(
            lambda q, _: (update(q), None), p, None, length=args.length, unroll=args.unroll
        )[0]
    )
    jax.block_until_ready((step(params), scan(params)))
    for _ in range(args.rounds):
        tic = time.perf_counter()
        q = params
        for _ in range(args.length):
            q = step(q)
        jax.block_until_ready(q)
        loop = (time.perf_counter() - tic) / args.length
        tic = time.perf_counter()
        jax.block_until_ready(scan(params))
        scanned = (time.perf_counter() - tic) / args.length
        print(
            f"Python loop {loop * 1e3:.1f} ms/step  scan {scanned * 1e3:.1f} ms/step  "
            f"ratio {scanned / loop:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
