"""SGRLD steps with the noise ξ kept in memory (``sgrld.noise.normal_like``) or recomputed per read.

``sgrld.noise.normal_like`` makes XLA write the draw to memory once (the draw is the result of a
``lax.cond``). Without that, XLA fuses the cheap unrolled hash of :func:`sgrld.noise.normal` into
every reader of ξ and recomputes it there: Monge's ``G^{-1/2}ξ = ξ + c·⟨m, ξ⟩·m`` reads ξ twice.
``jax.random.normal`` (a rolled loop on CPU, stored once, slower per draw) is the third variant.
This times, interleaved, one SGRLD step (inside a ``lax.scan`` of ``--steps``) on the
784-400-400-10 MLP of ``step_throughput.py`` for Identity and Monge with each draw (the sampler's
draw is swapped by patching ``sgrld.sampler.normal_like`` while that variant's step is traced),
and counts the compiled step's computations that contain the threefry hash.

    python benchmarks/stored_noise.py [--rounds 9] [--steps 100] [--chains C]

With ``--chains C`` every step is ``vmap``ped over C chains, as the runner does (C = 1 included).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).parent))
import step_throughput as st  # noqa: E402

import sgrld  # noqa: E402

THREEFRY_PARITY = "466688986"  # 0x1BD11BDA, a constant of every threefry hash


def per_leaf(normal):
    """A ``normal_like`` that draws each leaf with ``normal(key, shape, dtype)`` and no cond."""

    def normal_like(key, tree):
        leaves, treedef = jax.tree.flatten(tree)
        keys = jax.random.split(key, len(leaves))
        return treedef.unflatten(
            [normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)]
        )

    return normal_like


DRAWS = {
    "kept (sgrld.noise.normal_like)": sgrld.noise.normal_like,
    "recomputed (unrolled hash)": per_leaf(sgrld.noise.normal),
    "jax.random.normal": per_leaf(jax.random.normal),
}


def with_draw(sampler: sgrld.Sampler, draw) -> sgrld.Sampler:
    """``sampler`` whose step, when traced, draws its noise with ``draw``."""

    def step(key, state, batch):
        sgrld.sampler.normal_like = draw
        try:
            return sampler.step(key, state, batch)
        finally:
            sgrld.sampler.normal_like = sgrld.noise.normal_like

    return sampler._replace(step=step)


def over_chains(sampler: sgrld.Sampler, chains: int) -> sgrld.Sampler:
    """``sampler`` on ``chains`` vmapped chains that share the minibatch, as in the runner."""

    def init(params):
        return jax.vmap(sampler.init)(jax.tree.map(lambda x: jnp.stack([x] * chains), params))

    def step(key, state, batch):
        return jax.vmap(sampler.step, (0, 0, None))(jax.random.split(key, chains), state, batch)

    return sgrld.Sampler(init, step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--chains", type=int, default=None, help="vmap over this many chains")
    args = parser.parse_args()
    chain = (lambda s: s) if args.chains is None else (lambda s: over_chains(s, args.chains))

    params, batch, potential = st.problem()
    samplers = {
        f"{metric:8s} {label}": chain(
            with_draw(sgrld.sgrld(potential, st.make_metric(metric), 1e-4, st.NUM_DATA), draw)
        )
        for metric in ("identity", "monge")
        for label, draw in DRAWS.items()
    }
    ms = st.median_scan_ms(samplers, params, batch, args.rounds, args.steps)
    base = ms[next(iter(samplers))]
    where = f"{jax.default_backend()}, jax {jax.__version__}, median of {args.rounds} rounds"
    print(where + ("" if args.chains is None else f", vmapped over {args.chains} chain(s)"))
    for name, sampler in samplers.items():
        hlo = jax.jit(sampler.step).lower(jax.random.key(0), sampler.init(params), batch)
        hashes = sum(THREEFRY_PARITY in comp for comp in hlo.compile().as_text().split("\n\n"))
        print(f"  {name:42s} {ms[name]:6.2f} ms/step  {ms[name] / base:5.2f}x the first row  "
              f"computations with the hash: {hashes}")  # fmt: skip


if __name__ == "__main__":
    main()
