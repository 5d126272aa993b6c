"""What the random numbers of a step cost: the Langevin noise ξ and the Γ correction's probes.

Every SGLD step draws one standard normal per parameter, and a Γ-corrected step one Rademacher
probe per parameter. JAX hashes with a rolled threefry loop on CPU; :mod:`sgrld.numerics.noise`
draws the same numbers with the hash unrolled. This times, in interleaved rounds (``timing.py``), on
the 784-400-400-10 MLP of ``mlp.py``:

* the draws alone, 478,410 numbers each (``--calls`` jitted calls per round): the parts of
  ``jax.random.normal`` (random bits, uniforms, normals, ``erf_inv`` alone),
  ``sgrld.numerics.noise.normal``, the ``rbg`` and ``unsafe_rbg`` keys, and the signs of
  ``jax.random.rademacher`` and ``sgrld.numerics.noise.rademacher``;
* the uncorrected Identity and Monge steps with three noise functions, given to the sampler as
  ``sgrld.parts.integrators.euler_maruyama(noise_fn=...)``: ``sgrld.numerics.noise.normal_like``
  (the default: the draw is kept in memory), the unrolled hash per leaf (XLA recomputes it in every
  reader of ξ; Monge reads ξ twice) and ``jax.random.normal`` per leaf;
* the corrected RMSprop, Wenzel and Monge steps with the probes of
  ``sgrld.parts.correction.rademacher_like`` (the default) and of ``jax.random.rademacher``, given
  as ``sgrld.parts.correction.hutchinson(probe_fn=...)``.

Each step runs ``--steps`` at a time inside one jitted ``lax.scan``; printed are the median ms per
step, the ratio to the default draw of the same metric paired by round, and how many of the compiled
step's computations contain the threefry hash.

    python benchmarks/draws.py [--rounds 9] [--steps 100] [--calls 50] [--chains C]

With ``--chains C`` every step is ``vmap``ped over C chains, as the runner steps them (C = 1
included).
"""

from __future__ import annotations

import argparse
import statistics
import sys

import jax
import mlp
from timing import Candidate, environment, fmt_spread, interleave, paired, table

import sgrld
from sgrld.numerics import noise
from sgrld.parts import correction, integrators
from sgrld.samplers.sampler import riemannian_langevin

THREEFRY_PARITY = "466688986"  # 0x1BD11BDA, a constant of every threefry hash


def per_leaf(normal):
    """A noise function ``(key, tree) -> ξ``: each leaf from ``normal(key, shape, dtype)``."""

    def noise_fn(key, tree):
        leaves, treedef = jax.tree.flatten(tree)
        keys = jax.random.split(key, len(leaves))
        return treedef.unflatten(
            [normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)]
        )

    return noise_fn


def jax_probes(key, tree, num):
    """``num`` probes per leaf from ``jax.random.rademacher``, stacked on a leading axis."""
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, len(leaves))
    return treedef.unflatten(
        [
            jax.random.rademacher(k, (num, *x.shape), dtype=x.dtype)
            for k, x in zip(keys, leaves, strict=True)
        ]
    )


NOISE = {
    "noise kept (sgrld.numerics.noise.normal_like)": noise.normal_like,
    "noise recomputed (unrolled hash)": per_leaf(noise.normal),
    "noise by jax.random.normal": per_leaf(jax.random.normal),
}
PROBES = {
    "probes by sgrld.parts.correction.rademacher_like": correction.rademacher_like,
    "probes by jax.random.rademacher": jax_probes,
}


def draw_candidates(calls: int) -> list[Candidate]:
    """The draws of the MLP's number of normals or signs, ``calls`` jitted calls per candidate."""
    size, key = mlp.NUM_PARAMS, jax.random.key(0)
    uniforms = jax.random.uniform(key, (size,), minval=-0.99, maxval=0.99)
    normal = jax.jit(lambda k: jax.random.normal(k, (size,)))
    draws = {
        "threefry: random bits": (jax.jit(lambda k: jax.random.bits(k, (size,))), key),
        "threefry: uniforms": (jax.jit(lambda k: jax.random.uniform(k, (size,))), key),
        "threefry: normals": (normal, key),
        "sgrld.numerics.noise.normal": (jax.jit(lambda k: noise.normal(k, (size,))), key),
        "erf_inv of uniforms alone": (jax.jit(jax.lax.erf_inv), uniforms),
        "rbg: normals": (normal, jax.random.key(0, impl="rbg")),
        "unsafe_rbg: normals": (normal, jax.random.key(0, impl="unsafe_rbg")),
        "signs: jax.random.rademacher": (jax.jit(lambda k: jax.random.rademacher(k, (size,))), key),
        "signs: sgrld.numerics.noise.rademacher": (
            jax.jit(lambda k: noise.rademacher(k, (size,))),
            key,
        ),
    }

    def repeat(fn, arg):
        def run():
            out = None
            for _ in range(calls):
                out = fn(arg)
            jax.block_until_ready(out)

        return run

    for fn, arg in draws.values():
        jax.block_until_ready(fn(arg))
    return [Candidate(name, repeat(fn, arg), calls) for name, (fn, arg) in draws.items()]


def samplers(potential) -> dict[str, tuple[str, sgrld.Sampler]]:
    """name -> (metric, sampler); each metric's first sampler has the library's default draw."""
    out = {}
    for metric in ("identity", "monge"):
        for label, noise_fn in NOISE.items():
            out[f"{metric}, {label}"] = (
                metric,
                riemannian_langevin(
                    potential,
                    mlp.make_metric(metric),
                    integrator=integrators.euler_maruyama(noise_fn=noise_fn),
                    learning_rate=mlp.LEARNING_RATE[metric],
                    num_data=mlp.NUM_DATA,
                ),
            )
    for metric in ("rmsprop", "wenzel", "monge"):
        for label, probe_fn in PROBES.items():
            out[f"{metric} + Hutchinson, {label}"] = (
                metric + "+",
                riemannian_langevin(
                    potential,
                    mlp.make_metric(metric, corrected=True),
                    correction=correction.hutchinson(warmup=0, probe_fn=probe_fn),
                    learning_rate=mlp.LEARNING_RATE[metric],
                    num_data=mlp.NUM_DATA,
                ),
            )
    return out


def hash_count(sampler, params, batch) -> int:
    """How many computations of the compiled step contain the threefry hash."""
    lowered = jax.jit(sampler.step).lower(jax.random.key(0), sampler.init(params), batch)
    return sum(THREEFRY_PARITY in c for c in lowered.compile().as_text().split("\n\n"))


def step_rows(args) -> list[list[str]]:
    """The steps with each draw, timed in interleaved rounds; one table row each."""
    params, batch, potential = mlp.problem()
    built = {
        name: (group, mlp.over_chains(s, args.chains))
        for name, (group, s) in samplers(potential).items()
    }
    chains = {name: mlp.ScanChain(s, params, batch, args.steps) for name, (_, s) in built.items()}
    times = interleave(chains, args.rounds)
    rows, default = [], {}
    for name, (group, sampler) in built.items():
        reference = times[default.setdefault(group, name)]
        rows.append(
            [
                name,
                f"{1e3 * statistics.median(times[name]) / args.steps:.2f}",
                fmt_spread(paired(times[name], reference)),
                str(hash_count(sampler, params, batch)),
                "yes" if chains[name].finite else "NO",
            ]
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=100, help="steps per scan")
    parser.add_argument("--calls", type=int, default=50, help="jitted calls per draw per round")
    parser.add_argument("--chains", type=int, default=None, help="vmap the steps over C chains")
    args = parser.parse_args()
    if min(args.rounds, args.steps, args.calls) < 1:
        parser.error("--rounds, --steps and --calls must be >= 1")
    print(environment())
    cands = draw_candidates(args.calls)
    times = interleave({c.name: c.run for c in cands}, args.rounds)
    for c in cands:
        c.times = times[c.name]
    print(f"\n{mlp.NUM_PARAMS:,} numbers per draw; ms per draw, median of {args.rounds} rounds")
    print(table(["draw", "ms"], [[c.name, f"{1e3 * c.step_s:.3f}"] for c in cands]))
    vmapped = "" if args.chains is None else f", vmapped over {args.chains} chain(s)"
    print(f"\nSteps in a lax.scan of {args.steps}{vmapped}, median of {args.rounds} rounds")
    head = ["step, draw", "ms/step", "/default [range]", "hash comps", "finite"]
    print(table(head, step_rows(args)))
    print(
        "/default: the ratio to the same metric's step with the library's default draw (first "
        "row of the metric), paired by round; hash comps: computations of the compiled step "
        "containing the threefry hash (both branches of a conditional included)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
