"""Γ's kick tamed to the step's noise (``gamma_kick_limit``): the formula on a diagonal metric,
the untamed step as the limit grows, no kick as it shrinks, the argument's errors, and corrected
Monge on its 1-D target with the kick tamed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import sgrld
from sgrld.parts.preconditioning import tame_gamma
from sgrld_reproductions.stationary_1d import rows as rows1
from tests.helpers import METRICS
from tests.samplers.test_sampler import batch, init_params, quartic_potential

ADAPTIVE = [name for name in sorted(METRICS) if name != "identity"]
LR, TEMPERATURE, N = 1.0, 1.5, 10


def _steps(name, limits, lr=LR):
    """Flat params after one step from the same adapted state and key: without Γ, with the exact
    Γ untamed, and with it tamed at each of ``limits``; and the corrected step's metric state."""
    potential = quartic_potential(num_data=N)
    kw = dict(learning_rate=lr, num_data=N, temperature=TEMPERATURE, correction_warmup=0)
    plain = sgrld.sgrld(potential, METRICS[name](), correction="none", **kw)

    def corrected(limit):
        return sgrld.sgrld(
            potential,
            METRICS[name](),
            correction="exact",
            correction_scale=1.0,
            gamma_kick_limit=limit,
            **kw,
        )

    state = plain.init(init_params())
    plain_step = jax.jit(plain.step)
    for k in range(3):  # adapt the statistic to the path first
        state, _ = plain_step(jax.random.key(k), state, batch(k))
    key, b = jax.random.key(5), batch(7)
    flat = lambda s: np.asarray(ravel_pytree(s.params)[0], np.float64)
    without = flat(plain_step(key, state, b)[0])
    untamed, _ = corrected(None).step(key, state, b)
    tamed = [flat(corrected(limit).step(key, state, b)[0]) for limit in limits]
    return without, flat(untamed), tamed, untamed.metric_state


@pytest.mark.parametrize("name", ["rmsprop", "wenzel"])
def test_diagonal_metric_kick_follows_the_taming_formula(name):
    """(tamed step) − (step without Γ) = k·b/(b + |k|), k the untamed kick and b = limit·σ_i
    with σ_i = √(2·lr·T/N·(G⁻¹)_ii), exact for a diagonal metric."""
    limit = 0.5
    without, untamed, (tamed,), metric_state = _steps(name, [limit])
    kick = untamed - without
    metric = METRICS[name]()
    ones = jax.tree.map(jnp.ones_like, init_params())
    inv_diag = np.asarray(ravel_pytree(metric.inv(metric_state, ones))[0], np.float64)
    bound = limit * np.sqrt(2 * LR * TEMPERATURE / N * inv_diag)
    expected = kick * bound / (bound + np.abs(kick))
    ratio = np.abs(kick) / bound
    assert ratio.max() > 0.2  # some kicks are tamed by a sixth or more: the test can detect it
    np.testing.assert_allclose(tamed - without, expected, rtol=1e-3, atol=1e-4 * np.abs(kick).max())


@pytest.mark.parametrize("name", ADAPTIVE)
def test_large_limit_is_the_untamed_step_and_small_limit_drops_the_kick(name):
    without, untamed, (loose, tight), _ = _steps(name, [1e12, 1e-9])
    kick = np.abs(untamed - without).max()
    assert kick > 1e-4
    np.testing.assert_allclose(loose, untamed, rtol=1e-6, atol=1e-6 * kick)
    np.testing.assert_allclose(tight, without, rtol=1e-6, atol=1e-6 * kick)


def test_tamed_kick_is_at_most_the_limit_times_the_noise():
    """Per leaf noise scales (SGHMC's), a zero bound (no noise) removes the kick."""
    gamma = {"a": jnp.array([1e6, -1e6, 0.0]), "b": jnp.array([5.0])}
    spread = {"a": jnp.array([2.0, 0.5, 1.0]), "b": jnp.array([1.0])}
    noise = {"a": jnp.float32(0.1), "b": jnp.float32(0.0)}
    out = tame_gamma(gamma, spread, jnp.float32(1.0), noise, 3.0)
    np.testing.assert_allclose(out["a"], [0.6, -0.15, 0.0], rtol=1e-5)
    assert float(out["b"][0]) == 0.0


def test_gamma_kick_limit_errors():
    potential = quartic_potential()
    kw = dict(learning_rate=0.1, num_data=10)
    for metric, mode in ((sgrld.metrics.monge(), "none"), (sgrld.metrics.rmsprop(), "auto")):
        with pytest.raises(ValueError, match="needs correction"):  # "auto": none for RMSprop
            sgrld.sgrld(potential, metric, correction=mode, gamma_kick_limit=1.0, **kw)
    for bad in (0.0, -1.0, "1", True, float("nan")):
        with pytest.raises(ValueError, match="gamma_kick_limit must be"):
            sgrld.sgrld(
                potential,
                sgrld.metrics.monge(),
                correction="hutchinson",
                gamma_kick_limit=bad,
                **kw,
            )


@pytest.mark.long
@pytest.mark.statistical(seed=0)
def test_tamed_corrected_monge_samples_the_target(stat_seed):
    """Rensmeyer & Niggemann's N(0, 1) with Monge (α² = 1, decay 0.9) and the full Γ, tamed at
    one noise sd: 512 chains × 5 time units after a burn-in of 10 (the budget of
    ``test_corrected_monge_samples_the_target``: floor ≈ 0.026, TV ≈ 0.03). Without Γ the TV is
    0.24, so a taming that removed the kick fails.

    False-failure probability: ≤ 3.2e-5 (1 TV bound 4 noise sds away).
    """
    curve = next(c for c in rows1.curves() if c.key == "monge-c")

    def make():
        return sgrld.sgrld(
            sgrld.samples.targets.standard_normal().potential,
            sgrld.metrics.monge(alpha2=1.0, decay=0.9),
            learning_rate=curve.learning_rate,
            num_data=1,
            correction="hutchinson",
            correction_scale=1.0,
            adapt_until=None,
            gamma_kick_limit=1.0,
        )

    result = rows1.run_curve(jax.random.key(stat_seed), curve._replace(make=make), 512, 5.0)
    assert result.floor < 0.03 and result.diverged == 0
    assert result.tv_target < 0.05
