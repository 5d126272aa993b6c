"""Shampoo's FLOP floor on this machine: one SGRLD step's FLOPs from the shapes, against its time.

The step is ``sgrld.sgrld`` with ``sgrld.metrics.shampoo`` (block 128, update_every 100,
uncorrected) on the 784-400-400-10 MLP of ``mlp.py`` (batch 100), run 100 steps at a time in one
jitted ``lax.scan`` (:class:`mlp.ScanChain`, how ``sgrld.sample`` and the runner sample), so each
timed call holds exactly one root refresh. Its FLOPs, counted from the shapes
(:func:`mlp_products`, :func:`shampoo_products`, :func:`refresh_flops`; ``2·m·k·n`` per
product):

* **forward + backward**: 3 forward products, 3 weight gradients, 2 input gradients;
* **statistics** ``H_i += G_(i) G_(i)ᵀ``, one per Kronecker factor of every block (for a weight's
  ``G`` of ``b_0 × b_1``: ``L += G Gᵀ`` and ``R += Gᵀ G``), ``2·P·b_i`` each for a leaf of
  ``P`` (padded) entries;
* **preconditioning**: ``G⁻¹ g`` and ``G^{-1/2} ξ``, one product per factor each, ``2·P·b_i``;
* **root refresh**, amortised over ``update_every``: per block and factor an eigendecomposition,
  counted as the textbook ``9·b³`` of the symmetric QR algorithm with eigenvectors (Golub & Van
  Loan, Sec. 8.3; XLA's cost analysis counts LAPACK's ``syevd`` as almost nothing), and the two
  powers ``Q diag(λ^p) Qᵀ``, ``2·b³`` each.

The counts are cross-checked with XLA's own ``cost_analysis()['flops']``: of each product function
(equal), of ``value_and_grad`` (the products plus the elementwise work) and of the whole step
against the Identity step (XLA counts the refresh branch of the ``lax.cond`` at every step).

The machine's rates are measured in the same run, interleaved with the step (``timing.py``): one
large GEMM ``[1024,1024]@[1024,1024]`` and ``[784,784]@[784,400]``, and each product of the step at
its own shape (run ``reps`` times in a ``lax.fori_loop``, each iteration depending on the last).
Also timed: the same Shampoo step with roots never refreshed (``update_every`` 2³⁰: the same
products on identity roots), and the Identity step. Printed:

* the FLOPs per step, by part;
* **floor at peak**: FLOPs / the fastest rate measured (what a step would take if every FLOP ran
  at large-GEMM speed);
* **floor at shapes**: the sum over the step's products of their time alone at their own shape,
  plus the refresh (eigendecompositions and powers alone) / update_every;
* the measured steps and the ratios measured / floor, with and without the refresh; the Identity
  step less its products at their shapes is the step's elementwise work (the noise, the update),
  and the last ratio is the step without refresh against its products at their shapes plus that
  work: what XLA adds beyond both.

Everything is compiled and timed inside :func:`sgrld.chains.engine.single_threaded_blas`, as the
runner
samples: the refresh's eigendecompositions call LAPACK (OpenBLAS), whose own threads, beside
XLA's, made a batch of 28 decompositions of 112×112 5-30× slower (0.16-1.1 s against 0.035 s,
jaxlib 0.10.2, 2 cores, load 7) and the refresh about 24× slower in this script (4.9 s against
0.21 s per refresh).

Usage::

    python benchmarks/shampoo_floor.py             # 7 rounds, 100 steps per round
    python benchmarks/shampoo_floor.py --quick     # smoke run: 1 round
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mlp
from timing import Candidate, environment, interleave, spread, table

import sgrld
from sgrld.chains.engine import single_threaded_blas
from sgrld.metrics.blocks import block_plan, mode_gram, mode_product
from sgrld.numerics.linalg import power_from_eigh, ridged_eighs

BLOCK = 128
EIGH_FLOPS = 9
"""FLOPs of a symmetric eigendecomposition with eigenvectors, per ``n³`` (Golub & Van Loan)."""
TARGET = 1.25
"""Issue 17's acceptance: the step within 1.25× of its own FLOP floor on CPU."""
SHAMPOO = "Shampoo step [scan]"
NO_REFRESH = "Shampoo step, no refresh [scan]"
IDENTITY = "Identity step [scan]"
REFRESH = "root refresh (eigh + 2 powers)"


class Product(NamedTuple):
    """One matrix product of the step: ``fn(*operands)``, ``count`` times per step."""

    name: str
    part: str
    count: int
    flops: int
    fn: Callable[..., jax.Array]
    operands: tuple[jax.Array, ...]


def mlp_products(layers: tuple[int, ...], batch: int) -> list[Product]:
    """The forward and backward products of a dense MLP on a batch.

    Example:
      >>> sum(p.count * p.flops for p in mlp_products((784, 400, 400, 10), 100)) / 1e6
      223.84
    """
    out = []
    for i, (n_in, n_out) in enumerate(zip(layers[:-1], layers[1:], strict=True)):
        x, w, d = jnp.ones((batch, n_in)), jnp.ones((n_in, n_out)), jnp.ones((batch, n_out))
        flops = 2 * batch * n_in * n_out
        einsum = lambda spec: lambda a, b: jnp.einsum(spec, a, b)
        out.append(
            Product(f"layer {i} forward", "forward+backward", 1, flops, einsum("bi,io->bo"), (x, w))
        )
        out.append(
            Product(f"layer {i} dW", "forward+backward", 1, flops, einsum("bi,bo->io"), (x, d))
        )
        if i > 0:  # the input's gradient is not needed
            out.append(
                Product(f"layer {i} dx", "forward+backward", 1, flops, einsum("bo,io->bi"), (d, w))
            )
    return out


def _gram(a: jax.Array, *, i: int, k: int) -> jax.Array:
    return mode_gram(a, a, i, k)


def _product(a: jax.Array, m: jax.Array, *, i: int, k: int) -> jax.Array:
    return mode_product(a, m, i, k)


def shampoo_products(params: Any, block_size: int) -> list[Product]:
    """The blocked products of a Shampoo step: statistics, ``G⁻¹ g`` and ``G^{-1/2} ξ``.

    Leaf by leaf as :mod:`sgrld.metrics.shampoo` cuts it (:func:`sgrld.metrics.blocks.block_plan`):
    per factor i, one :func:`~sgrld.metrics.blocks.mode_gram` (the statistic) and two
    :func:`~sgrld.metrics.blocks.mode_product` (the two roots), ``2·P·b_i`` FLOPs each (the
    statistic of a vector is an outer product: ``P·b``).

    Example:
      >>> params = {"w": jnp.ones((400, 784))}
      >>> [(p.part, p.count, p.flops) for p in shampoo_products(params, 128)][:2]
      [('statistics', 1, 62720000), ('preconditioning', 2, 62720000)]
    """
    out = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        name = jax.tree_util.keystr(path, simple=True, separator="/")
        plan = block_plan(leaf.shape, block_size)
        k = plan.order
        blocks = jnp.ones((*plan.num_blocks, *plan.block))
        padded = blocks.size
        for i, b in enumerate(plan.block):
            mat = jnp.ones((*plan.num_blocks, b, b))
            flops = 2 * padded * b
            # The statistic contracts over the other dimensions: none for a vector (an outer
            # product, one multiplication per entry).
            gram_flops = flops if k > 1 else flops // 2
            gram = partial(_gram, i=i, k=k)
            prod = partial(_product, i=i, k=k)
            shape = "x".join(map(str, blocks.shape))
            out.append(
                Product(f"{name} [{shape}] stat {i}", "statistics", 1, gram_flops, gram, (blocks,))
            )
            out.append(
                Product(
                    f"{name} [{shape}] root {i}", "preconditioning", 2, flops, prod, (blocks, mat)
                )
            )
    return out


def refresh_matrices(params: Any, block_size: int) -> list[jax.Array]:
    """One batch of symmetric positive definite blocks ``[*num_blocks, b, b]`` per factor."""
    mats = []
    for leaf in jax.tree.leaves(params):
        plan = block_plan(leaf.shape, block_size)
        for b in plan.block:
            a = jax.random.normal(jax.random.key(b), (*plan.num_blocks, b, b))
            mats.append(a @ jnp.swapaxes(a, -1, -2) / b + jnp.eye(b))
    return mats


def refresh_flops(mats: list[jax.Array]) -> tuple[int, int]:
    """FLOPs of one refresh: (eigendecompositions at ``9·b³``, the two powers at ``2·b³`` each).

    Example:
      >>> refresh_flops([jnp.ones((4, 10, 10))])
      (36000, 16000)
    """
    cubes = sum(math.prod(m.shape[:-2]) * m.shape[-1] ** 3 for m in mats)
    return EIGH_FLOPS * cubes, 2 * 2 * cubes


def refresh(mats: list[jax.Array], order: list[int]) -> list[jax.Array]:
    """The root refresh as Shampoo does it: the decompositions one after the other, two powers each.

    ``order[j]`` is the number k of factors of matrix j's leaf.
    """
    out = []
    for (q, lam, _), k in zip(ridged_eighs(mats, 1e-8), order, strict=True):
        out += [power_from_eigh(q, lam, -1.0 / (2 * k)), power_from_eigh(q, lam, -1.0 / (4 * k))]
    return out


def xla_flops(fn: Callable, *args) -> float:
    """XLA's cost analysis of ``jax.jit(fn)``: its FLOPs."""
    cost = jax.jit(fn).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["flops"])


def repeated(fn: Callable, operands: tuple[jax.Array, ...], reps: int) -> Callable[[], Any]:
    """``fn(*operands)`` ``reps`` times in one jitted ``fori_loop``, blocking.

    Each iteration adds ``1e-30·Σ out`` to the first operand, so that no product is hoisted out of
    the loop or skipped (the sum costs one pass over the output: ``1/k`` of a product with inner
    dimension k).
    """

    def body(_, ops):
        out = fn(*ops)
        return (ops[0] + 1e-30 * jnp.sum(out), *ops[1:])

    looped = jax.jit(lambda ops: jax.lax.fori_loop(0, reps, body, ops))
    held = {"ops": operands}

    def run():
        held["ops"] = jax.block_until_ready(looped(held["ops"]))

    return run


def reps_for(flops: int, target: float) -> int:
    """Repetitions that make a call about ``target`` FLOPs."""
    return max(1, round(target / flops))


# --------------------------------------------------------------------------------------------------


class Setup(NamedTuple):
    """What is timed: the candidates, and per product its candidate and repetitions."""

    candidates: list[Candidate]
    products: list[Product]
    reps: dict[str, int]
    refresh_flops: tuple[int, int]


def step_candidate(name: str, sampler, params, batch, chunk: int) -> Candidate:
    """``chunk`` steps of ``sampler`` per call in one jitted ``lax.scan``."""
    chain = mlp.ScanChain(sampler, params, batch, chunk)
    finite = lambda: chain.finite
    return Candidate(name, chain, chunk, "step", finite=finite, compile_s=chain.compile_s)


def setup(args, params, batch, potential) -> Setup:
    """Compile every candidate: the steps, the large GEMMs, every product, the refresh."""
    never = sgrld.sgrld(
        potential,
        sgrld.metrics.shampoo(eps=1e-8, update_every=2**30, block_size=BLOCK),
        learning_rate=mlp.LEARNING_RATE["shampoo"],
        num_data=mlp.NUM_DATA,
    )
    cands = [
        step_candidate(SHAMPOO, mlp.make_sampler(potential, "shampoo"), params, batch, args.chunk),
        step_candidate(NO_REFRESH, never, params, batch, args.chunk),
        step_candidate(
            IDENTITY, mlp.make_sampler(potential, "identity"), params, batch, args.chunk
        ),
    ]
    products = mlp_products(mlp.LAYERS, mlp.BATCH) + shampoo_products(params, BLOCK)
    gemms = [
        Product(
            f"GEMM {m}x{k} @ {k}x{n}",
            "peak",
            1,
            2 * m * k * n,
            jnp.matmul,
            (jnp.ones((m, k)), jnp.ones((k, n))),
        )
        for m, k, n in ((1024, 1024, 1024), (784, 784, 400))
    ]
    reps = {}
    for p in gemms + products:
        reps[p.name] = reps_for(p.flops, args.call_flops)
        run = repeated(p.fn, p.operands, reps[p.name])
        c = Candidate(p.name, run, reps[p.name], p.part)
        c.compile_s = mlp.first_call_s(run)
        cands.append(c)
    mats = refresh_matrices(params, BLOCK)
    order = [
        len(block_plan(x.shape, BLOCK).block)
        for x in jax.tree.leaves(params)
        for _ in block_plan(x.shape, BLOCK).block
    ]
    fn = jax.jit(lambda m: refresh(m, order))
    run_refresh = lambda: jax.block_until_ready(fn(mats))
    c = Candidate(REFRESH, run_refresh, 1, "refresh")
    c.compile_s = mlp.first_call_s(run_refresh)
    cands.append(c)
    return Setup(cands, gemms + products, reps, refresh_flops(mats))


def cross_check(params, batch, potential) -> list[list[str]]:
    """Rows: the analytic count beside XLA's cost analysis."""
    key = jax.random.key(0)
    fwd = mlp_products(mlp.LAYERS, mlp.BATCH)
    blocked = shampoo_products(params, BLOCK)
    mats = refresh_matrices(params, BLOCK)
    _, powers = refresh_flops(mats)
    analytic = lambda ps: sum(p.count * p.flops for p in ps)
    xla_products = lambda ps: sum(p.count * xla_flops(p.fn, *p.operands) for p in ps)
    args = (params, batch)
    shampoo, identity = (
        xla_flops(s.step, key, s.init(params), batch)
        for s in (mlp.make_sampler(potential, m) for m in ("shampoo", "identity"))
    )
    rows = [
        ("forward+backward products", analytic(fwd), xla_products(fwd)),
        ("value_and_grad (1)", analytic(fwd), xla_flops(jax.value_and_grad(potential), *args)),
        ("Shampoo's blocked products", analytic(blocked), xla_products(blocked)),
        ("Shampoo step - Identity step (2)", analytic(blocked) + powers, shampoo - identity),
    ]
    return [[n, f"{a / 1e6:.1f}", f"{x / 1e6:.1f}", f"{x / a:.3f}"] for n, a, x in rows]


CROSS_CHECK_NOTES = (
    "(1) XLA adds the elementwise work (ReLU, softmax, ...). (2) analytic: the blocked products "
    "and the refresh's powers, unamortised, since XLA counts the refresh branch of the lax.cond at "
    "every step; XLA adds the elementwise work of the metric (EMA, ridge, ...) and counts the "
    "eigendecompositions (LAPACK calls) as almost nothing."
)


def report(s: Setup) -> int:
    """Print the products' rates, the FLOP count, both floors and the measured steps."""
    by = {c.name: c for c in s.candidates}
    per_call = lambda name: spread(by[name].times).median
    rate = {p.name: p.flops * s.reps[p.name] / per_call(p.name) for p in s.products}
    peak = max(rate.values())
    rows = [
        [
            p.name,
            p.part,
            str(p.count),
            f"{p.flops / 1e6:.2f}",
            f"{rate[p.name] / 1e9:.1f}",
            f"{1e3 * p.count * p.flops / rate[p.name]:.3f}" if p.part != "peak" else "",
        ]
        for p in s.products
    ]
    print(table(["product", "part", "per step", "MFLOP", "GFLOP/s", "ms/step"], rows))
    print(
        "GFLOP/s: median over rounds of the product alone at its shape; ms/step: count x its "
        "time alone.\n"
    )

    in_step = [p for p in s.products if p.part != "peak"]
    eigh, powers = s.refresh_flops
    parts: dict[str, float] = {}
    for p in in_step:
        parts[p.part] = parts.get(p.part, 0.0) + p.count * p.flops
    products_flops = sum(parts.values())
    parts[f"root refresh / {mlp.SHAMPOO_EVERY}"] = (eigh + powers) / mlp.SHAMPOO_EVERY
    total = sum(parts.values())
    alone = lambda ps: sum(p.count * p.flops / rate[p.name] for p in ps)
    refresh_s = per_call(REFRESH) / mlp.SHAMPOO_EVERY
    products_at_shapes = alone(in_step)
    fwd_at_shapes = alone(p for p in in_step if p.part == "forward+backward")
    shampoo, never, identity = by[SHAMPOO], by[NO_REFRESH], by[IDENTITY]
    elementwise = identity.step_s - fwd_at_shapes  # the noise, the update: Shampoo's too
    for name, flops in parts.items():
        print(f"{name:>34}: {flops / 1e6:8.1f} MFLOP")
    print(
        f"{'total per step':>34}: {total / 1e6:8.1f} MFLOP (refresh: eigh {eigh / 1e6:.0f} + "
        f"powers {powers / 1e6:.0f} MFLOP every {mlp.SHAMPOO_EVERY} steps)"
    )
    print(f"{'peak GEMM rate':>34}: {peak / 1e9:8.1f} GFLOP/s (the fastest product above)\n")
    lines = [
        ("floor at peak", total / peak),
        ("floor at the step's shapes", products_at_shapes + refresh_s),
        ("  of which the refresh alone", refresh_s),
        (SHAMPOO, shampoo.step_s),
        (NO_REFRESH, never.step_s),
        ("  floor at peak", products_flops / peak),
        ("  floor at the step's shapes", products_at_shapes),
        (IDENTITY, identity.step_s),
        ("  less its products at their shapes", elementwise),
    ]
    for name, seconds in lines:
        print(f"{name:>34}: {1e3 * seconds:8.2f} ms")
    ratios = [
        ("Shampoo / floor at peak", shampoo, total / peak),
        ("Shampoo / floor at shapes", shampoo, products_at_shapes + refresh_s),
        ("no refresh / its floor at peak", never, products_flops / peak),
        ("no refresh / its floor at shapes", never, products_at_shapes),
        ("no refresh / (shapes + elementwise)", never, products_at_shapes + elementwise),
    ]
    print()
    for name, c, floor in ratios:
        r = spread(t / c.steps / floor for t in c.times)
        print(f"{name:>34}: {c.step_s / floor:.2f}x [{r.low:.2f}-{r.high:.2f} over rounds]")
    ratio = shampoo.step_s / (total / peak)
    verdict = "PASS" if ratio <= TARGET else "MISS"
    print(
        f"\n  [{verdict}] Shampoo step / its FLOP floor at peak: {ratio:.2f}x (target <= {TARGET}x)"
    )
    if not all(c.finite() for c in (shampoo, never, identity)):
        print("NON-FINITE chain: the timings are not of a working step")
        return 1
    return 0


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--rounds", type=int, default=7, help="interleaved timing rounds")
    add("--chunk", type=int, default=100, help="steps per round (a multiple of update_every)")
    add("--call-flops", type=float, default=2e8, help="FLOPs per timed call of a product")
    add("--quick", action="store_true", help="smoke run: 1 round, calls of 2e7 FLOPs")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.call_flops = 1, 2e7
    if args.rounds < 1 or args.chunk < 1 or args.chunk % mlp.SHAMPOO_EVERY:
        parser.error(f"--rounds must be >= 1, --chunk a multiple of {mlp.SHAMPOO_EVERY}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(environment())
    params, batch, potential = mlp.problem()
    print(
        f"Shampoo SGRLD on the 784-400-400-10 MLP ({mlp.NUM_PARAMS:,} params), batch "
        f"{mlp.BATCH}, block {BLOCK}, update_every {mlp.SHAMPOO_EVERY}; {args.rounds} rounds; "
        "BLAS on one thread (sgrld.chains.engine.single_threaded_blas, as the runner)\n"
    )
    print("FLOPs, analytic against XLA's cost analysis (MFLOP):")
    head = ["count", "analytic", "XLA", "XLA/analytic"]
    print(table(head, cross_check(params, batch, potential)))
    print(CROSS_CHECK_NOTES + "\n")
    with single_threaded_blas():
        return measure(args, params, batch, potential)


def measure(args, params, batch, potential) -> int:
    """Compile the candidates, time them in interleaved rounds, print the report."""
    t0 = time.perf_counter()
    s = setup(args, params, batch, potential)
    print(f"compile/warm-up of {len(s.candidates)} candidates: {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    times = interleave({c.name: c.run for c in s.candidates}, args.rounds)
    for c in s.candidates:
        c.times = times[c.name]
    print(f"timing: {time.perf_counter() - t0:.1f} s\n")
    return report(s)


if __name__ == "__main__":
    sys.exit(main())
