"""The chain engine: keys, sources, thinning, summaries of info, callbacks, and the runner's
per-epoch diagnostics."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.chains import engine, summaries
from sgrld.metrics import Metric
from sgrld_app import runner
from tests.run.test_runner import SCHEDULE, logistic_experiment


def identity_sampler(lr=0.1):
    t = sgrld.samples.targets.standard_normal()
    return t, sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=lr, num_data=1)


def test_is_kept_and_num_kept_agree():
    for burn_in in (0, 1, 5, 12):
        for thin in (1, 3, 7):
            kept = [s for s in range(60) if engine.is_kept(s, burn_in, thin)]
            assert kept[0] == burn_in + thin - 1 and np.all(np.diff(kept) == thin)
            for start, stop in ((0, 60), (4, 9), (13, 40), (30, 30)):
                expected = sum(1 for s in kept if start <= s < stop)
                assert engine.num_kept(start, stop, burn_in, thin) == expected


def test_summarise_counts_only_finite_steps_of_live_chains():
    info = sgrld.SGRLDInfo(
        potential=jnp.array([[1.0, jnp.nan], [3.0, 4.0], [5.0, 6.0]]),
        grad_norm=jnp.ones((3, 2)),
        learning_rate=jnp.full((3, 2), 0.1),
        gamma_norm=jnp.array([[0.5, 9.0], [1.5, 1.0], [2.0, 0.0]]),
        drift_fallback=jnp.array([[True, True], [False, True], [True, False]]),
        metric_fallbacks=jnp.array([[0, 0], [1, 0], [2, 3]], jnp.int32),
        is_finite=jnp.array([[True, False], [True, True], [True, True]]),
        nonfinite_leaf=jnp.zeros((3, 2), jnp.int32),
    )
    ok = jnp.array([[True, False], [True, True], [False, True]])
    s = summaries.summarise(info, ok)
    assert float(s["steps"]) == 4
    assert float(s["potential_sum"]) == 1 + 3 + 4 + 6
    assert float(s["gamma_norm_max"]) == 1.5  # 9.0 and 2.0 are not ok steps
    assert int(s["drift_fallback_count"]) == 2
    assert int(s["metric_fallbacks_last"]) == 5
    assert "is_finite_count" not in s and "nonfinite_leaf_last" not in s
    record = runner.records.diagnostics(s)
    assert record["potential"] == pytest.approx(14 / 4) and record["metric_fallbacks"] == 5


def counting_sampler(observe=lambda batch: jnp.zeros(())) -> sgrld.Sampler:
    """A sampler whose step only counts and reports ``observe(batch)`` as its potential."""

    def step(key, state, batch):
        return sgrld.SGRLDState(state.step + 1, state.params, ()), sgrld.SGRLDInfo(
            observe(batch),
            *(jnp.zeros(()) for _ in range(3)),
            jnp.zeros((), bool),
            jnp.zeros((), jnp.int32),
            jnp.ones((), bool),
            jnp.full((), -1, jnp.int32),
        )

    return sgrld.Sampler(lambda p: sgrld.SGRLDState(jnp.zeros((), jnp.int32), p, ()), step)


def test_epochs_source_walks_a_permutation_per_chain_and_epoch():
    n, b = 23, 5  # 4 steps per epoch; the last 3 examples of each permutation are dropped
    data = jnp.arange(n)
    seen = []
    sampler = counting_sampler()
    eng = engine.Engine(sampler, engine.epochs(n, b))
    keys = engine.chain_keys(jax.random.key(0), 2)
    carry = eng.init(sampler.init(jnp.zeros(())), num_chains=2)
    source = engine.epochs(n, b)
    for epoch in range(2):
        first = jax.vmap(lambda k, e=epoch: jax.random.split(jax.random.fold_in(k, 4 * e))[1])(keys)
        order = jax.vmap(source.prepare, (None, 0, None, None))(data, first, 4 * epoch, 4)
        assert order.shape == (2, 4, b)
        for c in range(2):
            flat = np.asarray(order[c]).ravel()
            assert len(set(flat.tolist())) == 4 * b  # no example twice in an epoch
        seen.append(np.asarray(order))
        carry, chunk, _ = eng.run_chunk(carry, keys, data, start=4 * epoch, num_steps=4)
    assert not np.array_equal(seen[0][0], seen[0][1])  # chains shuffle differently
    assert not np.array_equal(seen[0][0], seen[1][0])  # and anew every epoch
    assert np.asarray(carry.state.step).tolist() == [8, 8]


def test_a_full_batch_epoch_gives_every_chain_all_of_the_data_at_every_step():
    n = 7
    data = (jnp.arange(n, dtype=jnp.float32), jnp.arange(n, dtype=jnp.float32) ** 2)
    # every example, in order: the weights pick out a permuted or partial batch
    sampler = counting_sampler(lambda b: jnp.sum(b[0] * jnp.arange(1.0, n + 1)) + jnp.sum(b[1]))
    eng = engine.Engine(sampler, engine.epochs(n, n))
    carry = eng.init(sampler.init(jnp.zeros(())), num_chains=3)
    keys = engine.chain_keys(jax.random.key(0), 3)
    for epoch in range(2):
        carry, chunk, _ = eng.run_chunk(carry, keys, data, start=epoch, num_steps=1)
        expected = sum(i * (i + 1) + i**2 for i in range(n))
        assert float(chunk.summary["potential_sum"]) == 3 * expected  # 3 chains, one step each


def test_chunks_do_not_change_the_chains():
    t, s = identity_sampler()
    eng = engine.Engine(s, engine.random_batches(t.batch_fn), burn_in=5, thin=3)
    keys = engine.chain_keys(jax.random.key(1), 3)
    start = eng.init(s.init(t.init_params), num_chains=3)
    one, whole, _ = eng.run_chunk(start, keys, None, start=0, num_steps=30)
    parts, carry = [], start
    for begin in (0, 7, 19):
        n = {0: 7, 7: 12, 19: 11}[begin]
        carry, chunk, _ = eng.run_chunk(carry, keys, None, start=begin, num_steps=n)
        parts.append(np.asarray(chunk.params)[np.asarray(chunk.steps) >= 0])
    np.testing.assert_array_equal(np.asarray(one.state.params), np.asarray(carry.state.params))
    np.testing.assert_array_equal(np.asarray(whole.params), np.concatenate(parts))


def test_callback_stops_the_run_and_sees_every_chunk():
    t, s = identity_sampler()
    eng = engine.Engine(s, engine.random_batches(t.batch_fn))
    seen = []

    def callback(i, carry, chunk, seconds):
        seen.append((i, int(carry.state.step[0]), seconds >= 0))
        return i == 1

    keys = engine.chain_keys(jax.random.key(0), 2)
    carry = eng.run(eng.init(s.init(t.init_params), 2), keys, None, [4, 4, 4], callback=callback)
    assert seen == [(0, 4, True), (1, 8, True)] and int(carry.state.step[0]) == 8


def test_bad_engine_arguments():
    t, s = identity_sampler()
    with pytest.raises(ValueError, match="thin"):
        engine.Engine(s, engine.random_batches(t.batch_fn), thin=0)
    with pytest.raises(ValueError, match="burn_in"):
        engine.Engine(s, engine.random_batches(t.batch_fn), burn_in=-1)


def failing_refresh(metric: Metric) -> Metric:
    """``metric`` whose every update counts one failed refresh (a fallback)."""
    update = lambda state, g: metric.update(state, g)._replace(fallbacks=state.fallbacks + 1)
    return metric._replace(update=update)


@pytest.mark.parametrize("max_drift_norm", [None, 0.5])
def test_runner_records_every_diagnostic_of_the_sampler(max_drift_norm):
    exp = logistic_experiment()
    sampler = sgrld.sgrld(
        sgrld.potential(
            sgrld.bnn.likelihoods.categorical(lambda net, x: x @ net["w"] + net["b"]),
            lambda p: -0.5 * sum(jnp.sum(v**2) for v in jax.tree.leaves(p)),
            40,
        ),
        failing_refresh(sgrld.metrics.rmsprop(decay=0.5)),
        learning_rate=0.01,
        num_data=40,
        correction="hutchinson",
        max_drift_norm=max_drift_norm,
    )
    records = runner.run(dataclasses.replace(exp, sampler=sampler), SCHEDULE).records
    for key in ("potential", "grad_norm", "gamma_norm", "gamma_norm_max", "learning_rate"):
        assert all(np.isfinite(r[key]) for r in records), key
    # 2 chains x 10 steps per epoch; every update of this metric counts a failed refresh.
    assert [r["metric_fallbacks"] for r in records] == [20, 40, 60]
    assert all(r["divergences"] == 0 and r["learning_rate"] == pytest.approx(0.01) for r in records)
    if max_drift_norm is None:  # Γ̂ after the warm-up of 6 updates, no fallback of the drift
        assert all(r["gamma_norm_max"] >= r["gamma_norm"] > 0 for r in records)
        assert all(r["drift_fallback_count"] == 0 for r in records)
    else:  # ‖G⁻¹g‖ > 0.5 at every step: the identity fallback, which drops Γ̂
        # counted at the summarised steps: the thinning grid's (3, 7, 11, ...) and epoch ends
        on_grid = lambda s: (s - 4 + 1) % 4 == 0 or s % 10 == 9
        per_epoch = [2 * sum(on_grid(s) for s in range(10 * e, 10 * e + 10)) for e in range(3)]
        assert [r["drift_fallback_count"] for r in records] == per_epoch == [6, 6, 6]
        assert all(r["gamma_norm_max"] == 0 for r in records)
