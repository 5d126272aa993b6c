"""Seeds (issue 38, item 3): ``run.seed`` outside [0, 2**32 - 1] is refused, because JAX's key keeps
32 bits (2**32 silently gave seed 0's chain, -1 that of 2**32 - 1), and within the range two
different seeds never give the same chains, tested at the range's edges."""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest

from sgrld_app import runner
from sgrld_app.config import ConfigError, load_config
from sgrld_app.config.validation import MAX_SEED
from sgrld_app.experiment import RunPlan

EDGES = [0, 1, 2**31 - 1, 2**31, MAX_SEED - 1, MAX_SEED]


@pytest.mark.parametrize("seed", [-1, -(2**32), MAX_SEED + 1, 2**32, 2**40])
def test_a_seed_outside_the_range_is_refused(seed):
    with pytest.raises(ConfigError, match=r"run\.seed: must be in \[0, 4294967295\]"):
        load_config(None, [f"run.seed={seed}"])


def test_the_edges_of_the_range_are_accepted():
    for seed in (0, MAX_SEED):
        assert load_config(None, [f"run.seed={seed}"]).run.seed == seed


def test_different_seeds_at_the_edges_give_different_chains():
    """The runner's keys (initialisation, chain, curvature) of every pair of seeds differ."""
    keys = {}
    for seed in EDGES:
        plan = RunPlan(epochs=1, batch_size=1, burn_in=0, thin=1, chains=2, seed=seed)
        roots = runner._chain_roots(plan)
        keys[seed] = np.concatenate([np.asarray(jax.random.key_data(k)).ravel() for k in roots])
    for a, b in itertools.combinations(EDGES, 2):
        assert not np.array_equal(keys[a], keys[b]), (a, b)


def test_a_sweep_whose_last_replicate_passes_the_range_is_refused():
    from sgrld_app import sweep

    config = load_config(None, [f"run.seed={MAX_SEED - 1}", 'data.name="digits"'])
    with pytest.raises(ConfigError, match="the last replicate's seed would pass"):
        sweep._check_sweep(config, [], 3)
    sweep._check_sweep(config, [], 2)
