"""Schedules (constant, polynomial, cyclical) and the engine's keep predicate for cyclical
collection. Deterministic: no failure budget needed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
import sgrld_app
from sgrld.chains.engine import Engine, chain_keys, count_kept, is_kept, random_batches
from sgrld.numerics import schedules


def test_values():
    assert float(schedules.constant(0.3)(10)) == pytest.approx(0.3)
    p = schedules.polynomial(0.1, offset=10.0, power=0.55)
    t = np.arange(50)
    np.testing.assert_allclose(jax.vmap(p)(t), 0.1 * (1 + t / 10) ** -0.55, rtol=1e-6)
    c = schedules.cyclical(1.0, num_steps=100, num_cycles=4, exploration=0.8, temperature=0.5)
    lr = np.asarray(jax.vmap(c.learning_rate)(jnp.arange(100)))
    r = (np.arange(100) % 25) / 25
    np.testing.assert_allclose(lr, 0.5 * (np.cos(np.pi * r) + 1), rtol=1e-5, atol=1e-6)
    keep = np.asarray(jax.vmap(c.keep)(jnp.arange(100)))
    np.testing.assert_array_equal(keep, r >= 0.8)
    temp = np.asarray(jax.vmap(c.temperature)(jnp.arange(100)))
    np.testing.assert_array_equal(temp, np.where(r >= 0.8, 0.5, 0.0))
    assert c.cycle_length == 25


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: schedules.cyclical(0.1, num_steps=100, num_cycles=0), "num_cycles"),
        (lambda: schedules.cyclical(0.1, num_steps=0, num_cycles=1), "num_steps"),
        (lambda: schedules.cyclical(0.1, num_steps=3, num_cycles=4), "num_cycles"),
        (lambda: schedules.cyclical(0.1, num_steps=9, num_cycles=2, exploration=1), "exploration"),
        (lambda: schedules.cyclical(-0.1, num_steps=9, num_cycles=2), "value"),
        (lambda: schedules.cyclical(0.1, num_steps=9, num_cycles=2, temperature=-1), "temperature"),
        (lambda: schedules.polynomial(0.1, power=-1.0), "power"),
        (lambda: schedules.polynomial(0.1, offset=0.0), "offset"),
        (lambda: schedules.constant(float("nan")), "value"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_count_kept_matches_is_kept():
    keep = lambda s: (s % 7) >= 3
    for start, stop, burn, thin in [(0, 60, 5, 2), (13, 41, 0, 3), (10, 10, 0, 1)]:
        expected = sum(bool(is_kept(s, burn, thin)) and bool(keep(s)) for s in range(start, stop))
        assert count_kept(start, stop, burn, thin, keep) == expected
        assert count_kept(start, stop, burn, thin, None) == sum(
            bool(is_kept(s, burn, thin)) for s in range(start, stop)
        )


def _engine_run(keep, num_steps=40):
    t = sgrld.samples.targets.standard_normal()
    s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
    engine = Engine(s, random_batches(t.batch_fn), burn_in=4, thin=2, keep=keep)
    carry = engine.init(s.init(t.init_params), num_chains=2)
    return engine.run_chunk(carry, chain_keys(jax.random.key(0), 2), None, start=0,
                            num_steps=num_steps)  # fmt: skip


def test_engine_keep_predicate():
    c = schedules.cyclical(0.1, num_steps=40, num_cycles=4, exploration=0.5)
    carry, chunk, _ = _engine_run(c.keep)
    steps = np.asarray(chunk.steps)
    assert steps.tolist() == [s for s in range(40) if s >= 4 and (s - 3) % 2 == 0 and s % 10 >= 5]
    # the default rule is unchanged, and an always-true predicate keeps the same samples
    base_carry, base, _ = _engine_run(None)
    _, always, _ = _engine_run(lambda s: s >= 0)
    for a, b in zip(jax.tree.leaves(base), jax.tree.leaves(always), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(carry.state.params, base_carry.state.params)


def test_cyclical_sghmc_collects_only_in_sampling_phases():
    """cSGHMC end to end: ``sample(..., keep=c.keep)`` returns samples from sampling phases only,
    and the exploration phases run at temperature 0 (the learning rate is cosine)."""
    t = sgrld.samples.targets.standard_normal()
    c = schedules.cyclical(0.2, num_steps=200, num_cycles=4, exploration=0.6)
    s = sgrld.sghmc(
        t.potential, learning_rate=c.learning_rate, temperature=c.temperature, num_data=1,
        friction=0.5,
    )  # fmt: skip
    out = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, num_samples=60,
                       num_chains=2, keep=c.keep, num_chunks=3)  # fmt: skip
    assert out.params.shape == (2, 60) and int(out.state.step[0]) == 150  # 3 cycles of 20 kept
    assert np.all(np.asarray(out.info.kinetic) > 0)
    lrs = np.asarray(out.info.learning_rate[0])
    positions = (np.arange(150)[np.asarray(jax.vmap(c.keep)(jnp.arange(150)))] % 50) / 50
    np.testing.assert_allclose(lrs, 0.1 * (np.cos(np.pi * positions) + 1), rtol=1e-5)
    with pytest.raises(TypeError, match="keep"):
        Engine(s, random_batches(t.batch_fn), keep=3)


@pytest.mark.parametrize("kind", ["sgrld", "sgrld_corrected", "adam_sgld"])
def test_temperature_schedule_of_the_langevin_samplers_equals_the_constant_of_each_step(kind):
    """sgrld (with and without Γ) and adam_sgld take ``temperature`` as a schedule: each step is
    the step of the constant temperature that the schedule gives there (0 in a cyclical
    exploration phase: the noiseless step; the sampling phase's T there)."""
    u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, lambda w: -0.5 * w**2, 4)
    rms = sgrld.metrics.rmsprop(decay=0.9)

    def make(temperature):
        if kind == "adam_sgld":
            return sgrld.adam_sgld(u, 0.05, num_data=4, temperature=temperature)
        correction = "hutchinson" if kind == "sgrld_corrected" else "none"
        return sgrld.sgrld(
            u, rms, learning_rate=0.05, num_data=4, temperature=temperature,
            correction=correction, correction_warmup=0,
        )  # fmt: skip

    c = schedules.cyclical(0.05, num_steps=8, num_cycles=2, exploration=0.5, temperature=0.7)
    scheduled = make(c.temperature)
    state = scheduled.init(jnp.ones(()))
    batch = jnp.array([0.5, -1.0])
    for t in range(8):
        key = jax.random.key(t)
        want, want_info = make(float(c.temperature(t))).step(key, state, batch)
        state, info = jax.jit(scheduled.step)(key, state, batch)
        np.testing.assert_allclose(state.params, want.params, rtol=1e-6, err_msg=f"step {t}")
        assert float(info.potential) == pytest.approx(float(want_info.potential), rel=1e-6)
    exploring = make(c.temperature).step(jax.random.key(0), scheduled.init(jnp.ones(())), batch)[0]
    noiseless = make(0.0).step(jax.random.key(1), scheduled.init(jnp.ones(())), batch)[0]
    np.testing.assert_array_equal(exploring.params, noiseless.params)  # T(0) = 0: no noise


@pytest.mark.parametrize("bad", [-0.5, float("nan")])
def test_a_negative_or_nan_constant_temperature_is_refused(bad):
    u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, lambda w: -0.5 * w**2, 4)
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
        sgrld.sgrld(u, sgrld.metrics.identity(), learning_rate=0.1, num_data=4, temperature=bad)
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
        sgrld.adam_sgld(u, 0.1, num_data=4, temperature=bad)


TINY_RUN = [
    "data.name=digits", "data.batch_size=32", "model.widths=[8]", "prior.kind=gaussian",
    "sampler.learning_rate=0.05", "run.epochs=2", "run.burn_in=0", "run.thin=1",
]  # fmt: skip
"""Digits (1,257 training images after validation: 39 steps an epoch), a tiny MLP."""


def test_config_cyclical_schedule_keeps_only_sampling_phase_steps():
    """``[schedule] kind = "cyclical"``: the run keeps exactly the sampling-phase steps of its
    cycles, and its learning rate follows the cosine of each cycle."""
    from sgrld_app.from_config import build_experiment
    from sgrld_app.launch import run_config
    from sgrld_app.sampler_from_config import cyclical_of

    cfg = sgrld_app.config.load_config(
        None, [*TINY_RUN, "schedule.kind=cyclical", "schedule.cycles=3", "schedule.exploration=0.6"]
    )
    result = run_config(cfg, out=None)
    steps = len(build_experiment(cfg).train[0]) // 32
    unit = cyclical_of(cfg.schedule, 2 * steps)
    kept = np.flatnonzero(jax.vmap(unit.keep)(jnp.arange(2 * steps)))
    per_epoch = [int(np.sum((kept >= e * steps) & (kept < (e + 1) * steps))) for e in range(2)]
    assert result.status == "completed"
    assert [r["samples"] for r in result.records] == np.cumsum(per_epoch).tolist()
    assert 0 < len(kept) < 2 * steps


def test_config_polynomial_schedule_decays_the_learning_rate():
    """The default rate, ``"auto"``, chooses the schedule's scale: the sampler the search builds
    at a rate decays from it."""
    from sgrld_app.sampler_from_config import sampler_of

    cfg = sgrld_app.config.load_config(
        None, ["schedule.kind=polynomial", "schedule.offset=10", "schedule.power=1"]
    )
    u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, lambda w: -0.5 * w**2, 4)
    searched = sampler_of(cfg.sampler, u, 4, schedule=cfg.schedule, num_steps=100)
    lr = 0.25
    s = searched.rate_search.build(lr)
    state, lrs = s.init(jnp.zeros(())), []
    for t in range(21):
        state, info = s.step(jax.random.key(t), state, jnp.ones(2))
        lrs.append(float(info.learning_rate))
    np.testing.assert_allclose([lrs[0], lrs[10], lrs[20]], [lr, lr / 2, lr / 3], rtol=1e-6)


@pytest.mark.parametrize(
    "overrides,match",
    [
        (["schedule.kind=weekly"], "schedule.kind"),
        (["schedule.kind=cyclical", "schedule.exploration=1.0"], "exploration: must be < 1"),
        (["schedule.kind=cyclical", "schedule.cycles=0"], "schedule.cycles: must be >= 1"),
        (["schedule.kind=polynomial", "schedule.offset=0"], "schedule.offset: must be > 0"),
        (["schedule.kind=polynomial", "schedule.power=nan"], "schedule.power: must be finite"),
        (["schedule.kind=cyclical", "sampler.kind=isgd"], "i-SGD's step size is fixed"),
    ],
)
def test_bad_schedule_configs_name_the_key(overrides, match):
    with pytest.raises(sgrld_app.config.ConfigError, match=match):
        sgrld_app.config.load_config(None, overrides)


def test_cyclical_schedule_without_a_sampling_step_or_with_too_many_cycles_is_refused():
    from sgrld_app.from_config import check_schedule

    cfg = sgrld_app.config.load_config(
        None, [*TINY_RUN, "schedule.kind=cyclical", "schedule.cycles=2", "run.thin=15"]
    )
    with pytest.raises(sgrld_app.config.ConfigError, match="no sample falls in a sampling phase"):
        check_schedule(cfg, num_train=320)  # 20 steps, cycles of 10: step 14 is exploration
    cfg = sgrld_app.config.load_config(
        None, [*TINY_RUN, "schedule.kind=cyclical", "schedule.cycles=50"]
    )
    with pytest.raises(sgrld_app.config.ConfigError, match="schedule.cycles = 50 is more than"):
        check_schedule(cfg, num_train=320)
