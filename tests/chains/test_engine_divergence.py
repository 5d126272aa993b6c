"""A real sampler's divergence inside a block of bare steps: found at the step and leaf that a run
checked at every step finds (the stub sampler of ``test_blocks.py`` tests the marks themselves)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld


def diverging_sampler():
    """Repulsive, with a gradient that is NaN beyond x = 60: from x = 1 at lr 0.5 the chain
    crosses it at step 11, inside the block of steps 10-19 of ``thin=10``."""
    potential = lambda w, b: -0.5 * w["x"] ** 2 + jnp.sqrt(60.0 - w["x"])
    return sgrld.sgrld(potential, sgrld.metrics.identity(), learning_rate=0.5, num_data=1)


def diverged(thin: int, num_chunks: int = 1):
    s, params = diverging_sampler(), {"x": jnp.asarray(1.0), "y": jnp.zeros(2)}
    with pytest.raises(sgrld.DivergenceError) as err:
        sgrld.sample(
            jax.random.key(0),
            s,
            params,
            lambda key: None,
            num_samples=100 // thin,
            thin=thin,
            num_chunks=num_chunks,
        )
    return err.value


@pytest.mark.parametrize("num_chunks", [1, 3])
def test_a_divergence_inside_a_block_is_reported_at_the_step_of_a_run_checked_every_step(
    num_chunks,
):
    every = diverged(thin=1)
    step = int(every.samples.diverged_at)
    assert step % 10 not in (0, 9), step  # inside a block of thin=10, neither end
    blocks = diverged(thin=10, num_chunks=num_chunks)
    assert int(blocks.samples.diverged_at) == step
    assert f"at step {step} (in parameter ['x'])" in str(blocks)
    kept, every_x = np.asarray(blocks.samples.params["x"]), np.asarray(every.samples.params["x"])
    np.testing.assert_array_equal(kept[: step // 10], every_x[9:step:10])  # kept before it
    np.testing.assert_array_equal(kept[step // 10 :], every_x[step - 1])  # its last finite state
