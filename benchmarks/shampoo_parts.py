"""Where a Shampoo step's time goes, on the gradient tree of the 784-400-400-10 MLP.

Times, side by side in one run, the parts of a Shampoo step the sampler adds to a plain SGLD step:
the statistic update (the Kronecker factors and their moving average), the drift G⁻¹g, the noise
G^{-1/2}ξ, one root refresh (eigendecompositions of every factor), and, for scale, the draw of the
normals that every sampler needs. Median over rounds of ``--calls`` calls each.

    python benchmarks/shampoo_parts.py [--block-size 128] [--rounds 7] [--calls 20] [--scan]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax

import sgrld

SHAPES = {
    "w1": (784, 400),
    "b1": (400,),
    "w2": (400, 400),
    "b2": (400,),
    "w3": (400, 10),
    "b3": (10,),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument(
        "--scan", action="store_true", help="time the calls inside one lax.scan, as sampling does"
    )
    args = parser.parse_args()

    key = jax.random.key(0)
    params = {
        name: 0.05 * jax.random.normal(jax.random.fold_in(key, i), shape)
        for i, (name, shape) in enumerate(SHAPES.items())
    }
    grads = jax.tree.map(lambda x: 1.1 * x, params)
    lazy = sgrld.metrics.shampoo(update_every=2**30, block_size=args.block_size)
    eager = sgrld.metrics.shampoo(update_every=1, block_size=args.block_size)
    state = jax.jit(eager.update)(lazy.init(params), grads)
    parts = {
        "statistic + EMA": jax.jit(lazy.update),
        "drift G^-1 g": jax.jit(lazy.inv),
        "noise G^-1/2 xi": jax.jit(lazy.inv_sqrt),
        "root refresh (all factors)": jax.jit(eager.update),
        "normals for all parameters": jax.jit(
            lambda s, g: jax.tree.map(lambda x: jax.random.normal(key, x.shape), g)
        ),
    }
    if args.scan:
        parts = {name: in_scan(fn, args.calls) for name, fn in parts.items()}
    for fn in parts.values():
        jax.block_until_ready(fn(state, grads))
    times = {name: [] for name in parts}
    for _ in range(args.rounds):
        for name, fn in parts.items():
            start = time.perf_counter()
            for _ in range(1 if args.scan else args.calls):
                out = fn(state, grads)
            jax.block_until_ready(out)
            times[name].append((time.perf_counter() - start) / args.calls * 1e3)
    how = f"{args.calls} calls in one lax.scan" if args.scan else "one jitted call each"
    print(f"block_size={args.block_size}, {how}, {jax.default_backend()}, jax {jax.__version__}")
    for name, t in times.items():
        print(f"  {name:28s} {statistics.median(t):8.2f} ms")
    print("  (the refresh includes one statistic update; it runs once every update_every steps)")


def in_scan(fn, calls):
    """``calls`` calls of ``fn`` inside one jitted ``lax.scan``, as the sampler runs them.

    The gradient changes at every iteration (so XLA cannot hoist the work out of the loop), and
    the carry is the metric state (for ``update``) or a tree of zeros the output is added to.
    """

    def run(state, grads):
        def body(carry, t):
            g = jax.tree.map(lambda x: x * (1.0 + 1e-3 * t), grads)
            out = fn(carry[0], g)
            if isinstance(out, type(state)):
                return (out, carry[1]), None
            return (carry[0], jax.tree.map(lambda a, b: a + b, carry[1], out)), None

        zeros = jax.tree.map(jax.numpy.zeros_like, grads)
        return jax.lax.scan(body, (state, zeros), jax.numpy.arange(calls, dtype=float))[0]

    return jax.jit(run)


if __name__ == "__main__":
    main()
