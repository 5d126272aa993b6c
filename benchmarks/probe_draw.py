"""What the Γ correction's Rademacher probes cost: ``jax.random`` against ``sgrld.noise``.

Each Γ-corrected step draws one Rademacher probe per parameter (:func:`sgrld.correction.
rademacher_like`). ``jax.random.rademacher`` hashes with JAX's rolled threefry loop on CPU;
:func:`sgrld.noise.rademacher` draws the same signs with the hash unrolled, fused into one pass.
This times, interleaved in one run, the draw of the MLP's 478,410 signs alone and the corrected
step (inside a ``lax.scan`` of ``--steps``, the Python-free loop of ``sgrld.sample``) of each
``--metrics`` with either draw (patched into ``sgrld.correction`` while that step is traced), on
the benchmark MLP of ``step_throughput.py``. Median over ``--rounds``.

    python benchmarks/probe_draw.py [--rounds 9] [--steps 100] [--metrics rmsprop wenzel monge]
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
from sgrld import correction  # noqa: E402

DRAWS = {
    "jax.random.rademacher": jax.random.rademacher,
    "sgrld.noise.rademacher": sgrld.noise.rademacher,
}


def with_draw(sampler: sgrld.Sampler, draw) -> sgrld.Sampler:
    """``sampler`` whose step, when traced, draws its probes with ``draw``."""

    def step(key, state, batch):
        correction.rademacher = draw
        try:
            return sampler.step(key, state, batch)
        finally:
            correction.rademacher = sgrld.noise.rademacher

    return sampler._replace(step=step)


def draw_ms(rounds: int, calls: int) -> dict[str, float]:
    """Median ms per draw of the MLP's signs, each draw jitted, interleaved."""
    key = jax.random.key(0)
    fns = {name: jax.jit(lambda k, d=d: d(k, (st.NUM_PARAMS,))) for name, d in DRAWS.items()}
    times = {name: [] for name in fns}
    for fn in fns.values():
        jax.block_until_ready(fn(key))
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                out = fn(key)
            jax.block_until_ready(out)
            times[name].append((time.perf_counter() - start) / calls * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--metrics", nargs="+", default=["rmsprop", "wenzel", "monge"])
    args = parser.parse_args()

    print(f"{jax.default_backend()}, jax {jax.__version__}, median of {args.rounds} rounds")
    for name, ms in draw_ms(args.rounds, 50).items():
        print(f"  {st.NUM_PARAMS:,} signs, {name:24s} {ms:6.3f} ms")
    params, batch, potential = st.problem()
    samplers = {
        f"{metric:8s} + Hutchinson, probes by {name}": with_draw(
            sgrld.sgrld(
                potential,
                st.make_metric(metric, corrected=True),
                1e-4,
                st.NUM_DATA,
                correction="hutchinson",
                correction_warmup=0,
            ),
            draw,
        )
        for metric in args.metrics
        for name, draw in DRAWS.items()
    }
    ms = st.median_scan_ms(samplers, params, batch, args.rounds, args.steps)
    names = list(samplers)
    for old, new in zip(names[::2], names[1::2], strict=True):
        print(f"  {old:62s} {ms[old]:6.2f} ms/step")
        print(f"  {new:62s} {ms[new]:6.2f} ms/step  {ms[new] / ms[old]:5.2f}x the row above")


if __name__ == "__main__":
    main()
