"""Per-operation time of one scanned SGRLD step on the benchmark MLP, from JAX's profiler.

Runs ``--steps`` steps of one metric's sampler inside one jitted ``lax.scan`` (the sampling loop of
``sgrld.sample``) under ``jax.profiler.trace`` and prints the operations that took longest, in ms
per step, with the HLO metadata (the JAX operation each came from). XLA's CPU operations are only
traced with ``--xla_cpu_enable_xprof_traceme=true``, which this script adds to ``XLA_FLAGS``.
Event times nest (a conditional includes its branch), so they do not add up to the step time.

    python benchmarks/profile_step.py --metric shampoo [--hutchinson] [--chains C] [--steps 100]

With ``--chains C`` the step is ``vmap``ped over C chains that share the minibatch, as the runner
steps its chains (C = 1 included: the runner always maps over chains).
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_xprof_traceme=true"
).strip()

import argparse  # noqa: E402
import collections  # noqa: E402
import glob  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_throughput import METRICS, NUM_DATA, make_metric, problem  # noqa: E402

import sgrld  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metric", choices=METRICS, default="shampoo")
    parser.add_argument("--hutchinson", action="store_true", help="the Γ-corrected step")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--chains", type=int, default=None, help="vmap over this many chains")
    args = parser.parse_args()

    params, batch, potential = problem()
    sampler = sgrld.sgrld(
        potential,
        make_metric(args.metric, corrected=args.hutchinson),
        learning_rate=1e-5,
        num_data=NUM_DATA,
        correction="hutchinson" if args.hutchinson else None,
    )

    init, step = sampler.init, sampler.step
    if args.chains is not None:
        init = jax.vmap(init)
        params = jax.tree.map(lambda x: jnp.stack([x] * args.chains), params)
        step = lambda key, s, b: jax.vmap(sampler.step, (0, 0, None))(
            jax.random.split(key, args.chains), s, b
        )

    def scan(state, keys):
        return jax.lax.scan(lambda s, k: (step(k, s, batch)[0], None), state, keys)[0]

    fn = jax.jit(scan)
    keys = jax.random.split(jax.random.key(3), args.steps)
    state = jax.block_until_ready(fn(init(params), keys))
    state = jax.block_until_ready(fn(state, keys))  # past the metric's warm-up and first refresh
    with tempfile.TemporaryDirectory() as trace_dir:
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            jax.block_until_ready(fn(state, keys))
        (path,) = glob.glob(os.path.join(trace_dir, "**", "*.trace.json.gz"), recursive=True)
        with gzip.open(path) as f:
            events = json.load(f)["traceEvents"]

    # What each HLO operation computes: its shape and the JAX operation it came from.
    where = {}
    for line in fn.lower(state, keys).compile().as_text().splitlines():
        match = re.match(r"\s*(?:ROOT )?%?([\w.-]+) = (\S+) .*op_name=\"([^\"]+)\"", line)
        if match:
            name, shape, op = match.groups()
            where[name] = f"{shape} {op.replace('jit(scan)/while/body/closed_call/', '')}"
    total, count = collections.Counter(), collections.Counter()
    for event in events:
        if event.get("ph") != "X":
            continue
        name = event["name"]
        total[name] += event["dur"]
        count[name] += 1
    step_ms = total["ThunkExecutor::Execute (wait for completion)"] / 1e3 / args.steps
    label = args.metric + (" + Hutchinson" if args.hutchinson else "")
    label += "" if args.chains is None else f", vmapped over {args.chains} chain(s)"
    print(f"{label}: {args.steps} steps in one lax.scan, {step_ms:.2f} ms/step under the profiler")
    print(f"{jax.default_backend()}, jax {jax.__version__}")
    shown = 0
    for name, us in total.most_common():
        if count[name] != args.steps:  # per-step operations only (not the runtime's own events)
            continue
        print(f"  {us / 1e3 / args.steps:7.3f} ms/step  {name:32s} {where.get(name, '')[:100]}")
        shown += 1
        if shown == args.top:
            break


if __name__ == "__main__":
    main()
