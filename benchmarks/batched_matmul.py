"""How fast XLA runs Shampoo's blocked products, against one product of the same flops.

Shampoo applies a different matrix to every block of a weight: for the 784×400 first layer of the
benchmark MLP at block size 128 that is a batch of 28 products ``[112, 112] @ [112, 100]``. This
script times, side by side in one run (each inside one jitted ``lax.scan`` of ``--steps`` calls,
interleaved over ``--rounds`` rounds; medians), that batched product, the same flops with one
shared matrix (``[3136, 112] @ [112, 100]``), and one large product ``[784, 784] @ [784, 400]``,
and prints GFLOP/s. Run it under different ``XLA_FLAGS`` to compare XLA's CPU code paths.

    python benchmarks/batched_matmul.py [--rounds 9] [--steps 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp

CASES = {
    "batched: 28 x [112,112] @ [112,100]": ((28, 112, 112), (28, 112, 100)),
    "shared: [3136,112] @ [112,100]": ((3136, 112), (112, 100)),
    "large: [784,784] @ [784,400]": ((784, 784), (784, 400)),
}


def flops(a_shape, b_shape) -> int:
    """Multiply-adds times two of ``a @ b``."""
    batch = a_shape[0] if len(a_shape) == 3 else 1
    return 2 * batch * a_shape[-2] * a_shape[-1] * b_shape[-1]


def in_scan(steps: int):
    """``steps`` products inside one jitted scan; the left operand changes at every step."""

    def run(a, b):
        def body(carry, t):
            return carry + (a * (1.0 + 1e-3 * t)) @ b, None

        out = jax.eval_shape(jnp.matmul, a, b)
        zeros = jnp.zeros(out.shape, out.dtype)
        return jax.lax.scan(body, zeros, jnp.arange(steps, dtype=jnp.float32))[0]

    return jax.jit(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    key = jax.random.key(0)
    runs = {}
    for name, (a_shape, b_shape) in CASES.items():
        a = jax.random.normal(jax.random.fold_in(key, 0), a_shape)
        b = jax.random.normal(jax.random.fold_in(key, 1), b_shape)
        fn = in_scan(args.steps)
        jax.block_until_ready(fn(a, b))
        runs[name] = (fn, a, b, [])
    for _ in range(args.rounds):
        for fn, a, b, times in runs.values():
            start = time.perf_counter()
            jax.block_until_ready(fn(a, b))
            times.append((time.perf_counter() - start) / args.steps)
    flags = os.environ.get("XLA_FLAGS", "")
    print(f"{jax.default_backend()}, jax {jax.__version__}, XLA_FLAGS={flags!r}")
    for name, (a_shape, b_shape) in CASES.items():
        t = statistics.median(runs[name][3])
        rate = flops(a_shape, b_shape) / t / 1e9
        print(f"  {name:38s} {t * 1e3:7.3f} ms  {rate:6.1f} GFLOP/s")


if __name__ == "__main__":
    main()
