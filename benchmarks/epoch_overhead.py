"""What the runner's epoch adds to the sampler's own steps, on the MNIST MLP (1 chain).

Three jitted functions sample one epoch (500 steps of batch 100) from the same state, timed in
interleaved rounds:

* ``bare``: a ``lax.scan`` of ``vmap(sampler.step)`` over one shuffle's minibatches, nothing else;
* ``runner``: the runner's epoch scan (``sgrld.runner``'s sampling function: per-chain shuffles,
  divergence bookkeeping, the thinned-sample buffer), as :func:`sgrld.runner.run` runs it;
* ``runner, freeze``: the same with a diverged chain's last finite state kept at every step (a
  select over the whole state), which the runner runs only for an epoch in which a chain diverged.

Reported: the median over rounds of each function's time and of its ratio to ``bare`` in the same
round. Needs MNIST in ``--data-dir``.

    python benchmarks/epoch_overhead.py --data-dir ../shared/data/mnist [--rounds 12]
        [--metric identity]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp

try:
    from sgrld import runner
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from sgrld import runner
from sgrld.experiments import mnist_mlp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="folder holding the MNIST IDX files")
    parser.add_argument("--rounds", type=int, default=12, help="interleaved rounds")
    parser.add_argument(
        "--metric", default="identity", choices=mnist_mlp.METRICS, help="the sampler's metric"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    print(f"command: {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"jax {jax.__version__}, {jax.default_backend()}, os.cpu_count() {os.cpu_count()}")

    with tempfile.TemporaryDirectory() as tmp:
        config = mnist_mlp.config(
            "horseshoe", 400, args.metric, Path(tmp), epochs=1, data_dir=args.data_dir
        )
    experiment = runner.build_experiment(config)
    schedule = dataclasses.replace(runner.schedule_of(config), burn_in=0)
    x, y = (jnp.asarray(a) for a in experiment.train)
    steps, b = x.shape[0] // schedule.batch_size, schedule.batch_size
    data = {"x": x, "y": y, "eval": {}}
    params = jax.vmap(experiment.init_fn)(jax.random.split(jax.random.key(0), 1))
    state = jax.vmap(experiment.sampler.init)(params)
    carry = runner.Carry(
        state=state,
        ensembles={},
        samples=jnp.zeros((1,), jnp.int32),
        curvature_sum=jnp.zeros((1,), jnp.float32),
        diverged_step=jnp.full((1,), -1, jnp.int32),
        diverged_leaf=jnp.full((1,), -1, jnp.int32),
    )
    chain_keys = jax.random.split(jax.random.key(1), 1)
    chain_step = jax.vmap(experiment.sampler.step)

    @jax.jit
    def bare(state, key):
        order = jax.random.permutation(key, x.shape[0])[: steps * b].reshape(steps, 1, b)
        keys = jax.random.split(key, steps)[:, None]

        def body(state, inputs):
            idx, k = inputs
            state, info = chain_step(k, state, (x[idx], y[idx]))
            return state, info.potential

        return jax.lax.scan(body, state, (order, keys))

    epoch = {
        freeze: jax.jit(runner._sample_function(experiment, schedule, steps, freeze=freeze))
        for freeze in (False, True)
    }
    candidates = {
        "bare": lambda r: bare(state, jax.random.key(r)),
        "runner": lambda r: epoch[False](carry, jnp.int32(r), chain_keys, data),
        "runner, freeze": lambda r: epoch[True](carry, jnp.int32(r), chain_keys, data),
    }
    for fn in candidates.values():  # compile
        jax.block_until_ready(fn(0))
    seconds = {name: [] for name in candidates}
    names = list(candidates)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            jax.block_until_ready(candidates[name](r))
            seconds[name].append(time.perf_counter() - start)
    print(f"MNIST MLP 784-400-400-10, {args.metric}, 1 chain, {steps} steps; {args.rounds} rounds")
    for name, times in seconds.items():
        ratio = statistics.median(a / b for a, b in zip(times, seconds["bare"], strict=True))
        print(f"  {name:15s} {statistics.median(times):6.3f} s/epoch  {ratio:5.3f}x bare")
    return 0


if __name__ == "__main__":
    sys.exit(main())
