"""What tracing and lowering a step costs with the noise's draws jitted or traced inline.

:mod:`sgrld.numerics.noise` jits its unrolled hash, each leaf's draw and each tree's draw, so a
program traces them once per size and reuses them. This lowers (``jax.jit(...).lower``: tracing
and MLIR, no XLA compile) a vmapped SGRLD step of a 64-32-32-10 MLP, 4 chains, with the library's
jitted draws and with the same functions un-jitted (``__wrapped__``: traced at every call, as
before), alternating the two in each round; each round builds a new sampler, so only the draws'
own caches carry over. Printed: median seconds per lowering and the ratio paired by round.

    python benchmarks/trace_time.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import jax
import jax.numpy as jnp
from timing import environment

import sgrld
from sgrld.numerics import noise

METRICS = {
    "identity": (sgrld.metrics.identity, "none"),
    "rmsprop": (sgrld.metrics.rmsprop, "none"),
    "monge + Γ": (sgrld.metrics.monge, "hutchinson"),
    "shampoo + Γ": (sgrld.metrics.shampoo, "hutchinson"),
}


@contextlib.contextmanager
def inline_draws():
    """The noise module's jitted functions replaced by their un-jitted bodies."""
    names = ("_bits", "_normal", "_draw")
    saved = {name: getattr(noise, name) for name in names}
    for name in names:
        setattr(noise, name, saved[name].__wrapped__)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(noise, name, fn)


def lower_seconds(metric_name: str) -> float:
    """Seconds to lower a fresh vmapped step of the MLP with ``metric_name``."""
    make_metric, correction = METRICS[metric_name]
    x = jax.random.normal(jax.random.key(0), (100, 64))
    y = jax.random.randint(jax.random.key(1), (100,), 0, 10)
    model = sgrld.bnn.MLP(features=(32, 32))
    params = sgrld.bnn.init_params(model, jax.random.key(2), (1, 64))

    def loglik(p, batch):
        logits = model.apply({"params": p}, batch[0])
        return jnp.take_along_axis(jax.nn.log_softmax(logits), batch[1][:, None], 1)[:, 0]

    logprior = lambda p: -0.5 * sum(jnp.sum(v**2) for v in jax.tree.leaves(p))
    potential = sgrld.potential(loglik, logprior, 1000)
    sampler = sgrld.sgrld(
        potential, make_metric(), learning_rate=1e-3, num_data=1000, correction=correction
    )
    states = jax.vmap(sampler.init)(jax.tree.map(lambda a: jnp.stack([a] * 4), params))
    keys = jax.random.split(jax.random.key(3), 4)
    step = jax.jit(jax.vmap(sampler.step, in_axes=(0, 0, None)))
    start = time.perf_counter()
    step.lower(keys, states, (x, y))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(environment())
    print("| step | jitted draws, s | inline draws, s | jitted / inline [range] |")
    print("|---|---|---|---|")
    for name in METRICS:
        jitted, inline = [], []
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            for use_jit in order:
                if use_jit:
                    jitted.append(lower_seconds(name))
                else:
                    with inline_draws():
                        inline.append(lower_seconds(name))
        ratios = sorted(a / b for a, b in zip(jitted, inline, strict=True))
        print(
            f"| {name} | {statistics.median(jitted):.3f} | {statistics.median(inline):.3f} | "
            f"{statistics.median(ratios):.2f} [{ratios[0]:.2f}–{ratios[-1]:.2f}] |"
        )


if __name__ == "__main__":
    main()
