"""The sampler contract (STYLE.md), one test for every factory that returns a ``Sampler``:
``init(params) -> state``; ``step(key, state, batch) -> (state, info)`` jit-compiled once, the
state's type, shapes and dtypes invariant (so ``lax.scan`` runs it), the same key giving the same
step and another key another, and an ``info`` that says the step was finite.

Every sampler runs on the quartic potential of ``tests.helpers`` (N = 10) with a bfloat16 leaf.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.samplers import baselines
from sgrld.samplers.isgd import NoiseClippingWarning
from tests.helpers import METRICS
from tests.samplers.test_sampler import batch, init_params, quartic_potential

# the quartic model is not made of Flax Dense layers: per-example gradients (Fisher metrics,
# i-SGD, SGHMC's noise estimate) use the vmap(grad) fallback, which says so
pytestmark = pytest.mark.filterwarnings("ignore::sgrld.numerics.per_example.FallbackWarning")

LR = 0.05
ALL_METRICS = {
    **METRICS,
    "fisher_diag": lambda: sgrld.metrics.fisher_diag(decay=0.9),
    "fisher_qdiag": lambda: sgrld.metrics.fisher_qdiag(decay=0.9),
    "fisher_full": lambda: sgrld.metrics.fisher_full(decay=0.9),
}


def _sgrld(metric: str, correction: str) -> Callable[[], sgrld.Sampler]:
    return lambda: sgrld.sgrld(
        quartic_potential(),
        ALL_METRICS[metric](),
        learning_rate=LR,
        num_data=10,
        correction=correction,
    )


def _assembled() -> sgrld.Sampler:
    """SGRLD from its parts: exact Γ, a drift limit and an injected noise draw."""
    return sgrld.riemannian_langevin(
        quartic_potential(),
        METRICS["monge"](),
        learning_rate=LR,
        num_data=10,
        correction=sgrld.parts.correction.exact(warmup=0),
        integrator=sgrld.parts.integrators.euler_maruyama(
            noise_fn=sgrld.numerics.noise.normal_like
        ),
        max_drift_norm=1e3,
    )


def _assembled_momentum() -> sgrld.Sampler:
    """SGRLD's assembly with SGHMC's integrator: the momentum is the integrator's state."""
    return sgrld.riemannian_langevin(
        quartic_potential(),
        sgrld.metrics.rmsprop(eps=1.0),
        learning_rate=LR,
        num_data=10,
        correction=sgrld.parts.correction.hutchinson(warmup=0),
        integrator=sgrld.parts.integrators.momentum(0.2),
    )


def _sghmc(**options) -> Callable[[], sgrld.Sampler]:
    return lambda: sgrld.sghmc(
        quartic_potential(), learning_rate=LR, num_data=10, friction=0.2, **options
    )


FACTORIES: dict[str, Callable[[], sgrld.Sampler]] = {
    **{
        f"sgrld-{metric}-{correction}": _sgrld(metric, correction)
        for metric in sorted(ALL_METRICS)
        for correction in ("none", "hutchinson")
    },
    "sgrld-rmsprop-exact": _sgrld("rmsprop", "exact"),
    "sgrld-assembled": _assembled,
    "sgrld-assembled-momentum": _assembled_momentum,
    "adam_sgld": lambda: sgrld.adam_sgld(quartic_potential(), learning_rate=LR, num_data=10),
    "sghmc": _sghmc(),
    "sghmc-noise": _sghmc(gradient_noise="per_example"),
    "sghmc-rmsprop-hutchinson": _sghmc(
        metric=sgrld.metrics.rmsprop(eps=1.0), correction="hutchinson"
    ),
    "sghmc-monge-exact": _sghmc(metric=sgrld.metrics.monge(), correction="exact"),
    "sgnht": lambda: sgrld.sgnht(quartic_potential(), learning_rate=LR, num_data=10),
    "isgd": lambda: sgrld.isgd(quartic_potential(), learning_rate=LR, num_data=10),
    "isgd-rule": lambda: sgrld.isgd(quartic_potential(), learning_rate=None, warmup=3, num_data=10),
    "isgd-square": lambda: sgrld.isgd(
        quartic_potential(), learning_rate=LR, num_data=10, gradient_noise="square"
    ),
    "sgd": lambda: baselines.sgd(quartic_potential(), LR),
    "sgd-momentum": lambda: baselines.sgd(quartic_potential(), LR, momentum=0.9),
    "vsgd": lambda: baselines.vsgd(quartic_potential(), LR),
    "swag": lambda: baselines.swag(
        quartic_potential(), LR, train_steps=4, swa_start=1, collect_every=1, rank=2
    ),
}
"""Every sampler factory of the library, in the settings that take different code paths."""

DETERMINISTIC = {"sgd", "sgd-momentum", "vsgd", "swag"}
"""Samplers that draw no noise (SWAG: while it trains, as in its first step here): another key
gives the same step."""


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_contract(name):
    sampler = FACTORIES[name]()
    params = {**init_params(), "s": jnp.asarray(0.3, jnp.bfloat16)}
    state = sampler.init(params)
    traces = []

    def counted(key, state, b):
        traces.append(1)
        return sampler.step(key, state, b)

    step = jax.jit(counted)
    key = jax.random.key(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseClippingWarning)  # i-SGD: lr = 0.05 is large here
        new, info = step(key, state, batch())
        step(jax.random.key(2), new, batch(1))
        again, _ = step(key, state, batch())
        other, _ = step(jax.random.key(3), state, batch())
        keys = jax.random.split(jax.random.key(4), 6)
        final, infos = jax.lax.scan(lambda s, k: sampler.step(k, s, batch()), state, keys)
    assert len(traces) == 1  # one compilation
    # pytree structure, shapes and dtypes preserved: the state's type is invariant
    assert jax.tree.structure(new) == jax.tree.structure(state)
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(state), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
    assert new.params["s"].dtype == jnp.bfloat16
    # the same key, the same step; another key, another step
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(a, b)
    moved = not np.array_equal(other.params["w"], new.params["w"])
    assert moved != (name in DETERMINISTIC)
    assert bool(info.is_finite) and int(info.nonfinite_leaf) == -1
    assert int(final.step) == 6 and infos.potential.shape == (6,)
    # every info type starts with StepInfo's fields, in its order
    assert type(info)._fields[: len(sgrld.StepInfo._fields)] == sgrld.StepInfo._fields


def test_every_factory_is_under_the_contract():
    """A new sampler factory in ``sgrld.__all__`` or the baselines needs a row above."""
    factories = {"sgrld", "riemannian_langevin", "adam_sgld", "sghmc", "sgnht", "isgd"}
    assert factories <= {n for n in sgrld.__all__ if callable(getattr(sgrld, n))}
    covered = {name.split("-")[0] for name in FACTORIES} | {"riemannian_langevin"}
    assert factories | {"sgd", "vsgd", "swag"} <= covered
    assert {n for n in baselines.__all__ if n.islower()} == {"sgd", "vsgd", "swag"}
