"""``learning_rate="auto"``: the Stein-virial criterion against SGLD's closed-form stationary
variance on Gaussians, the stability estimate, the choice, reproducibility and continuation."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.chains import rate_grid, step_size
from sgrld.chains.rate_halving import HALVING, halve_learning_rate

LAMBDAS = jnp.array([1.0, 25.0])
"""The Hessian of ``U = ½ Σ λ_i θ_i²`` (N = 1, full batch): condition number 25."""


def quadratic(metric=None, **kwargs):
    u = sgrld.potential(lambda th, b: -0.5 * jnp.sum(LAMBDAS * th**2) + 0.0 * b, None, 1)
    return sgrld.sgrld(
        u, metric or sgrld.metrics.identity(), learning_rate="auto", num_data=1, **kwargs
    )


def batch_fn(key):
    del key
    return jnp.zeros(1)  # one row: the potential needs no data (full batch)


def predicted_score(lr: float) -> float:
    """D of SGLD at ``lr`` on the quadratic: in direction i the stationary variance of
    ``θ ← (1 − lr·λ_i)θ + √(2·lr)ξ`` is ``1/(λ_i(1 − lr·λ_i/2))``, so ``v_i = 1/(1 − lr·λ_i/2)``,
    and D is the mean of ``ρ(v_i) = ((v_i − 1)/(v_i + 1))²``."""
    v = 1.0 / (1.0 - lr * np.asarray(LAMBDAS) / 2.0)
    return float(np.mean(((v - 1.0) / (v + 1.0)) ** 2))


def target_states(sampler, key, chains):
    """Chains started from the target itself: no transient in the window."""
    draws = jax.random.normal(key, (chains, 2)) / jnp.sqrt(LAMBDAS)
    return jax.vmap(sampler.init)(draws)


@pytest.mark.long
@pytest.mark.statistical(seed=0)
def test_score_matches_the_discrete_time_stationary_variance(stat_seed):
    """On a Gaussian, D(lr) estimates ``mean_i ρ(1/(1 − lr·λ_i/2))`` from SGLD's exact
    discrete-time variance inflation, within four of its own jackknife standard errors (plus
    0.0005 for the window's finite length) at three rates, from 1.3 % to 167 % inflation.

    False-failure probability: ≤ 0.001 (three normal deviations beyond 4 se: 3 × 6e-5; the
    jackknife over 4 × 64 groups; 20 seeds checked by hand all passed).
    """
    s = quadratic()
    key = jax.random.key(stat_seed)
    rates = (0.05, 0.02, 0.002)  # lr·λ_max = 1.25, 0.5, 0.05: v_max = 2.67, 1.33, 1.03
    with pytest.warns(RuntimeWarning, match="at the edge of the rates tried"):  # 0.002: least
        choice, _ = step_size.choose_learning_rate(
            key,
            s.rate_search,
            target_states(s, key, 64),
            batch_fn,
            800,
            candidates=rates,
            extensions=0,
        )
    for lr, score, error in zip(rates, choice.scores, choice.errors, strict=True):
        assert abs(score - predicted_score(lr)) <= 4 * error + 0.0005, (lr, score, error)


def test_stability_rate_is_two_over_the_top_curvature():
    s = quadratic()
    stable = rate_grid.stability_rate(jax.random.key(0), s.rate_search, jnp.ones(2), batch_fn)
    assert stable == pytest.approx(2.0 / 25.0, rel=1e-3)


def test_stability_rate_sees_the_warmed_metric():
    """RMSprop warmed at θ = (0.5, 2) on full batches: V = g² = (0.25, 2500), floored at
    (1 − 0.9)·mean V = 125 (:func:`sgrld.metrics.metric.freeze`), so G⁻¹H = diag(1/√125, 25/50):
    the top eigenvalue is 0.5 and the stable rate 4."""
    s = quadratic(sgrld.metrics.rmsprop(decay=0.9))
    start = jnp.array([0.5, 2.0])
    stable = rate_grid.stability_rate(jax.random.key(0), s.rate_search, start, batch_fn)
    assert stable == pytest.approx(4.0, rel=1e-3)


def test_stability_rate_of_monge_is_its_metric_in_the_typical_set():
    """Far out on the stiff axis the gradient (0, 100) would shrink Monge's stiff direction
    10⁴-fold; in the typical set its mean gradient is about 0 and its metric the identity, whose
    stable rate 2/25 is the one used."""
    s = quadratic(sgrld.metrics.monge(alpha2=1.0, decay=0.0))
    start = jnp.array([0.0, 4.0])
    stable = rate_grid.stability_rate(jax.random.key(0), s.rate_search, start, batch_fn)
    assert stable == pytest.approx(2.0 / 25.0, rel=1e-3)


@pytest.mark.long
@pytest.mark.statistical(seed=1)
def test_choice_is_the_largest_rate_within_the_tolerance(stat_seed):
    """The grid from the stability rate 2/25: 0.72, 0.24 and 0.08 are unstable, 0.0267 inflates
    the stiff variance by 50 % (D = 0.020), 0.0089 by 12.5 % (D = 0.0017 ≤ 0.0025): the choice.

    False-failure probability: ≤ 0.001 (D at 0.0089 must come out under 0.0025 + 2·se and D at
    0.0267 over 0.0075: each more than 4 se from its mean at 64 chains).
    """
    s = quadratic()
    key = jax.random.key(stat_seed)
    choice, states = step_size.choose_learning_rate(
        key, s.rate_search, target_states(s, key, 64), batch_fn, 800
    )
    assert choice.candidates[4] == pytest.approx(2.0 / 25.0 / 9.0, rel=1e-3)
    assert choice.learning_rate == choice.candidates[4]
    assert not choice.at_edge
    assert np.isinf(choice.scores[0]) and np.isinf(choice.scores[1])  # lr·λ = 18, 6: diverged
    assert int(states.step[0]) == 800


@pytest.mark.long
@pytest.mark.statistical(seed=2)
def test_a_longer_run_gets_the_rate_of_least_predicted_error(stat_seed):
    """The same grid for a run of 800 steps of 256 chains. The error of D's estimate by the run
    is its bias D(lr) (:func:`predicted_score`) plus its noise ``σ²/4``, for SGLD on the
    quadratic ``mean_i 2·τ_i/(4·n·C)`` with ``τ_i = 1/(lr·λ_i)``: at lr 0.0089, 0.0030, 0.0010
    it is 0.00173 + 0.00014, 0.00018 + 0.00043 and 0.00002 + 0.00128, so the choice is 0.0030
    (it is so for any run from about 150 to 4,300 steps: a factor 5 either way for the noise
    the pilot measures). Without the run's length the tolerance's 0.0089 stands.

    False-failure probability: ≤ 0.01 (50 seeds checked by hand: 50 chose 0.0030 and 0.0089;
    with 64 chains, whose D at 0.0030 the pilot resolves less well, 3 in 20 stopped at 0.0089).
    """
    s = quadratic()
    key = jax.random.key(stat_seed)
    states = target_states(s, key, 256)
    args = (key, s.rate_search, states, batch_fn, 800)
    long, _ = step_size.choose_learning_rate(*args, extensions=0, run_steps=800)
    short, _ = step_size.choose_learning_rate(*args, extensions=0)
    assert long.learning_rate == pytest.approx(2.0 / 25.0 / 27.0, rel=1e-3)
    assert short.learning_rate == pytest.approx(2.0 / 25.0 / 9.0, rel=1e-3)


@pytest.mark.long
def test_search_is_reproducible_and_continues_the_burn_in():
    t = sgrld.samples.targets.standard_normal()
    s = sgrld.sgrld(t.potential, sgrld.metrics.rmsprop(), learning_rate="auto", num_data=1)
    kw = dict(num_samples=50, thin=2, burn_in=400, num_chains=2)
    one = sgrld.sample(jax.random.key(3), s, t.init_params, t.batch_fn, **kw)
    two = sgrld.sample(jax.random.key(3), s, t.init_params, t.batch_fn, **kw)
    np.testing.assert_array_equal(one.params, two.params)
    assert int(one.state.step[0]) == 400 + 50 * 2  # the pilot's 100 steps are burn-in


@pytest.mark.parametrize("run_steps", [0, -5, 2.5, True])
def test_a_run_length_that_is_no_count_of_steps_is_refused(run_steps):
    s = quadratic()
    states = target_states(s, jax.random.key(0), 4)
    with pytest.raises(ValueError, match="run_steps must be None or an integer >= 1"):
        step_size.choose_learning_rate(
            jax.random.key(0), s.rate_search, states, batch_fn, 64, run_steps=run_steps
        )


def test_auto_needs_a_burn_in():
    t = sgrld.samples.targets.standard_normal()
    s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate="auto", num_data=1)
    with pytest.raises(ValueError, match="burn_in=100 is too short"):
        sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, num_samples=5, burn_in=100)


def test_auto_refuses_temperature_zero():
    t = sgrld.samples.targets.standard_normal()
    with pytest.raises(ValueError, match="temperature > 0"):
        sgrld.sgrld(
            t.potential, sgrld.metrics.identity(), learning_rate="auto", num_data=1, temperature=0
        )


@pytest.mark.long
@pytest.mark.parametrize("factory", ["sghmc", "sgnht", "adam_sgld"])
def test_every_sampler_with_a_rate_takes_auto(factory):
    t = sgrld.samples.targets.standard_normal()
    s = getattr(sgrld, factory)(t.potential, learning_rate="auto", num_data=1)
    out = sgrld.sample(
        jax.random.key(0), s, t.init_params, t.batch_fn, num_samples=20, burn_in=2000, num_chains=4
    )
    assert np.isfinite(np.asarray(out.params)).all()
    assert s.rate_search.build(0.01).rate_search is None


def test_choice_round_trips_through_json():
    choice = step_size.RateChoice(0.1, (0.3, 0.1), (float("inf"), 0.002), 64, True, (np.inf, 1e-3))
    assert step_size.RateChoice.from_dict(choice.to_dict()) == choice


def test_halving_keeps_the_better_half_and_returns_the_winners_chains():
    """From θ = 10 on the quadratic, a score that rewards being near the mode: the largest
    stable rate wins (0.72, 0.24 and 0.08 diverge or oscillate; 0.0267 converges fastest)."""
    s = quadratic()
    states = jax.vmap(s.init)(jnp.full((4, 2), 10.0))
    candidates = rate_grid.candidate_rates(2.0 / 25.0)
    choice, ends = halve_learning_rate(
        jax.random.key(0),
        s.rate_search,
        states,
        batch_fn,
        lambda params: -jnp.mean(params**2, axis=(1, 2)),
        400,
        candidates,
    )
    assert choice.learning_rate == pytest.approx(candidates[3])
    assert choice.criterion == HALVING and choice.pilot_steps == 400
    assert np.isinf(choice.scores[:2]).all()  # diverged in the first round
    assert np.isfinite(choice.scores[2:]).all()  # every other rate was scored at least once
    assert int(ends.step[0]) == 400 and ends.params.shape == (4, 2)
    assert float(jnp.abs(ends.params).max()) < 4.0  # at the target (sd 1 and 0.2), not at 10


def test_the_grid_moves_past_the_edge_its_choice_is_at():
    """A first grid far below the quadratic's stable rates (0.0089 is the best, above): its
    largest rate is chosen, so the grid moves up by its width, sharing that rate, and the choice
    is the best rate of the whole range, with every rate's score reported."""
    s = quadratic()
    key = jax.random.key(1)
    low = rate_grid.candidate_rates(2.0 / 25.0 / 729.0, 5)  # 9·s/729 … : 0.00099 … 1.2e-5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no edge warning: the choice is inside the range
        choice, states = step_size.choose_learning_rate(
            key, s.rate_search, target_states(s, key, 64), batch_fn, 400, candidates=low
        )
    assert choice.candidates[-len(low) :] == low
    assert len(choice.candidates) == 2 * len(low) - 1  # the shared rate once
    assert choice.learning_rate > low[0] and not choice.at_edge
    assert int(states.step[0]) == 400


@pytest.mark.parametrize("relax", [17, 100, 250])
def test_the_virial_pilot_freezes_the_metric_where_its_window_starts(relax):
    """``adapt_until="auto"`` resolved for the pilot: frozen from the window on, at the average
    of the statistic just before it, as the kept samples' metric is; a number stays as it is."""
    t = sgrld.samples.targets.standard_normal()
    s = sgrld.sgrld(t.potential, sgrld.metrics.rmsprop(), learning_rate="auto", num_data=1)
    a = step_size.frozen_from(s.rate_search.build(0.1), relax).adaptation
    assert a.adapt_until == relax and a.averaged
    fixed = sgrld.sgrld(
        t.potential, sgrld.metrics.rmsprop(), learning_rate=0.1, num_data=1, adapt_until=None
    )
    assert step_size.frozen_from(fixed, relax) is fixed


def test_a_choice_no_rate_of_which_came_within_the_tolerance_warns():
    """Chains started 10⁴ standard deviations out, from one point, with a pilot of 64 steps:
    no rate's chains reach the target's spread, and the least-bad choice says so."""
    s = quadratic()
    states = jax.vmap(s.init)(jnp.full((4, 2), 1e4))
    with pytest.warns(RuntimeWarning, match="no rate tried came within"):
        step_size.choose_learning_rate(
            jax.random.key(0), s.rate_search, states, batch_fn, 64, extensions=0
        )


@pytest.mark.long
@pytest.mark.statistical(seed=1)
def test_a_one_dimensional_pilot_runs_enough_chains(stat_seed):
    """SGHMC (friction 0.1) on N(0, 1) with 4 chains: the grid's 0.667 inflates the variance by
    20 % (D = 0.008, measured over 256 chains), 0.222 by 6 %. With 4 chains the pilot's D at
    0.667 came out at 0, its noise correction clipped, and was chosen at 3 of 8 seeds (this
    seed among them); the pilot now runs copies of the chains up to
    :data:`~sgrld.chains.step_size.PILOT_COORDINATES`, and the run keeps its 4.

    False-failure probability: ≤ 0.03 (0 of 100 seeds chose 0.667 or above).
    """
    t = sgrld.samples.targets.standard_normal()
    s = sgrld.sghmc(t.potential, learning_rate="auto", num_data=1)
    key = jax.random.key(stat_seed)
    states = jax.vmap(s.init)(jax.random.normal(key, (4,)))
    choice, ends = step_size.choose_learning_rate(
        key, s.rate_search, states, t.batch_fn, 500, run_steps=8000
    )
    assert choice.learning_rate < 0.3
    assert ends.params.shape == (4,)


@pytest.mark.long
@pytest.mark.statistical(seed=0)
def test_monge_without_alpha2_is_searched_beside_the_rate_and_states_it(stat_seed):
    """``monge()`` (α² not given) with ``learning_rate="auto"``: each of
    :data:`~sgrld.metrics.monge.SEARCHED_ALPHA2` is searched; on the quadratic, started near
    the mode, both pass the virial's tolerance, so the smaller, 0 (the identity metric), is kept,
    its rate is the identity's own search's, and the run states it.

    False-failure probability: ≤ 0.1 (12 of 12 seeds kept α² 0; with a pilot of 100 steps and
    4 chains, seed 0's α² = 0 failed the tolerance and 0.1 was kept).
    """
    u = sgrld.potential(lambda th, b: -0.5 * jnp.sum(LAMBDAS * th**2) + 0.0 * b, None, 1)
    monge = sgrld.sgrld(u, sgrld.metrics.monge(), learning_rate="auto", num_data=1)
    assert monge.rate_search.option[:2] == ("alpha2", (0.1, 0.0))
    kw = dict(num_samples=20, thin=5, burn_in=1600, num_chains=16)
    start = jnp.array([0.3, 0.1])
    key = jax.random.key(stat_seed)
    out = sgrld.sample(key, monge, start, batch_fn, **kw)
    plain = sgrld.sample(key, quadratic(), start, batch_fn, **kw)
    assert "α² 0 and lr" in out.guarantee and "α² tried: 0.1: lr" in out.guarantee
    assert out.guarantee.startswith("exact: constant metric (not adaptive)")
    rate = lambda s: s.guarantee.split(" and lr ")[-1].split(" ")[0]  # noqa: E731
    assert rate(out) == plain.guarantee.split("; lr ")[1].split(" ")[0]
    np.testing.assert_array_equal(out.params, plain.params)  # the identity's run, bit for bit


def test_monge_alpha2_auto_with_a_number_is_the_published_metric():
    g = {"w": jnp.array([3.0, -1.0])}
    auto, published = sgrld.metrics.monge(decay=0.0), sgrld.metrics.monge(1.0, decay=0.0)
    state = lambda m: m.update(m.init(g), g)  # noqa: E731
    np.testing.assert_array_equal(
        auto.inv(state(auto), g)["w"], published.inv(state(published), g)["w"]
    )
    u = sgrld.potential(lambda th, b: -0.5 * jnp.sum(th**2) + 0.0 * b, None, 1)
    s = sgrld.sgrld(u, sgrld.metrics.monge(), learning_rate=0.1, num_data=1)
    assert getattr(s, "rate_search", None) is None
    with pytest.raises(ValueError, match='alpha2 must be a number >= 0 or "auto"'):
        sgrld.metrics.monge(alpha2="aut")
