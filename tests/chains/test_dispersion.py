"""What a new user meets in ``sgrld.sample`` (issue 53): NumPy data, the run's guarantee on its
result, chains that start apart, and a warning naming the chains that disagree at the end."""

from __future__ import annotations

import warnings

import arviz_stats
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.chains.dispersion import (
    ChainsDisagreeWarning,
    disagreeing,
    split_rhat,
    starts,
    warn_if_chains_disagree,
)


def regression(n=100):
    """The README's Bayesian linear regression on NumPy arrays (as ``load_dataset`` gives)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=n).astype(np.float32)
    y = (2.0 * x + 0.5 * rng.normal(size=n)).astype(np.float32)
    loglik = lambda w, batch: -0.5 * ((batch[1] - w * batch[0]) / 0.5) ** 2
    potential = sgrld.potential(loglik, lambda w: -0.5 * w**2, num_data=n)
    return x, y, potential


@pytest.mark.parametrize("num_chains", [None, 3])
def test_numpy_data_and_params_sample(num_chains):
    x, y, potential = regression()
    sampler = sgrld.sgrld(potential, sgrld.metrics.identity(), learning_rate=0.01, num_data=100)
    out = sgrld.sample(
        jax.random.key(0),
        sampler,
        np.zeros((), np.float32),
        sgrld.minibatch_fn((x, y), batch_size=10),
        num_samples=20,
        thin=5,
        burn_in=500,
        num_chains=num_chains,
    )
    assert np.shape(out.params) == ((20,) if num_chains is None else (3, 20))
    assert np.all(np.abs(np.asarray(out.params) - 2.0) < 0.5)


def test_minibatch_fn_of_numpy_arrays_draws_under_jit():
    fn = sgrld.minibatch_fn((np.arange(10.0), np.arange(10, dtype=np.int64)), 4)
    xs, ys = jax.jit(fn)(jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(xs), np.asarray(ys, np.float32))


def test_result_states_the_guarantee_in_repr_and_arviz():
    x, y, potential = regression()
    sampler = sgrld.sgrld(
        potential,
        sgrld.metrics.rmsprop(),
        learning_rate=0.01,
        num_data=100,
        correction="hutchinson",
    )
    out = sgrld.sample(
        jax.random.key(0),
        sampler,
        jnp.zeros(()),
        sgrld.minibatch_fn((jnp.asarray(x), jnp.asarray(y)), batch_size=100),
        num_samples=50,
        thin=2,
        burn_in=400,
        num_chains=2,
    )
    line = (
        "exact: metric frozen at step 300 (window average of the statistic); Γ only before the "
        "freeze"
    )
    assert out.guarantee == line
    assert repr(out) == f"Samples(params=(2, 50), guarantee={line!r})"
    idata = sgrld.to_arviz(out)
    assert idata.posterior.attrs["guarantee"] == line
    assert idata.sample_stats.attrs["guarantee"] == line
    assert jax.tree.map(lambda a: a[0], out).guarantee == line  # not a leaf
    assert float(jnp.abs(out.info.gamma_norm).max()) == 0.0  # the reason: the freeze


def test_chains_start_apart_by_default_reproducibly_and_shared_on_request():
    t = sgrld.samples.targets.standard_normal()
    s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=1e-6, num_data=1)
    kw = dict(num_samples=1, num_chains=4)
    first = sgrld.sample(jax.random.key(0), s, jnp.full((), 3.0), t.batch_fn, **kw).params[:, 0]
    again = sgrld.sample(jax.random.key(0), s, jnp.full((), 3.0), t.batch_fn, **kw).params[:, 0]
    np.testing.assert_array_equal(first, again)
    assert len(set(np.round(np.asarray(first), 3).tolist())) == 4
    assert float(jnp.std(first)) > 1.0  # jitter of sd |3|, the start's own size
    shared = sgrld.sample(
        jax.random.key(0), s, jnp.full((), 3.0), t.batch_fn, init="shared", **kw
    ).params[:, 0]
    np.testing.assert_allclose(shared, 3.0, atol=1e-2)
    stacked = sgrld.sample(
        jax.random.key(0), s, jnp.arange(4.0) * 10, t.batch_fn, init="stacked", **kw
    ).params[:, 0]
    np.testing.assert_allclose(stacked, [0.0, 10.0, 20.0, 30.0], atol=1e-2)


def test_starts_jitter_by_each_leafs_size_and_keep_integers():
    params = {"big": jnp.full(2000, 10.0), "zero": jnp.zeros(2000), "n": jnp.arange(3)}
    x = starts(jax.random.key(1), params, 2, "jitter")
    assert abs(float(jnp.std(x["big"] - 10.0)) - 10.0) < 0.5
    assert abs(float(jnp.std(x["zero"])) - np.sqrt(50.0)) < 0.3  # the whole start's rms
    np.testing.assert_array_equal(x["n"], np.stack([np.arange(3)] * 2))
    nothing = starts(jax.random.key(1), {"zero": jnp.zeros(2000)}, 2, "jitter")["zero"]
    assert abs(float(jnp.std(nothing)) - 1.0) < 0.05
    with pytest.raises(ValueError, match="lead with num_chains = 3"):
        starts(jax.random.key(1), params, 3, "stacked")
    with pytest.raises(ValueError, match="init must be one of"):
        starts(jax.random.key(1), params, 3, "prior")


def test_split_rhat_is_arvizs_rank_rhat():
    """Bulk and folded: chains apart in location, and chains of one location but unequal scale."""
    rng = np.random.default_rng(3)
    for shift, scale in ((0.0, 0.0), (0.3, 0.0), (2.0, 0.0), (0.0, 1.0)):
        x = rng.normal(size=(4, 201)) * (1 + scale * np.arange(4)[:, None])
        x += shift * np.arange(4)[:, None]
        assert split_rhat(x) == pytest.approx(arviz_stats.rhat(x, method="rank"), rel=1e-9)
    assert np.isnan(split_rhat(np.ones((3, 50)))) and np.isnan(split_rhat(np.zeros((3, 3))))


def test_disagreeing_names_the_stuck_chains_or_all():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 300))
    assert disagreeing(x)[1] == []
    x[[1, 4]] += 4.0
    assert disagreeing(x)[1] == [1, 4]
    walks = np.cumsum(rng.normal(size=(3, 300)), axis=1) * 10
    assert disagreeing(walks)[1] == [0, 1, 2]


def test_warning_names_the_chain_once():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 200))
    x[2] += 3.0
    named = r"chain\(s\) 2 \(potential \S+ ± \S+\) disagree"
    with pytest.warns(ChainsDisagreeWarning, match=named) as caught:
        assert warn_if_chains_disagree(x)
    assert len(caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not warn_if_chains_disagree(x[[0, 1, 3]])


def test_sample_warns_when_a_chain_stays_behind():
    t = sgrld.samples.targets.standard_normal()
    s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
    far = jnp.asarray([0.0, 0.0, 0.0, 1e3])  # the last far away: its first draws on the way
    with pytest.warns(ChainsDisagreeWarning, match=r"chain\(s\) 3 \(potential "):
        sgrld.sample(
            jax.random.key(0), s, far, t.batch_fn, num_samples=200, num_chains=4, init="stacked"
        )
