"""What drawing the SGLD noise costs: JAX's random number generators on the MLP's 478,410 normals.

Every SGLD step draws one standard normal per parameter. This times, interleaved in one run, the
parts of ``jax.random.normal`` with the default threefry key (the random bits, the uniforms, the
normals, and ``erf_inv`` alone, which maps uniforms to normals), and the normals with the ``rbg``
and ``unsafe_rbg`` keys, against ``sgrld.noise.normal`` (the same numbers with the hash unrolled).
Median over rounds of ``--calls`` jitted calls each.

    python benchmarks/noise_draw.py [--rounds 7] [--calls 50]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax

import sgrld

SIZE = 478_410  # parameters of the 784-400-400-10 MLP of step_throughput.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()

    threefry = jax.random.key(0)
    uniforms = jax.random.uniform(threefry, (SIZE,), minval=-0.99, maxval=0.99)
    normal = jax.jit(lambda k: jax.random.normal(k, (SIZE,)))
    cands = {
        "threefry: random bits": (jax.jit(lambda k: jax.random.bits(k, (SIZE,))), threefry),
        "threefry: uniforms": (jax.jit(lambda k: jax.random.uniform(k, (SIZE,))), threefry),
        "threefry: normals": (normal, threefry),
        "sgrld.noise.normal": (jax.jit(lambda k: sgrld.noise.normal(k, (SIZE,))), threefry),
        "erf_inv of uniforms alone": (jax.jit(jax.lax.erf_inv), uniforms),
        "rbg: normals": (normal, jax.random.key(0, impl="rbg")),
        "unsafe_rbg: normals": (normal, jax.random.key(0, impl="unsafe_rbg")),
    }
    for fn, arg in cands.values():
        jax.block_until_ready(fn(arg))
    times = {name: [] for name in cands}
    for _ in range(args.rounds):
        for name, (fn, arg) in cands.items():
            start = time.perf_counter()
            for _ in range(args.calls):
                out = fn(arg)
            jax.block_until_ready(out)
            times[name].append((time.perf_counter() - start) / args.calls * 1e3)
    print(f"{SIZE:,} draws, {jax.default_backend()}, jax {jax.__version__}")
    for name, t in times.items():
        print(f"  {name:28s} {statistics.median(t):8.2f} ms")


if __name__ == "__main__":
    main()
