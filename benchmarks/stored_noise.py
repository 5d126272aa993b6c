"""Monge's step with its noise drawn by ``sgrld.noise`` (fused) or ``jax.random.normal`` (stored).

Monge's ``G^{-1/2}ξ = ξ + c·⟨m, ξ⟩·m`` reads ξ twice. With the unrolled hash of
:func:`sgrld.noise.normal`, XLA recomputes the draw for each read (three hashes per leaf in the
compiled step: the ``log1p`` of the inverse error function is stored, the cheap hash is not);
``jax.random.normal`` (a rolled loop on CPU) stores its random bits once but is slower per draw.
This times, interleaved, one SGRLD step (inside a ``lax.scan`` of ``--steps``) on the
784-400-400-10 MLP of ``step_throughput.py`` for Identity and for Monge with either draw (the
sampler's draw is swapped for the second by patching ``sgrld.sampler.normal_like`` while that
variant is traced), and counts the compiled fusions that contain the threefry hash.

    python benchmarks/stored_noise.py [--rounds 9] [--steps 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).parent))
import step_throughput as st  # noqa: E402

import sgrld  # noqa: E402

THREEFRY_PARITY = "466688986"  # 0x1BD11BDA, a constant of every threefry hash


def jax_normal_like(key, tree):
    """``sgrld.noise.normal_like`` with ``jax.random.normal``: the same numbers, drawn by JAX."""
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, len(leaves))
    return treedef.unflatten(
        [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    params = st.init_mlp(jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (100, 784))
    y = jax.random.randint(jax.random.key(2), (100,), 0, 10)
    potential = sgrld.potential(st.loglik, st.logprior, 50_000)
    variants = {
        "Identity": ("identity", sgrld.noise.normal_like),
        "Monge, sgrld.noise": ("monge", sgrld.noise.normal_like),
        "Monge, jax.random.normal": ("monge", jax_normal_like),
    }
    runs = {}
    for name, (metric_name, draw) in variants.items():
        metric = st.make_metric(metric_name)
        sampler = sgrld.sgrld(potential, metric, learning_rate=1e-4, num_data=50_000)

        def scan(state, keys, sampler=sampler):
            step = lambda carry, k: (sampler.step(k, carry, (x, y))[0], None)
            return jax.lax.scan(step, state, keys)[0]

        fn = jax.jit(scan)
        keys = jax.random.split(jax.random.key(3), args.steps)
        state = sampler.init(params)
        sgrld.sampler.normal_like = draw  # read when the step is traced, just below
        try:
            hlo = fn.lower(state, keys).compile().as_text()
            state = fn(state, keys)
        finally:
            sgrld.sampler.normal_like = sgrld.noise.normal_like
        hashes = sum(THREEFRY_PARITY in comp for comp in hlo.split("\n\n"))
        runs[name] = {"fn": fn, "state": jax.block_until_ready(fn(state, keys)), "keys": keys,
                      "ms": [], "hashes": hashes}  # fmt: skip
    for _ in range(args.rounds):
        for run in runs.values():
            start = time.perf_counter()
            run["state"] = jax.block_until_ready(run["fn"](run["state"], run["keys"]))
            run["ms"].append((time.perf_counter() - start) / args.steps * 1e3)
    base = statistics.median(runs["Identity"]["ms"])
    print(f"{jax.default_backend()}, jax {jax.__version__}, median of {args.rounds} rounds")
    for name, run in runs.items():
        ms = statistics.median(run["ms"])
        print(f"  {name:26s} {ms:6.2f} ms/step  {ms / base:5.2f}x Identity  "
              f"fusions with the hash: {run['hashes']}")  # fmt: skip


if __name__ == "__main__":
    main()
