"""``sgrld.sample`` compiles a run's chunks once: a second call with the same sampler, batch
function and shapes compiles nothing, and gives what a first call gives."""

from __future__ import annotations

import contextlib

import jax
import numpy as np
import pytest
from jax import monitoring

import sgrld

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
"""The event JAX records once per XLA compilation (jit, AOT ``compile``, op by op)."""


@contextlib.contextmanager
def compilations():
    """A list that counts XLA compilations while the block runs (its length)."""
    seen: list[float] = []

    def listen(event, seconds, **_):
        if event == COMPILE_EVENT:
            seen.append(seconds)

    monitoring.register_event_duration_secs_listener(listen)
    try:
        yield seen
    finally:
        monitoring.unregister_event_duration_listener(listen)


def rmsprop(target):
    return sgrld.sgrld(target.potential, sgrld.metrics.rmsprop(), learning_rate=0.05, num_data=1)


def test_a_second_call_compiles_nothing_and_samples_as_a_first_call():
    t = sgrld.samples.targets.standard_normal()
    s = rmsprop(t)  # adapt_until="auto": resolved for the burn-in on every call
    kw = dict(num_samples=20, thin=5, burn_in=10, num_chains=3)
    with compilations() as first:
        a = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, **kw)
    with compilations() as again:
        b = sgrld.sample(jax.random.key(1), s, t.init_params, t.batch_fn, **kw)
        c = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, **kw)
    assert len(first) >= 1 and len(again) == 0, (len(first), len(again))
    fresh = sgrld.sample(jax.random.key(0), rmsprop(t), t.init_params, t.batch_fn, **kw)
    jax.tree.map(np.testing.assert_array_equal, (c.params, c.state), (a.params, a.state))
    jax.tree.map(np.testing.assert_array_equal, (a.params, a.state), (fresh.params, fresh.state))
    assert not np.array_equal(a.params, b.params)


@pytest.mark.parametrize(
    "change",
    [
        dict(num_chains=4),  # other shapes
        dict(thin=3),  # another thinning rule, baked into the chunk
        dict(num_chunks=4),  # other chunk sizes
    ],
)
def test_another_setting_compiles_its_own_chunk_and_samples_as_a_fresh_sampler(change):
    t = sgrld.samples.targets.standard_normal()
    s = rmsprop(t)
    kw = dict(num_samples=20, thin=5, burn_in=10, num_chains=3)
    sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, **kw)
    with compilations() as seen:
        got = sgrld.sample(jax.random.key(2), s, t.init_params, t.batch_fn, **{**kw, **change})
    want = sgrld.sample(jax.random.key(2), rmsprop(t), t.init_params, t.batch_fn, **kw | change)
    assert len(seen) >= 1 or "num_chunks" in change  # 4 chunks of 5 samples: one new size
    jax.tree.map(np.testing.assert_array_equal, (got.params, got.state), (want.params, want.state))


def test_a_resumed_call_on_the_same_sampler_continues_its_chains():
    """The continuation from ``state`` (another start, so another burn-in rule and freeze) on a
    sampler whose first chunks are compiled equals one run, bit for bit (its metric frozen in
    the burn-in, as a continuation without burn-in keeps it: ``auto_freeze``)."""
    t = sgrld.samples.targets.standard_normal()
    s = rmsprop(t)
    kw = dict(thin=4, num_chains=2)
    whole = sgrld.sample(
        jax.random.key(0), s, t.init_params, t.batch_fn, num_samples=10, burn_in=8, **kw
    )
    first = sgrld.sample(
        jax.random.key(0), s, t.init_params, t.batch_fn, num_samples=4, burn_in=8, **kw
    )
    rest = sgrld.sample(
        jax.random.key(0), s, None, t.batch_fn, num_samples=6, state=first.state, **kw
    )
    np.testing.assert_array_equal(np.concatenate([first.params, rest.params], 1), whole.params)
    same = lambda x: (x.step, x.params, x.metric_state)  # a continuation holds no freeze window
    jax.tree.map(np.testing.assert_array_equal, same(rest.state), same(whole.state))


def test_a_second_call_with_an_auto_rate_compiles_nothing():
    """``learning_rate="auto"``: the search's programs (stability, warm start, pilot, the
    start's temperature) are kept with the run's (:func:`sgrld.chains.programs.kept`)."""
    t = sgrld.samples.targets.standard_normal()
    s = sgrld.sgrld(t.potential, sgrld.metrics.rmsprop(), learning_rate="auto", num_data=1)
    kw = dict(num_samples=20, thin=5, burn_in=128, num_chains=3)
    with compilations() as first:
        a = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, **kw)
    with compilations() as again:
        b = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, **kw)
    assert len(first) >= 4 and len(again) == 0, (len(first), len(again))
    assert a.guarantee == b.guarantee and "chosen by the Stein virial" in a.guarantee
    jax.tree.map(np.testing.assert_array_equal, a.params, b.params)
