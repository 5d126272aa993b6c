"""The integrators as parts: a momentum integrator in SGRLD's assembly is SGHMC, its state carried
in :class:`sgrld.SGRLDState`; Euler–Maruyama's state is ``()``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import sgrld
from sgrld.parts import integrators
from tests.samplers.test_sampler import batch, init_params, quartic_potential


def _run(sampler, steps=5):
    state = sampler.init(init_params())
    for i in range(steps):
        state, _ = sampler.step(jax.random.key(i), state, batch(i))
    return state


def test_momentum_integrator_in_sgrld_is_sghmc():
    """Same parts, same keys: the two differ only in how the noise scale's arithmetic is ordered
    (SGHMC's ``√(2·lr/N·(α·T − β̂))`` with β̂ = 0 against ``√(2·α·lr·T/N)``)."""
    options = dict(learning_rate=0.05, num_data=10)
    assembled = sgrld.riemannian_langevin(
        quartic_potential(), sgrld.metrics.identity(), **options,
        integrator=integrators.momentum(0.2),
    )  # fmt: skip
    a = _run(assembled)
    b = _run(sgrld.sghmc(quartic_potential(), friction=0.2, **options))
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    for x, y in zip(jax.tree.leaves(a.integrator), jax.tree.leaves(b.momentum), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def test_euler_maruyama_has_no_state():
    em = integrators.euler_maruyama()
    assert em.init(init_params()) == ()
    state = sgrld.sgrld(quartic_potential(), sgrld.metrics.identity(), learning_rate=0.05,
                        num_data=10).init(init_params())  # fmt: skip
    assert state.integrator == ()


def test_nose_hoover_thermostat_tracks_the_kinetic_energy():
    """ξ ← ξ + ‖v‖²/D − lr·T/N, at T = 0 and with a known gradient."""
    nh = integrators.nose_hoover(0.1)
    scales = nh.scales(jnp.float32(0.5), temperature=0.0, num_data=1, correction_scale=0.0)
    g = jnp.array([1.0, -3.0])
    forces = integrators.Forces(g, None, jnp.zeros(2), None, lambda v: v)
    params, state = nh.move(jnp.zeros(2), nh.init(jnp.zeros(2)), forces, scales)
    np.testing.assert_allclose(state.momentum, -0.5 * g)
    np.testing.assert_allclose(params, -0.5 * g)
    np.testing.assert_allclose(state.thermostat, 0.1 + (0.25 + 2.25) / 2)


def test_every_sampler_keeps_its_integrators_state_whole_in_one_field():
    """SGRLD (Euler–Maruyama, the momentum integrator), SGHMC, SGNHT and Adam-SGLD store the
    integrator's state one way: whole, as its ``init`` makes it, in the state's ``integrator``;
    ``momentum`` and ``thermostat`` read that field."""
    u, options = quartic_potential(), dict(learning_rate=0.05, num_data=10)
    identity = sgrld.metrics.identity()
    samplers = {
        "sgrld": (sgrld.sgrld(u, identity, **options), integrators.euler_maruyama()),
        "sgrld-momentum": (
            sgrld.riemannian_langevin(u, identity, integrator=integrators.momentum(0.2), **options),
            integrators.momentum(0.2),
        ),
        "sghmc": (sgrld.sghmc(u, friction=0.2, **options), integrators.momentum(0.2)),
        "sgnht": (sgrld.sgnht(u, **options), integrators.nose_hoover(0.1)),
        "adam_sgld": (sgrld.adam_sgld(u, **options), integrators.euler_maruyama()),
    }
    for name, (sampler, integrator) in samplers.items():
        state = _run(sampler, steps=2)
        fresh = integrator.init(init_params())
        assert jax.tree.structure(state.integrator) == jax.tree.structure(fresh), name
    sghmc, sgnht = _run(samplers["sghmc"][0], 2), _run(samplers["sgnht"][0], 2)
    assert sghmc.momentum is sghmc.integrator
    assert isinstance(sgnht.integrator, integrators.Thermostat)
    assert sgnht.momentum is sgnht.integrator.momentum
    assert sgnht.thermostat is sgnht.integrator.thermostat
