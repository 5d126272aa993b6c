"""Step cost of the Fisher metrics (DOP, QDOP, with and without Γ) / Identity's, per network.

Issues 15 and 51's speed targets: with a categorical likelihood, a Gaussian prior σ² = 0.1,
N = 50,000 and one random minibatch of 100, one chain,

    DOP step ≤ 1.3× Identity's,   QDOP step ≤ 1.5× Identity's,   Γ ≤ 2.5× the uncorrected step,

on the 784-400-400-10 ReLU MLP (478,410 parameters) written in Flax Linen (:class:`sgrld.bnn.MLP`),
as a plain JAX function (:func:`mlp.apply_mlp`), in Equinox and in Flax NNX (the same weights,
through :mod:`sgrld.bnn.adapters`); and the ratios of Li et al.'s MNIST CNN and the CIFAR
ResNet-20 (:data:`MODELS`). Every network's per-example statistics come from the products the
traced log-likelihood finds (:mod:`sgrld.numerics.jaxpr_taps`).

Every step runs ``--chunk`` at a time inside one jitted ``lax.scan`` (:class:`mlp.ScanChain`), the
state carried across chunks; corrected steps use ``correction="hutchinson"`` with
``correction_warmup=0`` (Γ from the first step). "gradient only" (``p ← p − lr·∇Û/N`` in the same
scan: the forward and backward pass and one axpy) measures the share of the Identity step spent
in the network's matrix products.

The floor (MLPs): per example, an Identity step multiplies ``Σ in·out`` MACs forward, as many for
the weight gradients and ``Σ_{l≥2} in·out`` for the input gradients of layers 2–3; DOP adds one
``(a²)ᵀ(δ²)`` per layer (``Σ in·out``) and QDOP two. If matrix products were the whole step, DOP
would cost 1.43× Identity and QDOP 1.85×; with a measured matmul share s of the Identity step the
expected ratio is ``1 + s·(floor − 1)``.

Timing (``timing.py``): R interleaved rounds, the order rotating; ratios are paired per round
(median [min–max] over rounds of this row's time per step / its network's Identity's in the same
round).

Usage::

    python benchmarks/fisher_step.py                  # the Linen MLP, 7 rounds of 100 steps
    python benchmarks/fisher_step.py --quick          # smoke run: 2 rounds of 20 steps
    python benchmarks/fisher_step.py --models jax-mlp eqx-mlp nnx-mlp --metrics fisher_diag \\
        fisher_qdiag --no-gamma --labels model --json f.json

``--json PATH`` writes every row's seconds per round (``benchmarks/gpu/run.py`` reads it);
``--cost`` prints XLA's FLOPs and bytes accessed of one step instead (``cost_analysis()``), a
count that no load on the machine changes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import mlp
from timing import Candidate, environment, fmt_spread, interleave, paired, table

import sgrld
from sgrld import bnn

SIGMA2 = 0.1
"""The prior variance of every parameter (Marceau-Caron & Ollivier's Table 1)."""
LEARNING_RATE = {"identity": 0.1, "gradient": 1e-3}
"""lr = h·N: the ``--quick`` step sizes of ``sgrld reproduce natural-langevin`` (every other
metric: 1e-3). Timing does not depend on them; they keep the chains finite."""
MODEL_LABELS_LR = 1e-5
"""lr of the Fisher metrics with ``--labels model``. On this random-label minibatch (the model's
Fisher is small where the data's gradient is not) DOP's chain at 1e-3 is non-finite from step 10,
QDOP's at 1e-4 from step 575 (:class:`mlp.ScanChain` repeats its chunk's keys); 3e-5 held 800."""
METRICS = ("identity", "rmsprop", "fisher_diag", "fisher_qdiag")
TARGETS = {"fisher_diag": 1.3, "fisher_qdiag": 1.5}
"""The issue's bounds on the uncorrected steps / Identity's."""
GAMMA_TARGET = 2.5
"""The bound on a corrected Fisher step / the same metric's uncorrected step."""
LABELS = {
    "identity": "Identity",
    "rmsprop": "RMSprop",
    "fisher_diag": "DOP",
    "fisher_qdiag": "QDOP",
}


def log_prior(params) -> jax.Array:
    """``log N(θ; 0, σ²I)`` up to a constant, over every parameter."""
    return -0.5 / SIGMA2 * sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(params))


MODELS = ("linen-mlp", "jax-mlp", "eqx-mlp", "nnx-mlp", "linen-cnn", "resnet20")
"""The networks: the 784-400-400-10 MLP as a Flax Linen module (:class:`sgrld.bnn.MLP`), a plain
JAX function (:func:`mlp.apply_mlp`), an Equinox ``eqx.nn.MLP`` and an NNX module (through
:mod:`sgrld.bnn.adapters`), all with the same weights; Li et al.'s MNIST CNN
(:class:`sgrld.bnn.CNN`) and the CIFAR ResNet-20 (:class:`sgrld.bnn.ResNet20`, batch
:data:`RESNET_BATCH`)."""
RESNET_BATCH = 32
"""The ResNet-20's minibatch (a step on a CPU is about 0.1 s at 32)."""


def _mlp_weights():
    """:func:`mlp.problem`'s weights as ``[(kernel [in, out], bias [out])]`` and its minibatch."""
    flat, batch, _ = mlp.problem()
    layers = len(mlp.LAYERS) - 1
    return flat, [(flat[f"w{i}"], flat[f"b{i}"]) for i in range(layers)], batch


def _nnx_mlp(layers):
    from flax import nnx

    class NNXMLP(nnx.Module):
        def __init__(self, rngs):
            widths = list(zip(mlp.LAYERS[:-1], mlp.LAYERS[1:], strict=True))
            self.l0, self.l1, self.l2 = (nnx.Linear(i, o, rngs=rngs) for i, o in widths)

        def __call__(self, x):
            return self.l2(nnx.relu(self.l1(nnx.relu(self.l0(x)))))

    init, apply = bnn.adapters.nnx(NNXMLP(nnx.Rngs(0)))
    net = {f"l{i}": {"kernel": w, "bias": b} for i, (w, b) in enumerate(layers)}
    assert jax.tree.structure(net) == jax.tree.structure(init)
    return net, apply


def _eqx_mlp(layers):
    import equinox as eqx

    model = eqx.nn.MLP(784, 10, 400, 2, activation=jax.nn.relu, key=jax.random.key(0))
    for i, (w, b) in enumerate(layers):
        model = eqx.tree_at(lambda m, i=i: (m.layers[i].weight, m.layers[i].bias), model, (w.T, b))
    return bnn.adapters.equinox(model)


def problem(name: str):
    """``(params, potential, batch)`` of the network ``name`` (:data:`MODELS`): the MLPs on
    :func:`mlp.problem`'s weights and minibatch (biases N(0, 0.1²), not zeros: see there why),
    the CNN and ResNet-20 at their initialisation on random images and labels."""
    flat, layers, batch = _mlp_weights()
    if name == "linen-mlp":
        net = {f"Dense_{i}": {"kernel": w, "bias": b} for i, (w, b) in enumerate(layers)}
        model = bnn.MLP(features=mlp.LAYERS[1:-1], num_outputs=mlp.LAYERS[-1])
        apply = bnn.apply_fn(model)
    elif name == "jax-mlp":
        net, apply = flat, mlp.apply_mlp
    elif name == "eqx-mlp":
        net, apply = _eqx_mlp(layers)
    elif name == "nnx-mlp":
        net, apply = _nnx_mlp(layers)
    else:
        model, shape, size = {
            "linen-cnn": (bnn.CNN(), (28, 28, 1), mlp.BATCH),
            "resnet20": (bnn.ResNet20(), (32, 32, 3), RESNET_BATCH),
        }[name]
        kx, ky = jax.random.split(jax.random.key(1))
        x = jax.random.uniform(kx, (size, *shape), jnp.float32)
        batch = (x, jax.random.randint(ky, (size,), 0, 10, jnp.int32))
        net, apply = bnn.init_params(model, jax.random.key(0), (1, *shape)), bnn.apply_fn(model)
    u = sgrld.potential(bnn.likelihoods.categorical(apply), log_prior, mlp.NUM_DATA)
    return {"net": net}, u, batch


def make_metric(name: str, labels: str):
    """The metric of a row: the Fisher metrics at the paper's settings (ε = 1e-4, γ_t = 1/√t)."""
    if name == "identity":
        return sgrld.metrics.identity()
    if name == "rmsprop":
        return sgrld.metrics.rmsprop()
    fisher = {"fisher_diag": sgrld.metrics.fisher_diag, "fisher_qdiag": sgrld.metrics.fisher_qdiag}
    return fisher[name](labels=labels)


def learning_rate(metric: str, labels: str) -> float:
    """The lr of a metric's chain (:data:`LEARNING_RATE`, :data:`MODEL_LABELS_LR`)."""
    if metric.startswith("fisher") and labels == "model":
        return MODEL_LABELS_LR
    return LEARNING_RATE.get(metric, 1e-3)


def chain_candidate(model, name, corrected, params, potential, batch, args) -> Candidate:
    """One sampler's scanned chain on the network ``model``, with the metric ``name``."""
    extra = {"correction": "hutchinson", "correction_scale": 1.0, "correction_warmup": 0}
    extra = extra if corrected else {}  # the full Γ's step (the share ĉ's: right_by_default/)
    sampler = sgrld.sgrld(
        potential,
        make_metric(name, args.labels),
        learning_rate=learning_rate(name, args.labels),
        num_data=mlp.NUM_DATA,
        **extra,
    )
    with warnings.catch_warnings():  # a leaf off the fast path: FallbackWarning, when traced
        warnings.simplefilter("ignore", sgrld.numerics.per_example.FallbackWarning)
        chain = mlp.ScanChain(sampler, params, batch, args.chunk, warm=args.compile_workers <= 1)
    label = f"{model}: {LABELS[name]}" + (" + Γ (Hutchinson)" if corrected else "")
    return Candidate(
        label,
        chain,
        args.chunk,
        group=(model, name),
        metric=name,
        corrected=corrected,
        finite=lambda: chain.finite,
        compile_s=chain.compile_s,
    )


class GradientOnly:
    """``p ← p − lr·∇Û(p)/N``, ``steps`` per call in one jitted ``lax.scan`` (the state threaded,
    so that XLA cannot hoist the gradient out of the loop)."""

    def __init__(self, params, potential, batch, steps: int):
        lr = LEARNING_RATE["gradient"]

        def scan(p, batch):
            def body(p, _):
                g = jax.grad(potential)(p, batch)
                return jax.tree.map(lambda x, d: x - lr * d, p, g), None

            return jax.lax.scan(body, p, None, length=steps)[0]

        self.fn, self.params, self.batch = jax.jit(scan), params, batch
        self.compile_s = mlp.first_call_s(self)

    def __call__(self):
        self.params = jax.block_until_ready(self.fn(self.params, self.batch))
        return self.params


def candidates(args) -> list[Candidate]:
    """Per network of ``--models``: gradient only, Identity, and the other metrics of
    ``--metrics``, uncorrected and (unless ``--no-gamma``) with Γ."""
    cands = []
    for model in args.models:
        params, potential, batch = problem(model)
        grad = GradientOnly(params, potential, batch, args.chunk)
        cands.append(
            Candidate(
                f"{model}: gradient only",
                grad,
                args.chunk,
                group=(model, "gradient"),
                compile_s=grad.compile_s,
            )
        )
        for name in ("identity", *(m for m in METRICS if m in args.metrics and m != "identity")):
            for corrected in (False, True) if name != "identity" and args.gamma else (False,):
                cand = chain_candidate(model, name, corrected, params, potential, batch, args)
                cands.append(cand)
    if args.compile_workers > 1:  # the chains were made unwarmed: compile them together
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sgrld.numerics.per_example.FallbackWarning)
            chains = [c.run for c in cands if isinstance(c.run, mlp.ScanChain)]
            mlp.prepare(chains, args.compile_workers)
        for c in cands:
            c.compile_s = c.run.compile_s
    return cands


# --------------------------------------------------------------------------------------------------
# The floor and the report


def floor_macs(layers=mlp.LAYERS) -> dict[str, int]:
    """Matrix-multiply MACs per example: an Identity step's, and what DOP and QDOP add.

    Example:
      >>> m = floor_macs((4, 3, 2))
      >>> m["identity"], m["dop"], m["qdop"]  # 12 + 6 forward, as many weight gradients, 6
      (42, 18, 36)
    """
    products = [n_in * n_out for n_in, n_out in zip(layers[:-1], layers[1:], strict=True)]
    dense = sum(products)
    return {"identity": 2 * dense + sum(products[1:]), "dop": dense, "qdop": 2 * dense}


def per_step(c: Candidate) -> list[float]:
    """The seconds per step of each round."""
    return [t / c.steps for t in c.times]


def print_table(cands: list[Candidate]) -> dict[str, float]:
    """One row per candidate; returns the median paired ratios by row name (to its network's
    Identity, and ``name + " / uncorrected"``)."""
    ident = {c.group[0]: c for c in cands if c.group[1] == "identity"}
    plain = {c.group: c for c in cands if not c.corrected}
    ratios, rows = {}, []
    for c in cands:
        to_ident = paired(per_step(c), per_step(ident[c.group[0]]))
        ratios[c.name] = to_ident.median
        to_plain = ""
        if c.corrected:
            s = paired(per_step(c), per_step(plain[c.group]))
            ratios[c.name + " / uncorrected"] = s.median
            to_plain = fmt_spread(s, 2)
        rows.append(
            [
                c.name,
                f"{1e3 * c.step_s:.2f}",
                f"{c.rates.median:.1f}",
                fmt_spread(to_ident, 2),
                to_plain,
                f"{c.compile_s:.1f}",
                "yes" if c.finite() else "NO",
            ]
        )
    head = ["candidate", "ms/step", "steps/s", "/ Identity [range]", "/ uncorrected [range]"]
    print(table([*head, "compile s", "finite"], rows))
    print(
        "ms/step, steps/s: medians over rounds; ratios: median [min-max] over rounds of the ratio "
        "of times per step in the same round, to the same network's Identity; compile s: the "
        "first call (one chunk) including tracing and compilation."
    )
    return ratios


def print_floor(model: str, ratios: dict[str, float]) -> None:
    """An MLP's MAC counts, the pure-matmul ratios and the ratios expected at the measured
    share."""
    macs = floor_macs()
    share = ratios[f"{model}: gradient only"]
    print(
        f"{model}: an Identity step multiplies {macs['identity']:,} MACs per example "
        f"(forward, weight gradients, input gradients of layers 2-3); measured share of the "
        f"network's pass in the Identity step (gradient only / Identity): s = {share:.2f}"
    )
    for key, name, count in (
        ("dop", "fisher_diag", "one product"),
        ("qdop", "fisher_qdiag", "two products"),
    ):
        if f"{model}: {LABELS[name]}" not in ratios:
            continue
        floor = 1 + macs[key] / macs["identity"]
        print(
            f"  {LABELS[name]}: +{macs[key]:,} MACs ({count} of the weights' size per layer): "
            f"{floor:.2f}x if matmuls were all the cost, "
            f"1 + s·{floor - 1:.2f} = {1 + share * (floor - 1):.2f}x at the measured share; "
            f"target {TARGETS[name]}x"
        )


def print_targets(cands: list[Candidate], ratios: dict[str, float]) -> None:
    """The speed targets, each ✓/✗ with the measured median paired ratio."""
    print("Targets (issues 15, 51):")
    for c in cands:
        model, name = c.group
        if name not in TARGETS:
            continue
        if not c.corrected:
            r, limit, what = ratios[c.name], TARGETS[name], "Identity"
        else:
            r, limit = ratios[c.name + " / uncorrected"], GAMMA_TARGET
            what = LABELS[name]
        print(f"  {'✓' if r <= limit else '✗'} {c.name} / {what}: {r:.2f}x (<= {limit}x)")


def print_costs(args) -> None:
    """XLA's count of one step's FLOPs and bytes accessed per chain (a scan of one step,
    compiled), and each one's ratio to its network's Identity: what the step does, whatever the
    load of the machine that times it."""
    args.chunk, args.compile_workers = 1, max(2, args.compile_workers)
    chains = [c for c in candidates(args) if isinstance(c.run, mlp.ScanChain)]
    costs = {}
    for c in chains:
        cost = c.run.fn.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        costs[c.name] = (cost["flops"], cost["bytes accessed"])
    rows = []
    for c in chains:
        flops, nbytes = costs[c.name]
        ident = costs[next(i.name for i in chains if i.group == (c.group[0], "identity"))]
        rows.append(
            [
                c.name,
                f"{flops / 1e6:,.1f}",
                f"{flops / ident[0]:.2f}",
                f"{nbytes / 1e6:,.1f}",
                f"{nbytes / ident[1]:.2f}",
            ]
        )
    head = ["candidate", "MFLOP/step", "/ Identity", "MB accessed/step", "/ Identity"]
    print(table(head, rows))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    parser.add_argument("--chunk", type=int, default=100, help="steps per candidate per round")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 rounds of 20 steps")
    parser.add_argument("--json", type=Path, help="write every row's times per round here (JSON)")
    parser.add_argument(
        "--metrics",
        nargs="+",
        choices=METRICS,
        default=list(METRICS),
        help="the rows' metrics (Identity, the reference, always)",
    )
    parser.add_argument(
        "--models", nargs="+", choices=MODELS, default=["linen-mlp"], help="the networks"
    )
    parser.add_argument(
        "--no-gamma", dest="gamma", action="store_false", help="skip the rows with Γ"
    )
    parser.add_argument(
        "--cost", action="store_true", help="XLA's FLOPs and bytes of one step instead of times"
    )
    parser.add_argument(
        "--compile-workers", type=int, default=1, help="chains compiled at a time (threads)"
    )
    parser.add_argument(
        "--labels",
        choices=sgrld.numerics.per_example.LABELS,
        default="empirical",
        help="the Fisher metrics' labels: the data's (the OP variant) or drawn from the model",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.chunk = 2, 20
    if args.rounds < 1 or args.chunk < 1:
        parser.error("--rounds and --chunk must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    print(environment())
    print(f"backend {jax.default_backend()}, device {jax.devices()[0].device_kind}")
    if args.cost:
        print_costs(args)
        return 0
    print(
        f"models {', '.join(args.models)}; batch {mlp.BATCH} (ResNet-20: {RESNET_BATCH}), "
        f"N {mlp.NUM_DATA:,}, prior N(0, {SIGMA2}), labels {args.labels}; one chain; "
        f"{args.rounds} rounds x {args.chunk} steps per candidate, each chunk one lax.scan"
    )
    t0 = time.perf_counter()
    cands = candidates(args)
    print(f"compile/warm-up of {len(cands)} candidates: {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    times = interleave({c.name: c.run for c in cands}, args.rounds)
    for c in cands:
        c.times = times[c.name]
    print(f"timing: {time.perf_counter() - t0:.1f} s\n")
    ratios = print_table(cands)
    for model in args.models:
        if model.endswith("mlp"):
            print()
            print_floor(model, ratios)
    print()
    print_targets(cands, ratios)
    if args.json:
        keys = ("name", "metric", "corrected", "steps", "times", "compile_s")
        rows = [
            {k: getattr(c, k) for k in keys}
            | {"model": c.group[0], "group": c.group[1], "finite": c.finite()}
            for c in cands
        ]
        args.json.write_text(json.dumps({"candidates": rows}, indent=1))
    bad = [c.name for c in cands if not c.finite()]
    if bad:
        print("NON-FINITE chains:", ", ".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
