"""What the engine's per-step loop body does beyond the step: fusions and reductions of the
compiled chunk's step loop against the same step in a bare ``jax.lax.scan``, on the CPU.

For each sampler (Identity, RMSprop, Monge, Shampoo, DOP = ``fisher_diag``, SGHMC), without and
with Γ (``correction="hutchinson"``, ``correction_scale=1``; SGHMC's Γ in an RMSprop metric, the
Identity metric's Γ being zero), an MLP (``--layers``, default 784-400-400-10, Flax Dense layers)
with an N(0, 1) prior and minibatches of ``--batch`` rows drawn with replacement from random data:

* **engine**: :class:`sgrld.chains.engine.Engine`'s compiled chunk of ``--steps`` steps with
  ``thin = --thin`` and burn-in 0, as ``sgrld.sample`` and the runner compile it;
* **bare scan**: the step alone in a ``jax.lax.scan`` over steps, each step's key
  ``fold_in(chain_key, t)`` split into a data key and a step key, its ``info`` discarded.

Nothing runs: each program is compiled and its optimised HLO read (:func:`step_loop`). The step
loop is the ``while`` whose body holds the most fusions of its own (the scan over steps; in
the engine, the loop of bare steps inside a block). Counted in its body: fusions, and ``reduce`` ops
inside them or beside them. ``--engine PATH`` compiles the engine of another version, e.g.
``git show REV:sgrld/chains/engine.py > /tmp/engine.py``.

Usage::

    python benchmarks/loop_body.py                              # the table of RESULTS
    python benchmarks/loop_body.py --engine /tmp/engine.py      # an older engine
    python benchmarks/loop_body.py --layers 20 16 16 3 --samplers identity
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import time
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import sgrld
from sgrld.chains import engine

SAMPLERS = ("identity", "rmsprop", "monge", "shampoo", "dop", "sghmc")
COMPUTATION = re.compile(r"^(?:ENTRY )?%?(\S+) [^\n]*\{\s*$", re.M)
WHILE = re.compile(r"\bwhile\([^\n]*?\bbody=%?([\w.\-]+)")
FUSION = re.compile(r"= \S+ fusion\([^\n]*?calls=%?([\w.\-]+)")
REDUCE = re.compile(r"= \S+ reduce\(")


def computations(hlo: str) -> dict[str, str]:
    """The computations of an HLO module's text, by name: their bodies."""
    starts = [(m.group(1), m.end()) for m in COMPUTATION.finditer(hlo)]
    out = {}
    for name, begin in starts:
        end = hlo.find("\n}", begin)
        out[name] = hlo[begin:end]
    return out


def step_loop(hlo: str) -> dict[str, int]:
    """``fusions``, ``reductions`` and ``instructions`` of the step loop's body: the ``while``
    body with the most fusions of its own (a loop inside it, or a branch it takes, is not its
    own: threefry's rounds are a small loop of their own); reductions counted inside its fusions
    too."""
    comps = computations(hlo)
    bodies = {body for name in comps for body in WHILE.findall(comps[name])}
    if not bodies:
        raise ValueError("the program has no loop")
    body = max(bodies, key=lambda b: len(FUSION.findall(comps[b])))
    fused = FUSION.findall(comps[body])
    reductions = len(REDUCE.findall(comps[body])) + sum(
        len(REDUCE.findall(comps[f])) for f in fused
    )
    instructions = sum(1 for line in comps[body].splitlines() if " = " in line)
    return {"fusions": len(fused), "reductions": reductions, "instructions": instructions}


def mlp(layers: tuple[int, ...], batch: int, num_data: int = 1000) -> tuple[Any, Any, Any]:
    """The Flax MLP's parameters, its per-example log-likelihood, and random data (``num_data``
    rows) of its shape."""
    net = sgrld.bnn.MLP(features=layers[1:-1], num_outputs=layers[-1])
    params = {"net": net.init(jax.random.key(0), jnp.zeros((1, layers[0])))["params"]}
    kx, ky = jax.random.split(jax.random.key(1))
    x = jax.random.normal(kx, (num_data, layers[0]))
    y = jax.random.randint(ky, (num_data,), 0, layers[-1])
    return params, sgrld.bnn.likelihoods.categorical(sgrld.bnn.apply_fn(net)), (x, y)


def make_sampler(name: str, corrected: bool, loglik: Any, num_data: int) -> sgrld.Sampler:
    """The sampler of a row, with the Hutchinson Γ (``correction_scale=1``) if ``corrected``."""
    prior = lambda p: -0.5 * sum(jnp.sum(v**2) for v in jax.tree.leaves(p))
    potential = sgrld.potential(loglik, prior, num_data)
    common = {"learning_rate": 1e-4, "num_data": num_data}
    if name == "sghmc":
        metric = sgrld.metrics.rmsprop() if corrected else None
        gamma = {"correction": "hutchinson"} if corrected else {}
        return sgrld.sghmc(potential, metric=metric, friction=0.1, **common, **gamma)
    gamma = {"correction": "hutchinson", "correction_scale": 1.0} if corrected else {}
    metric = {
        "identity": sgrld.metrics.identity,
        "rmsprop": sgrld.metrics.rmsprop,
        "monge": lambda: sgrld.metrics.monge(alpha2=1.0, decay=0.9),
        "shampoo": lambda: sgrld.metrics.shampoo(eps=1e-4, update_every=10, block_size=128),
        "dop": lambda: sgrld.metrics.fisher_diag(decay=0.99),
    }[name]()
    with warnings.catch_warnings():  # of bias: these samplers are compiled, not trusted
        warnings.simplefilter("ignore", sgrld.samplers.guarantee.BiasWarning)
        return sgrld.sgrld(potential, metric, adapt_until=None, **common, **gamma)


def _minibatch(data: Any, key: jax.Array, batch: int) -> Any:
    idx = jax.random.randint(key, (batch,), 0, data[1].shape[0])
    return jax.tree.map(lambda a: a[idx], data)


def compile_engine(module: Any, sampler, params, data, batch: int, steps: int, thin: int) -> str:
    """The optimised HLO of ``module``'s (an engine's) chunk of ``steps`` steps of one chain."""
    source = module.Source(
        lambda d, key, start, n: jnp.zeros((n, 0), jnp.int32),
        lambda d, x, key: _minibatch(d, key, batch),
    )
    eng = module.Engine(sampler, source, burn_in=0, thin=thin)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        carry = eng.init(sampler.init(params), num_chains=1)
    keys = module.chain_keys(jax.random.key(2), 1)
    slots = eng.slots(steps)
    return eng.compile(carry, keys, data, num_steps=steps, slots=slots).as_text()


def compile_bare(sampler, params, data, batch: int, steps: int) -> str:
    """The optimised HLO of the step of one chain in a bare scan of ``steps`` steps."""

    def one(key, state, data):
        data_key, step_key = jax.random.split(key)
        return sampler.step(step_key, state, _minibatch(data, data_key, batch))[0]

    def run(states, keys, start, data):
        def body(s, t):
            step_keys = jax.vmap(lambda k: jax.random.fold_in(k, t))(keys)
            return jax.vmap(one, (0, 0, None))(step_keys, s, data), None

        return jax.lax.scan(body, states, start + jnp.arange(steps))[0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        states = jax.vmap(sampler.init)(jax.tree.map(lambda x: x[None], params))
    keys = jax.random.split(jax.random.key(2), 1)
    return jax.jit(run).lower(states, keys, jnp.int32(0), data).compile().as_text()


def compare(
    name: str, corrected: bool, layers, batch: int, steps: int, thin: int, module: Any = engine
) -> dict[str, Any]:
    """The step loop of the engine's chunk and of the bare scan for one sampler."""
    params, loglik, data = mlp(tuple(layers), batch)
    sampler = make_sampler(name, corrected, loglik, len(data[1]))
    eng = step_loop(compile_engine(module, sampler, params, data, batch, steps, thin))
    bare = step_loop(compile_bare(sampler, params, data, batch, steps))
    return {"sampler": name, "gamma": corrected, "engine": eng, "bare": bare}


def load_engine(path: Path) -> Any:
    """An engine module from a file (another version of ``sgrld/chains/engine.py``)."""
    spec = importlib.util.spec_from_file_location("engine_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[784, 400, 400, 10])
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--thin", type=int, default=100)
    parser.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=list(SAMPLERS))
    parser.add_argument("--engine", type=Path, help="an engine.py to compile instead")
    args = parser.parse_args(argv)
    module = engine if args.engine is None else load_engine(args.engine)
    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}, layers {args.layers}, "
        f"batch {args.batch}, steps {args.steps}, thin {args.thin}, engine {module.__file__}"
    )
    print(
        "| sampler | Γ | engine fusions | bare fusions | ratio | engine reductions | "
        "bare reductions | engine instr. | bare instr. |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.samplers:
        for corrected in (False, True):
            tic = time.perf_counter()
            row = compare(name, corrected, args.layers, args.batch, args.steps, args.thin, module)
            e, b = row["engine"], row["bare"]
            ratio = np.divide(e["fusions"], b["fusions"])
            print(
                f"| {name} | {'yes' if corrected else 'no'} | {e['fusions']} | {b['fusions']} "
                f"| {ratio:.2f} | {e['reductions']} | {b['reductions']} | "
                f"{e['instructions']} | {b['instructions']} |  ({time.perf_counter() - tic:.0f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
