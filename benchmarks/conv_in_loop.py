"""XLA's CPU convolution inside a loop body (jax-ml/jax#12868), and sgrld's im2col convolution.

XLA's CPU backend runs a convolution, above all its backward pass, many times slower inside a loop
body (``lax.scan``, ``while``) than at the top level of a jitted function; sgrld's runner runs each
epoch as one ``lax.scan``. ``sgrld.bnn.convolutions.CONVOLUTIONS`` offers ``conv="im2col"`` (strided
slices and one matrix product, :func:`sgrld.bnn.convolutions.im2col_conv`), the default (``"auto"``)
on a CPU. Two measurements:

**epoch** (the default): sgrld's Identity SGLD (``sgrld.sgrld``, Gaussian prior, N = 50,000) on
Li et al.'s MNIST CNN (``sgrld.bnn.CNN``: 5x5 convolutions of 32 and 64 channels, dense 200-200;
batch 100) and on ResNet-20 (``sgrld.bnn.ResNet20``, batch ``--resnet-batch``), ``--steps`` steps
per call inside one jitted ``lax.scan`` as the runner samples an epoch, with ``conv="xla"`` and
``conv="im2col"``; for scale, the ``"xla"`` step called step by step from Python. R interleaved
rounds, the order rotating (``timing.py``); per model, ms/step and each candidate's ratio to
``xla`` in the scan, paired per round.

**issue** (``--issue``): the bare issue on a LeNet-sized Flax CNN (two 5x5 convolutions of 16
and 32 channels with 2x2 max-pooling, a dense head; batch 100): gradient steps of a
sum-of-squares loss, timed in the same run as (a) a Python loop of jitted steps and (b) one
jitted ``lax.scan`` of ``--length`` steps with ``unroll=--unroll``; prints ms/step of each and
their ratio per round. ``--conv im2col`` runs the same with sgrld's im2col convolution.

Usage::

    python benchmarks/conv_in_loop.py                       # epoch: 3 rounds of 5 (CNN), 2 steps
    python benchmarks/conv_in_loop.py --quick               # smoke run: 2 rounds of 1 step
    python benchmarks/conv_in_loop.py --issue --length 5 --unroll 1    # 12-13x (RESULTS §21)
    python benchmarks/conv_in_loop.py --issue --length 5 --unroll 5    # fully unrolled: 0.8x
    python benchmarks/conv_in_loop.py --issue --length 10 --unroll 5   # a loop left: slow again
    python benchmarks/conv_in_loop.py --issue --conv im2col            # im2col in a loop
"""

from __future__ import annotations

import argparse
import sys
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import mlp
from timing import Candidate, environment, fmt_spread, interleave, paired, table

import sgrld
from sgrld import bnn
from sgrld.bnn.convolutions import conv_layer

NUM_DATA = 50_000
LR = 1e-3
"""lr = h·N (timing does not depend on it)."""


class LeNet(nn.Module):
    conv: str = "xla"

    @nn.compact
    def __call__(self, x):
        x = nn.max_pool(nn.relu(conv_layer(16, (5, 5), conv=self.conv)(x)), (2, 2), (2, 2))
        x = nn.max_pool(nn.relu(conv_layer(32, (5, 5), conv=self.conv)(x)), (2, 2), (2, 2))
        return nn.Dense(10)(x.reshape(x.shape[0], -1))


def issue(args: argparse.Namespace) -> int:
    """The bare jax-ml/jax#12868 measurement (``--issue``): Python loop against ``lax.scan``."""
    model, x = LeNet(args.conv), jnp.ones((100, 28, 28, 1))
    params = model.init(jax.random.key(0), x)
    loss = lambda p: jnp.sum(model.apply(p, x) ** 2)
    update = lambda p: jax.tree.map(lambda a, g: a - 1e-6 * g, p, jax.grad(loss)(p))
    step = jax.jit(update)
    scan = jax.jit(
        lambda p: jax.lax.scan(
            lambda q, _: (update(q), None), p, None, length=args.length, unroll=args.unroll
        )[0]
    )
    jax.block_until_ready((step(params), scan(params)))
    for _ in range(args.rounds):
        tic = time.perf_counter()
        q = params
        for _ in range(args.length):
            q = step(q)
        jax.block_until_ready(q)
        loop = (time.perf_counter() - tic) / args.length
        tic = time.perf_counter()
        jax.block_until_ready(scan(params))
        scanned = (time.perf_counter() - tic) / args.length
        print(
            f"conv={args.conv}: Python loop {loop * 1e3:.1f} ms/step  scan {scanned * 1e3:.1f} "
            f"ms/step  ratio {scanned / loop:.1f}",
            flush=True,
        )
    return 0


def candidates(name: str, build, image_shape, batch_size: int, steps: int) -> list[Candidate]:
    """SGLD on ``build(conv)`` with each convolution, in a scan, and the ``xla`` step in a loop."""
    k_param, k_x, k_y = jax.random.split(jax.random.key(0), 3)
    net = bnn.init_params(build("xla"), k_param, (1, *image_shape))
    x = jax.random.normal(k_x, (batch_size, *image_shape), jnp.float32)
    batch = (x, jax.random.randint(k_y, (batch_size,), 0, 10, jnp.int32))
    prior = bnn.priors.gaussian()
    params = {"net": net, "prior": prior.init(net)}
    out = []
    for conv in ("xla", "im2col"):
        loglik = bnn.likelihoods.categorical(bnn.apply_fn(build(conv)))
        potential = sgrld.potential(loglik, bnn.logprior_fn(prior), NUM_DATA)
        sampler = sgrld.sgrld(
            potential, sgrld.metrics.identity(), learning_rate=LR, num_data=NUM_DATA
        )
        chain = mlp.ScanChain(sampler, params, batch, steps)
        out.append(
            Candidate(
                f"{name} {conv} [scan]",
                chain,
                steps,
                group=name,
                finite=lambda chain=chain: chain.finite,
                compile_s=chain.compile_s,
            )
        )
        if conv == "xla":
            step = jax.jit(sampler.step)
            looped = mlp.looped(
                f"{name} xla [loop]",
                lambda k, s, b, step=step: step(k, s, b)[0],
                sampler.init(params),
                batch,
                steps,
            )
            looped.group = name
            out.append(looped)
    return out


def epoch(args: argparse.Namespace) -> int:
    """SGLD epochs in ``lax.scan`` with XLA's and the im2col convolution (the default mode)."""
    print(
        f"backend {jax.default_backend()}; Identity SGLD, N = {NUM_DATA:,}, one chain; "
        f"{args.rounds} rounds; CNN: batch 100, {args.steps} steps a call; ResNet-20: batch "
        f"{args.resnet_batch}, {args.resnet_steps} steps a call"
    )
    t0 = time.perf_counter()
    cands = [
        *candidates("CNN", lambda conv: bnn.CNN(conv=conv), (28, 28, 1), 100, args.steps),
        *candidates(
            "ResNet-20",
            lambda conv: bnn.ResNet20(conv=conv),
            (32, 32, 3),
            args.resnet_batch,
            args.resnet_steps,
        ),
    ]
    print(f"compile/warm-up of {len(cands)} candidates: {time.perf_counter() - t0:.1f} s")
    times = interleave({c.name: c.run for c in cands}, args.rounds)
    rows = []
    for c in cands:
        c.times = times[c.name]
        ref = next(r for r in cands if r.name == f"{c.group} xla [scan]")
        ratio = paired([t / c.steps for t in c.times], [t / ref.steps for t in times[ref.name]])
        rows.append(
            [
                c.name,
                f"{1e3 * c.step_s:.1f}",
                f"{c.compile_s:.1f}",
                fmt_spread(ratio, 3),
                str(c.finite()),
            ]
        )
    print(table(["candidate", "ms/step", "first call s", "/ xla [scan] [range]", "finite"], rows))
    return 0 if all(c.finite() for c in cands) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issue", action="store_true", help="the bare issue (see the docstring)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--steps", type=int, default=5, help="epoch: CNN steps per scan")
    parser.add_argument("--resnet-steps", type=int, default=2, help="epoch: ResNet steps per scan")
    parser.add_argument("--resnet-batch", type=int, default=32, help="epoch: ResNet minibatch")
    parser.add_argument("--quick", action="store_true", help="epoch smoke run: 2 rounds of 1 step")
    parser.add_argument("--length", type=int, default=5, help="issue: steps in the scan")
    parser.add_argument("--unroll", type=int, default=1, help="issue: lax.scan's unroll")
    parser.add_argument("--conv", choices=("xla", "im2col"), default="xla", help="issue: conv")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.steps, args.resnet_steps = 2, 1, 1
    if min(args.rounds, args.steps, args.resnet_steps, args.resnet_batch, args.length) < 1:
        parser.error("--rounds, --steps, --resnet-steps, --resnet-batch, --length must be >= 1")
    print(environment())
    return issue(args) if args.issue else epoch(args)


if __name__ == "__main__":
    sys.exit(main())
