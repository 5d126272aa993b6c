"""The engine's blocks: bare steps between the steps whose ``info`` is read, with the samples,
divergence marks and kept steps of a run checked at every step."""

from __future__ import annotations

import importlib.util
import sys
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.chains import engine
from sgrld.numerics.checks import first_nonfinite

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_loop_body():
    """benchmarks/loop_body.py as a module, without putting benchmarks/ on sys.path."""
    name = "sgrld_benchmarks_loop_body"
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / "loop_body.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


loop_body = load_loop_body()
LAYERS, BATCH = (10, 16, 3), 8
"""The guard's MLP: small to compile fast; the ratio is a property of the loop's structure (the
784-400-400-10 MLP of issue 50 in RESULTS gives the same ratios, ``benchmarks/loop_body.py``)."""


def mlp_sampler(name="rmsprop", corrected=True):
    params, loglik, data = loop_body.mlp(LAYERS, BATCH, num_data=50)
    sampler = loop_body.make_sampler(name, corrected, loglik, len(data[1]))
    batches = engine.random_batches(lambda key: loop_body._minibatch(data, key, BATCH))
    return params, sampler, batches


def run_chunks(eng, carry, keys, sizes, start=0):
    """The carry after chunks of ``sizes`` steps, and every used slot's step and params."""
    steps, params = [], []
    for n in sizes:
        carry, chunk, _ = eng.run_chunk(carry, keys, None, start=start, num_steps=n)
        used = np.asarray(chunk.steps) >= 0
        steps += np.asarray(chunk.steps)[used].tolist()
        params.append(jax.tree.map(lambda x, u=used: np.asarray(x)[u], chunk.params))
        start += n
    return carry, steps, jax.tree.map(lambda *xs: np.concatenate(xs), *params)


@pytest.mark.parametrize(
    "burn_in, thin, sizes, name",
    [
        pytest.param(5, 4, [4, 1, 32], "rmsprop", marks=pytest.mark.long),
        (0, 7, [10, 10, 10, 7], "identity"),
        (2, 50, [13, 24], "dop"),
        (5, 4, [3, 34], "sghmc"),
    ],
)
def test_blocks_give_the_samples_of_a_run_checked_at_every_step(burn_in, thin, sizes, name):
    """Blocks cut anywhere by chunks (off the grid, shorter than a block, one step) give the
    states of one chunk bit for bit, and keep the steps and states that a chunk run step by step
    (``freeze``: the engine's re-run) keeps. Against the latter they agree bit for bit but for
    SGHMC, within 1e-8: XLA's CPU code for a step depends on what else its loop computes."""
    params, sampler, batches = mlp_sampler(name, corrected=name == "rmsprop")
    eng = engine.Engine(sampler, batches, burn_in=burn_in, thin=thin)
    keys = engine.chain_keys(jax.random.key(3), 2)
    start = eng.init(sampler.init(params), num_chains=2)
    carry, steps, kept = run_chunks(eng, start, keys, sizes)
    n = sum(sizes)
    whole, whole_steps, whole_kept = run_chunks(eng, start, keys, [n])
    assert steps == whole_steps == [s for s in range(n) if engine.is_kept(s, burn_in, thin)]
    jax.tree.map(np.testing.assert_array_equal, (carry.state, kept), (whole.state, whole_kept))
    stepwise = eng.compile(start, keys, None, num_steps=n, slots=eng.slots(n, 0), freeze=True)
    every, chunk = stepwise(start, jnp.int32(0), keys, None)
    np.testing.assert_array_equal(np.asarray(chunk.steps)[: len(steps)], steps)
    check = np.testing.assert_array_equal
    if name == "sghmc":
        check = partial(np.testing.assert_allclose, rtol=0, atol=1e-8)
    jax.tree.map(lambda a, b: check(np.asarray(a)[: len(steps)], b), chunk.params, kept)
    jax.tree.map(lambda a, b: check(np.asarray(a), np.asarray(b)), every.state, carry.state)


def test_a_resumed_engine_continues_the_same_chains():
    """A new engine (a new process) resumed from a chunk's carry and step equals one run."""
    params, sampler, batches = mlp_sampler("rmsprop", corrected=False)
    keys = engine.chain_keys(jax.random.key(4), 1)
    make = lambda: engine.Engine(sampler, batches, burn_in=3, thin=6)
    start = make().init(sampler.init(params), num_chains=1)
    whole, steps, kept = run_chunks(make(), start, keys, [20, 20])
    half, first_steps, first = run_chunks(make(), start, keys, [20])
    resumed, last_steps, last = run_chunks(make(), half, keys, [20], start=20)
    assert first_steps + last_steps == steps
    jax.tree.map(np.testing.assert_array_equal, whole.state, resumed.state)
    jax.tree.map(
        lambda a, b, c: np.testing.assert_array_equal(np.concatenate([a, b]), c), first, last, kept
    )


def test_a_keep_predicate_and_the_summaries_follow_the_blocks():
    """A cyclical schedule's ``keep`` narrows the kept steps; the summary counts one step per
    block (every ``thin``-th step and the chunk's last) of each chain."""
    params, sampler, batches = mlp_sampler("identity", corrected=False)
    cycle = sgrld.numerics.schedules.cyclical(0.1, num_steps=60, num_cycles=3, exploration=0.5)
    eng = engine.Engine(sampler, batches, burn_in=1, thin=3, keep=cycle.keep)
    keys = engine.chain_keys(jax.random.key(5), 2)
    carry = eng.init(sampler.init(params), num_chains=2)
    counted = []
    for start, n in ((0, 25), (25, 35)):
        carry, chunk, _ = eng.run_chunk(carry, keys, None, start=start, num_steps=n)
        ends = [s for s in range(start, start + n) if s % 3 == 0 or s == start + n - 1]
        counted.append((float(chunk.summary["steps"]), 2.0 * len(ends)))
        steps = np.asarray(chunk.steps)
        want = [s for s in ends if engine.is_kept(s, 1, 3) and bool(cycle.keep(s))]
        assert steps[steps >= 0].tolist() == want
    assert [have for have, _ in counted] == [want for _, want in counted]


class Blowup:
    """A sampler whose leaf ``b`` of chain 1 (``a == 1``) becomes NaN at step ``at``."""

    def __init__(self, at):
        self.at = at

    def init(self, params):
        return sgrld.SGRLDState(jnp.zeros((), jnp.int32), params, ())

    def step(self, key, state, batch):
        p = state.params
        bad = (state.step == self.at) & (p["a"] == 1.0)
        new = {"a": p["a"], "b": jnp.where(bad, jnp.nan, p["b"] + 1.0)}
        leaf = first_nonfinite(jnp.stack([jnp.sum(x) for x in jax.tree.leaves(new)]))
        zero = jnp.zeros(())
        info = sgrld.SGRLDInfo(
            zero, zero, zero, zero, jnp.zeros((), bool), jnp.zeros((), jnp.int32), leaf < 0, leaf
        )
        return sgrld.SGRLDState(state.step + 1, new, ()), info


@pytest.mark.parametrize("sizes", [[40], [15, 25]])
def test_a_divergence_inside_a_block_is_marked_at_its_step_and_leaf(sizes):
    """Step 17 is inside the block of steps 10-19: the chain is marked at 17 in leaf ``b``,
    keeps its sample at 9 and none after, and the other chain goes on."""
    blowup = Blowup(at=17)
    sampler = sgrld.Sampler(blowup.init, blowup.step)
    eng = engine.Engine(sampler, engine.random_batches(lambda key: ()), thin=10)
    keys = engine.chain_keys(jax.random.key(0), 2)
    state = jax.vmap(sampler.init)({"a": jnp.array([0.0, 1.0]), "b": jnp.zeros(2)})
    carry, valid, start = eng.init(state), [], 0
    for n in sizes:
        carry, chunk, _ = eng.run_chunk(carry, keys, None, start=start, num_steps=n)
        valid += np.asarray(chunk.valid)[np.asarray(chunk.steps) >= 0].tolist()
        start += n
    assert np.asarray(carry.diverged_step).tolist() == [-1, 17]
    assert np.asarray(carry.diverged_leaf).tolist() == [-1, 1]
    assert valid == [[True, True], [True, False], [True, False], [True, False]]
    assert np.asarray(carry.state.params["b"]).tolist() == [40.0, 17.0]  # its last finite state


def test_sample_names_the_step_and_leaf_of_a_divergence_inside_a_block():
    blowup = Blowup(at=23)
    sampler = sgrld.Sampler(blowup.init, blowup.step)
    params = {"a": jnp.ones(()), "b": jnp.zeros(())}
    with pytest.raises(sgrld.DivergenceError, match=r"step 23 \(in parameter \['b'\]\)") as err:
        sgrld.sample(jax.random.key(0), sampler, params, lambda key: (), num_samples=5, thin=10)
    assert err.value.samples.params["b"][:2].tolist() == [10.0, 20.0]


SAMPLERS = [
    pytest.param(name, gamma, marks=[pytest.mark.long] if name == "shampoo" else [])
    for name in loop_body.SAMPLERS
    for gamma in (False, True)
]


@pytest.mark.parametrize("name, corrected", SAMPLERS)
def test_the_step_loop_is_the_bare_step(name, corrected):
    """The compiled chunk's step loop (thin 100, 100 steps, one chain) has at most 1.1x the
    fusions and reductions of the same step in a bare scan: no per-step bookkeeping."""
    row = loop_body.compare(name, corrected, LAYERS, BATCH, steps=100, thin=100)
    engine_loop, bare = row["engine"], row["bare"]
    assert engine_loop["fusions"] <= 1.1 * bare["fusions"], row
    assert engine_loop["reductions"] <= 1.1 * bare["reductions"], row


def test_the_guard_sees_per_step_bookkeeping():
    """The step-by-step chunk (a re-run after a divergence) checks, keeps and summarises every
    step: the guard's ratio finds it."""
    params, sampler, batches = mlp_sampler("identity", corrected=False)
    eng = engine.Engine(sampler, batches, thin=100)
    carry = eng.init(sampler.init(params), num_chains=1)
    keys = engine.chain_keys(jax.random.key(0), 1)
    stepwise = eng.compile(carry, keys, None, num_steps=100, slots=1, freeze=True)
    fast = eng.compile(carry, keys, None, num_steps=100, slots=1)
    per_step = loop_body.step_loop(stepwise.as_text())["fusions"]
    assert per_step > 1.1 * loop_body.step_loop(fast.as_text())["fusions"]
