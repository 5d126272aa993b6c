"""The compiled cost and the output of one step of every sampler the library offers, to show that
a refactoring changes no compiled program (issue 52: "cost_analysis of every compiled step is
equal, before and after").

Every sampler/metric combination (SGRLD with Identity, RMSprop, Wenzel, Monge, Shampoo, DOP, QDOP
and the full Fisher, each with and without ``correction="hutchinson"``; exact Γ, ĉ, the momentum
integrator; SGHMC with four metrics and with its noise estimates; SGNHT; i-SGD in its three
settings; Adam-SGLD; SGD, vSGD, SWAG and MC dropout) on a 3-8-1 regression MLP: the step is
compiled (``jax.jit(step).lower(...).compile().cost_analysis()``: flops, bytes accessed), then run
four times from fixed keys; the record holds the costs, the final state's leaves, its tree and
the last ``info``. Two records are equal, field by field, when the refactoring changed nothing::

    python benchmarks/step_costs.py /tmp/before.json            # at the old commit
    python benchmarks/step_costs.py /tmp/after.json --compare /tmp/before.json
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import sgrld
from sgrld.bnn import MLP, init_params, likelihoods
from sgrld.bnn.dropout import DropoutMLP, dropout_loss, mc_dropout
from sgrld.samplers import baselines

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers import METRICS as TEST_METRICS  # noqa: E402

N, LR = 64, 0.01
METRICS = {  # the tests' small metrics, and the Fisher metrics
    **TEST_METRICS,
    "fisher_diag": lambda: sgrld.metrics.fisher_diag(decay=0.9),
    "fisher_qdiag": lambda: sgrld.metrics.fisher_qdiag(decay=0.9),
    "fisher_full": lambda: sgrld.metrics.fisher_full(decay=0.9),
}


def problem():
    """The potential, the initial parameters and a batch of 16 of the 64 examples."""
    x = jax.random.normal(jax.random.key(0), (N, 3))
    y = jnp.sin(x[:, 0]) + 0.1 * jax.random.normal(jax.random.key(1), (N,))
    model = MLP((8,), 1)
    logprior = lambda p: -0.5 * sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(p))
    apply = lambda p, xb: model.apply({"params": p}, xb)
    u = sgrld.potential(likelihoods.gaussian(apply, 0.5), logprior, num_data=N)
    return u, {"net": init_params(model, jax.random.key(2), (1, 3))}, (x[:16], y[:16])


def factories(u) -> dict:
    """Every sampler, by name, as a function that builds it."""
    out = {}
    for m in METRICS:
        for c in ("none", "hutchinson"):
            out[f"sgrld-{m}-{c}"] = lambda m=m, c=c: sgrld.sgrld(
                u, METRICS[m](), learning_rate=LR, num_data=N, correction=c
            )
    rms = METRICS["rmsprop"]
    out["sgrld-rmsprop-exact"] = lambda: sgrld.sgrld(
        u, rms(), learning_rate=LR, num_data=N, correction="exact"
    )
    out["sgrld-rmsprop-auto-share"] = lambda: sgrld.sgrld(
        u, rms(), learning_rate=LR, num_data=N, correction="hutchinson", correction_scale="auto"
    )
    out["sgrld-assembled-momentum"] = lambda: sgrld.riemannian_langevin(
        u,
        sgrld.metrics.rmsprop(eps=1.0),
        learning_rate=LR,
        num_data=N,
        correction=sgrld.parts.correction.hutchinson(warmup=0),
        integrator=sgrld.parts.integrators.momentum(0.2),
    )
    sghmc = lambda **kw: lambda: sgrld.sghmc(u, learning_rate=LR, num_data=N, friction=0.2, **kw)
    for m in ("identity", "rmsprop", "monge", "fisher_diag"):
        for c in ("none", "hutchinson"):
            out[f"sghmc-{m}-{c}"] = lambda m=m, c=c: sghmc(metric=METRICS[m](), correction=c)()
    out["sghmc-noise"] = sghmc(gradient_noise="per_example")
    out["sghmc-noise-float"] = sghmc(gradient_noise=0.01)
    out["sgnht"] = lambda: sgrld.sgnht(u, learning_rate=LR, num_data=N)
    out["isgd"] = lambda: sgrld.isgd(u, learning_rate=LR, num_data=N)
    out["isgd-rule"] = lambda: sgrld.isgd(u, learning_rate=None, warmup=3, num_data=N)
    out["isgd-square"] = lambda: sgrld.isgd(
        u, learning_rate=LR, num_data=N, gradient_noise="square"
    )
    out["adam_sgld"] = lambda: sgrld.adam_sgld(u, learning_rate=LR, num_data=N)
    out["sgd"] = lambda: baselines.sgd(u, LR)
    out["sgd-momentum"] = lambda: baselines.sgd(u, LR, momentum=0.9)
    out["vsgd"] = lambda: baselines.vsgd(u, LR)
    out["swag"] = lambda: baselines.swag(u, LR, train_steps=4, swa_start=1, collect_every=1, rank=2)
    dropout = DropoutMLP(features=(8,), num_outputs=1, rate=0.1)
    loss = dropout_loss(
        lambda apply: sgrld.potential(likelihoods.gaussian(apply, 1.0), None, num_data=N), dropout
    )
    out["mc_dropout"] = lambda: mc_dropout(loss, 0.05, train_steps=2, rate=0.1)
    return out


def record(sampler, params, batch) -> dict:
    """The compiled step's costs, and the state and ``info`` after four steps."""
    state = sampler.init(params)
    step = jax.jit(sampler.step)
    costs = step.lower(jax.random.key(3), state, batch).compile().cost_analysis()
    costs = costs[0] if isinstance(costs, list) else costs
    for i in range(4):
        state, info = step(jax.random.key(10 + i), state, batch)
    return {
        "flops": costs.get("flops"),
        "bytes": costs.get("bytes accessed"),
        "state": [np.asarray(x, np.float64).ravel().tolist() for x in jax.tree.leaves(state)],
        "state_tree": str(jax.tree.structure(state)),
        "info": {k: np.asarray(v, np.float64).tolist() for k, v in info._asdict().items()},
        "info_fields": list(type(info)._fields),
    }


def compare(before: dict, after: dict) -> list[str]:
    """The fields in which two records differ, one line each."""
    lines = [f"{name}: missing" for name in before if name not in after]
    for name in (n for n in before if n in after):
        diff = [k for k in before[name] if before[name][k] != after[name].get(k)]
        lines += [f"{name}: {k} differs" for k in diff]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the JSON file to write")
    parser.add_argument("--compare", help="a JSON file of an earlier run to compare with")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the fallback's and i-SGD's clipping warnings
    u, params, batch = problem()
    records = {}
    for name, build in factories(u).items():
        records[name] = record(build(), params, batch)
        print(name, records[name]["flops"], records[name]["bytes"], flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(records, f, indent=0, sort_keys=True)
    if args.compare:
        with open(args.compare, encoding="utf-8") as f:
            lines = compare(json.load(f), records)
        print("\n".join(lines) or f"{len(records)} steps: costs, states and info all equal")


if __name__ == "__main__":
    main()
