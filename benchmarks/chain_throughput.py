"""Chain-steps per second against the number of chains, sgrld's engine beside BlackJAX's SGLD.

The MNIST MLP of ``mlp.py`` (784-400-400-10, 478,410 parameters, N(0, 1) prior), minibatches of
100 drawn with replacement from the 60,000 MNIST training images (``--data-dir``, default
``../shared/data`` beside the repository; random data of that shape if the files are not
there), N = 60,000, learning rate h·N = 1e-4 (SGLD: the identity metric). For each number of
chains K:

* ``sgrld``: the chain engine (:class:`sgrld.chains.engine.Engine`, as ``sgrld.sample`` and the
  runner run it): ``--steps`` steps per jitted chunk, a ``jax.lax.scan`` over steps of the
  ``jax.vmap``-ed ``sgrld.sgrld`` step, each chain drawing its own minibatch from its own key, the
  chunk's last state kept as a sample, its diagnostics summarised;
* ``blackjax``: ``blackjax.sgld`` with ``blackjax.sgmcmc.gradients.grad_estimator`` of the same
  log-likelihood and prior, vmapped over chains the same way (each chain its own minibatch from its
  own key), ``--steps`` steps per jitted ``jax.lax.scan``. Skipped if ``import blackjax`` fails.

Timing (``timing.py``): after a compiling call each, R interleaved rounds of one chunk per
candidate; reported are the medians over rounds of chain-steps per second (K x steps / seconds),
the ratio sgrld / BlackJAX paired by round, and the scaling of each against its own one chain.

Usage::

    python benchmarks/chain_throughput.py                      # chains 1 8 64, 3 rounds
    python benchmarks/chain_throughput.py --chains 1 8 64 512 --rounds 5 --steps 20
    python benchmarks/chain_throughput.py --quick              # smoke run (tiny)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import mlp
import numpy as np
from timing import environment, fmt_ratio, fmt_spread, interleave, paired, spread, table

import sgrld
from sgrld.chains import engine

LEARNING_RATE = 1e-4
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
"""``../shared/data`` of the repository, where the MNIST files may be."""


def training_set(data_dir: Path, quick: bool) -> tuple[tuple[jax.Array, jax.Array], str]:
    """The MNIST training images (flattened, in [0, 1]) and labels, or random data of the shape."""
    n = 1000 if quick else 60_000
    try:
        ds = sgrld.data.load_dataset("mnist", data_dir, validation_size=0)
        x, y = ds.x_train[:n].reshape(min(n, len(ds.x_train)), -1), ds.y_train[:n]
        return (jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.int32)), f"MNIST from {data_dir}"
    except (sgrld.data.DataError, OSError, ValueError) as err:
        kx, ky = jax.random.split(jax.random.key(1))
        x = jax.random.uniform(kx, (n, mlp.LAYERS[0]), jnp.float32)
        y = jax.random.randint(ky, (n,), 0, mlp.LAYERS[-1], jnp.int32)
        return (x, y), f"random data of MNIST's shape ({err})"


class SgrldChains:
    """K chains of sgrld's Identity SGLD on the engine, ``steps`` steps a call."""

    def __init__(self, data, chains: int, steps: int):
        n = len(data[0])
        potential = sgrld.potential(mlp.loglik, mlp.logprior, n)
        sampler = sgrld.sgrld(
            potential, sgrld.metrics.identity(), learning_rate=LEARNING_RATE, num_data=n
        )
        batches = engine.random_batches(sgrld.minibatch_fn(data, mlp.BATCH))
        self.engine = engine.Engine(sampler, batches, burn_in=0, thin=steps)
        params = mlp.init_mlp(jax.random.key(0))
        self.carry = self.engine.init(sampler.init(params), num_chains=chains)
        self.keys = engine.chain_keys(jax.random.key(2), chains)
        self.steps, self.start = steps, 0

    def __call__(self) -> None:
        self.carry, chunk, _ = self.engine.run_chunk(
            self.carry, self.keys, None, start=self.start, num_steps=self.steps, exact_slots=False
        )
        self.start += self.steps

    def finite(self) -> bool:
        return bool(np.all(np.asarray(self.carry.diverged_step) < 0))


class BlackjaxChains:
    """K chains of ``blackjax.sgld``, vmapped, ``steps`` steps a jitted ``lax.scan``."""

    def __init__(self, data, chains: int, steps: int):
        import blackjax
        from blackjax.sgmcmc.gradients import grad_estimator

        n = len(data[0])
        loglik = lambda p, datum: mlp.loglik(p, jax.tree.map(lambda a: a[None], datum))[0]
        kernel = blackjax.sgld(grad_estimator(mlp.logprior, loglik, n))
        batch = sgrld.minibatch_fn(data, mlp.BATCH)
        step_size = LEARNING_RATE / n

        def one(key, position):
            batch_key, noise_key = jax.random.split(key)
            return kernel.step(noise_key, position, batch(batch_key), step_size)

        def run(positions, keys, start):
            def body(p, t):
                step_keys = jax.vmap(lambda k: jax.random.fold_in(k, t))(keys)
                return jax.vmap(one)(step_keys, p), None

            return jax.lax.scan(body, positions, start + jnp.arange(steps))[0]

        params = mlp.init_mlp(jax.random.key(0))
        self.positions = jax.tree.map(lambda x: jnp.stack([x] * chains), params)
        self.keys = jax.random.split(jax.random.key(2), chains)
        self.fn = jax.jit(run)
        self.steps, self.start = steps, 0

    def __call__(self) -> None:
        self.positions = jax.block_until_ready(
            self.fn(self.positions, self.keys, jnp.int32(self.start))
        )
        self.start += self.steps

    def finite(self) -> bool:
        return all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(self.positions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--steps", type=int, default=10, help="steps per timed call")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=SHARED_DATA)
    parser.add_argument("--quick", action="store_true", help="chains 1 2, 2 steps, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.chains, args.steps, args.rounds = [1, 2], 2, 1
    print(environment())
    data, source = training_set(args.data_dir, args.quick)
    print(f"data: {source}; {len(data[0])} examples, minibatches of {mlp.BATCH}")
    try:
        import blackjax

        print(f"blackjax {blackjax.__version__}")
        kinds = {"sgrld": SgrldChains, "blackjax": BlackjaxChains}
    except ImportError:
        print("blackjax not importable: its column is skipped")
        kinds = {"sgrld": SgrldChains}

    rows, rates = [], {}
    for k in args.chains:
        runs = {name: make(data, k, args.steps) for name, make in kinds.items()}
        for run in runs.values():
            run()  # compiles
        times = interleave(runs, args.rounds)
        for name, run in runs.items():
            rates[name, k] = spread(k * args.steps / t for t in times[name])
            if not run.finite():
                print(f"warning: {name} with {k} chains went non-finite")
        versus = paired(times["blackjax"], times["sgrld"]) if "blackjax" in runs else None
        rows.append((k, versus))
        done = ", ".join(f"{name} {rates[name, k].median:,.1f}" for name in kinds)
        print(f"{k} chains: chain-steps/s {done}", flush=True)

    head = ["chains", *(f"{name} chain-steps/s" for name in kinds), "sgrld / blackjax"]
    head += [f"{name} vs 1 chain" for name in kinds]
    lines = []
    for k, versus in rows:
        line = [str(k)]
        line += [f"{rates[name, k].median:,.1f}" for name in kinds]
        line.append(fmt_spread(versus, 2) if versus else "")
        base = {name: rates.get((name, args.chains[0])) for name in kinds}
        line += [fmt_ratio(rates[name, k].median / base[name].median) for name in kinds]
        lines.append(line)
    print(table(head, lines))
    print(
        f"median over {args.rounds} interleaved rounds of {args.steps} steps; sgrld / blackjax is "
        "BlackJAX's time over sgrld's in the same round (above 1: sgrld faster), [range]; "
        f"'vs 1 chain' is against the {args.chains[0]}-chain row"
    )


if __name__ == "__main__":
    main()
