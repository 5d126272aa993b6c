"""``sgrld.numerics.linalg.one_matrix_at_a_time``: under ``vmap`` over matrices (one call per
matrix), over right-hand sides only, nested, and under ``jax.jvp``, the wrapped function gives
what the plain function gives, to float rounding (the calls are the same LAPACK routines)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.numerics.linalg import one_matrix_at_a_time


def _spd(key, batch, n):
    a = jax.random.normal(key, (*batch, n, n))
    return a @ jnp.swapaxes(a, -1, -2) + n * jnp.eye(n)


def solve(low, b):
    return jax.scipy.linalg.cho_solve((low, True), b)


WRAPPED = one_matrix_at_a_time(solve)
CHOL = one_matrix_at_a_time(jnp.linalg.cholesky)


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-6)


def test_vmap_over_matrices_and_over_right_hand_sides_equals_the_plain_function():
    mats = _spd(jax.random.key(0), (3,), 4)
    rhs = jax.random.normal(jax.random.key(1), (3, 4))
    low = jax.vmap(CHOL)(mats)
    close(low, jnp.linalg.cholesky(mats))
    close(jax.vmap(WRAPPED)(low, rhs), jax.vmap(solve)(low, rhs))  # one call per matrix
    close(jax.vmap(WRAPPED, (None, 0))(low[0], rhs), jax.vmap(solve, (None, 0))(low[0], rhs))
    x = jax.vmap(WRAPPED)(low, rhs)  # and it solves: A x = b
    close(jnp.einsum("kij,kj->ki", mats, x), rhs)


def test_nested_vmap_and_jvp_equal_the_plain_function():
    mats = _spd(jax.random.key(2), (2, 3), 3)
    rhs = jax.random.normal(jax.random.key(3), (2, 3, 3))
    low = jnp.linalg.cholesky(mats)
    nested = jax.vmap(jax.vmap(WRAPPED))(low, rhs)
    close(nested, jax.vmap(jax.vmap(solve))(low, rhs))
    dlow = jax.random.normal(jax.random.key(4), low.shape) * jnp.tril(jnp.ones((3, 3)))
    drhs = jax.random.normal(jax.random.key(5), rhs.shape)

    def tangent(f):
        return jax.vmap(jax.vmap(lambda l, b, dl, db: jax.jvp(f, (l, b), (dl, db))))

    wrapped_out, wrapped_t = tangent(WRAPPED)(low, rhs, dlow, drhs)
    plain_out, plain_t = tangent(solve)(low, rhs, dlow, drhs)
    close(wrapped_out, plain_out)
    close(wrapped_t, plain_t)


def test_jacfwd_maps_only_the_tangents_and_equals_the_plain_function():
    """``jax.jacfwd`` vmaps the tangents alone (the Γ correction's derivatives): the matrix's and
    the right-hand side's Jacobians are the plain function's."""
    low = jnp.linalg.cholesky(_spd(jax.random.key(6), (), 3))
    rhs = jax.random.normal(jax.random.key(7), (3,))
    for argnum in (0, 1):
        close(jax.jacfwd(WRAPPED, argnum)(low, rhs), jax.jacfwd(solve, argnum)(low, rhs))
