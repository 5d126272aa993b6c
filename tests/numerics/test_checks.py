"""The per-step check for NaN/inf and the squared gradient norm, in one reduction per leaf."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from sgrld.numerics.checks import checked_squares, first_nonfinite


def trees():
    grads = {"a": jnp.arange(3.0), "b": jnp.ones((2, 2)), "c": jnp.full(4, 0.5)}
    params = {"a": jnp.zeros(3), "b": -jnp.ones((2, 2)), "c": jnp.ones(4)}
    return grads, params


def test_a_finite_step_gives_the_squared_norm_per_leaf_and_no_bad_leaf():
    grads, params = trees()
    squares = checked_squares(grads, params)
    np.testing.assert_allclose(squares, [5.0, 4.0, 1.0])
    assert int(first_nonfinite(squares)) == -1


@pytest.mark.parametrize("bad", [jnp.nan, jnp.inf, -jnp.inf])
@pytest.mark.parametrize("tree", ["grads", "params"])
@pytest.mark.parametrize("leaf", ["a", "b", "c"])
def test_a_nan_or_inf_in_either_tree_names_its_leaf(bad, tree, leaf):
    grads, params = trees()
    planted = {"grads": grads, "params": params}[tree]
    planted[leaf] = planted[leaf].at[(0,) * planted[leaf].ndim].set(bad)
    squares = checked_squares(grads, params)
    assert int(first_nonfinite(squares)) == "abc".index(leaf)
    assert np.isfinite(np.delete(np.asarray(squares), "abc".index(leaf))).all()


def test_the_first_bad_leaf_is_named_when_several_are():
    grads, params = trees()
    grads["c"] = grads["c"].at[1].set(jnp.nan)
    params["b"] = params["b"].at[0, 1].set(jnp.inf)
    assert int(first_nonfinite(checked_squares(grads, params))) == 1


def test_a_squared_norm_that_overflows_counts_as_a_divergence():
    grads, params = trees()
    grads["a"] = jnp.array([1e20, 0.0, 0.0], jnp.float32)  # finite, but its square is not
    assert int(first_nonfinite(checked_squares(grads, params))) == 0


def test_low_precision_leaves_are_summed_in_float32():
    grads = {"w": jnp.full(4096, 1.0, jnp.bfloat16)}  # bfloat16 counts to 256 exactly, no further
    squares = checked_squares(grads, {"w": jnp.zeros(4096, jnp.bfloat16)})
    assert squares.dtype == jnp.float32 and float(squares[0]) == 4096.0
