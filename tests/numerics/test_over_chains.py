"""Branches over vmapped chains (:mod:`sgrld.numerics.over_chains`) stay branches under nested
``vmap``: the rate searches vmap a sampler over rates and over chains, and a rare branch (Shampoo's
root refresh, the switch at ``adapt_until``) turned into a ``select`` there runs at every step."""

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.numerics.over_chains import any_chain, branch_over_chains


def _rare(p, x):
    return branch_over_chains(p, lambda x: jnp.sin(x) + 1.0, lambda x: x, x)


def _top_level(jaxpr) -> list[str]:
    """The primitives a jaxpr runs outside any ``cond``'s branches (through nested calls)."""
    names = []
    for eqn in jaxpr.jaxpr.eqns if hasattr(jaxpr, "jaxpr") else jaxpr.eqns:
        names.append(eqn.primitive.name)
        if eqn.primitive.name != "cond":
            for sub in jax.extend.core.jaxprs_in_params(eqn.params):
                names += _top_level(sub)
    return names


@pytest.mark.parametrize("levels", [1, 2, 3])
def test_the_rare_branch_stays_a_branch_under_nested_vmap(levels):
    f = _rare
    for _ in range(levels):
        f = jax.vmap(f)
    shape = (3, 2, 2)[:levels]
    top = _top_level(jax.make_jaxpr(f)(jnp.zeros(shape, bool), jnp.zeros(shape)))
    assert "cond" in top and "sin" not in top, top


def test_each_chain_gets_its_own_branch_under_nested_vmap():
    pred = jnp.array([[False, True], [False, False], [True, True]])
    x = jnp.arange(6.0).reshape(3, 2)
    out = jax.vmap(jax.vmap(_rare))(pred, x)
    np.testing.assert_array_equal(out, jnp.where(pred, jnp.sin(x) + 1.0, x))
    assert jax.vmap(jax.vmap(any_chain))(pred).tolist() == [[True, True]] * 3


def test_shampoo_refreshes_its_roots_in_a_branch_over_rates_and_chains():
    """The rate searches' program (rates × chains): Shampoo's eigendecompositions sit in the
    refresh branch, not at the top level of the step, where they would run at every step."""
    u = sgrld.potential(lambda w, b: -0.5 * (b - w @ jnp.ones(3)) ** 2, lambda w: -0.5 * w @ w, 8)
    sampler = sgrld.sgrld(u, sgrld.metrics.shampoo(), learning_rate=1e-3, num_data=8)
    state = sampler.init(jnp.zeros(3))
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (4, 2, *x.shape)), state)
    keys = jax.random.split(jax.random.key(0), 8).reshape(4, 2)
    step = jax.vmap(jax.vmap(lambda k, s: sampler.step(k, s, jnp.ones(8))[0]))
    top = _top_level(jax.make_jaxpr(step)(keys, states))
    assert "eigh" not in top and "cond" in top, top
