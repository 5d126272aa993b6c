"""Monge's step with its noise drawn by ``sgrld.noise`` (fused) or ``jax.random.normal`` (stored).

Monge's ``G^{-1/2}ξ = ξ + c·⟨m, ξ⟩·m`` reads ξ twice. With the unrolled hash of
:func:`sgrld.noise.normal`, XLA recomputes the draw for each read (three hashes per leaf in the
compiled step: the ``log1p`` of the inverse error function is stored, the cheap hash is not);
``jax.random.normal`` (a rolled loop on CPU) stores its random bits once but is slower per draw.
This times, interleaved, one SGRLD step (inside a ``lax.scan`` of ``--steps``) on the
784-400-400-10 MLP of ``step_throughput.py`` for Identity and for Monge with either draw (the
sampler's draw is swapped for the second by patching ``sgrld.sampler.normal_like`` while that
variant's step is traced), and counts the compiled step's fusions that contain the threefry hash.

    python benchmarks/stored_noise.py [--rounds 9] [--steps 100]
"""

from __future__ import annotations

import argparse
import sys
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


def with_jax_draw(sampler: sgrld.Sampler) -> sgrld.Sampler:
    """``sampler`` whose step, when traced, draws its noise with :func:`jax_normal_like`."""

    def step(key, state, batch):
        sgrld.sampler.normal_like = jax_normal_like
        try:
            return sampler.step(key, state, batch)
        finally:
            sgrld.sampler.normal_like = sgrld.noise.normal_like

    return sampler._replace(step=step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    params, batch, potential = st.problem()
    make = lambda name: sgrld.sgrld(potential, st.make_metric(name), 1e-4, st.NUM_DATA)
    samplers = {
        "Identity": make("identity"),
        "Monge, sgrld.noise": make("monge"),
        "Monge, jax.random.normal": with_jax_draw(make("monge")),
    }
    ms = st.median_scan_ms(samplers, params, batch, args.rounds, args.steps)
    print(f"{jax.default_backend()}, jax {jax.__version__}, median of {args.rounds} rounds")
    for name, sampler in samplers.items():
        hlo = jax.jit(sampler.step).lower(jax.random.key(0), sampler.init(params), batch)
        hashes = sum(THREEFRY_PARITY in comp for comp in hlo.compile().as_text().split("\n\n"))
        print(f"  {name:26s} {ms[name]:6.2f} ms/step  {ms[name] / ms['Identity']:5.2f}x Identity  "
              f"fusions with the hash: {hashes}")  # fmt: skip


if __name__ == "__main__":
    main()
