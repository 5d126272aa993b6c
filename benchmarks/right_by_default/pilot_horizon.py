"""Why ``learning_rate="auto"`` halves over a long pilot: the validation log-likelihood of the
ensemble of the chains' states after pilots of several lengths, at fixed rates, on the digits
(the newcomer's configuration: ``sgrld run --set data.name=digits --set sampler.metric=M``).
Each pilot length is its own run from the same starts and keys (RESULTS §33).

    .venv/bin/python benchmarks/right_by_default/pilot_horizon.py --metric identity \\
        --rates 0.2 0.0675 0.0225 --steps 250 500 1000
"""

from __future__ import annotations

import argparse
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.chains import step_size
from sgrld.chains.sampling import minibatch_fn
from sgrld_app.auto_rate import validation_score
from sgrld_app.config import load_config
from sgrld_app.from_config import build_experiment


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--metric", default="identity")
    p.add_argument("--rates", type=float, nargs="+", default=[0.2, 0.0675, 0.0225])
    p.add_argument("--steps", type=int, nargs="+", default=[250, 500, 1000])
    p.add_argument("--chains", type=int, default=4)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    config = load_config(None, ["data.name=digits", f"sampler.metric={args.metric}"])
    experiment = build_experiment(config)
    search = experiment.sampler.rate_search
    params = jax.vmap(experiment.init_fn)(jax.random.split(jax.random.key(0), args.chains))
    batch_fn = minibatch_fn(tuple(experiment.train), config.data.batch_size)
    states = jax.vmap(search.build(args.rates[0]).init)(params)
    score = validation_score(experiment)
    rates = jnp.asarray(args.rates, jnp.float32)
    keys = jax.random.split(jax.random.key(2), args.chains)
    print(f"| rate | {' | '.join(f'n = {n}' for n in args.steps)} |")
    print("|---" * (len(args.steps) + 1) + "|")
    table = []
    for n in args.steps:
        ends, _ = step_size._pilot_fn(search, batch_fn, n)(rates, states, keys)
        table.append(np.asarray(score(ends.params)))
    for i, rate in enumerate(args.rates):
        print(f"| {rate:g} | {' | '.join(f'{col[i]:.3f}' for col in table)} |")


if __name__ == "__main__":
    main()
