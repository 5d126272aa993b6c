"""``one_matrix_at_a_time`` by backend: on the CPU one LAPACK call per matrix, as before (two
batched calls at once deadlock XLA's CPU thread pool); elsewhere one batched call."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.numerics.linalg import one_matrix_at_a_time

CHOL = one_matrix_at_a_time(jnp.linalg.cholesky)
MATS = jnp.stack([(i + 2.0) * jnp.eye(4) + jnp.ones((4, 4)) for i in range(3)])


def test_the_cpu_program_factorises_one_matrix_per_lapack_call():
    compiled = jax.jit(jax.vmap(CHOL)).lower(MATS).compile().as_text()
    calls = re.findall(r"= \(?(\S+?)[,)]?\s.*custom_call_target=\"lapack_spotrf", compiled)
    assert calls == ["f32[4,4]{0,1}"] * 3  # three calls on one matrix each, none on [3, 4, 4]
    each = np.stack([np.asarray(jnp.linalg.cholesky(m)) for m in MATS])
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(CHOL))(MATS)), each)


def test_other_backends_get_one_batched_call():
    """Lowered for a TPU (no device needed): one Cholesky of the batch, not one per matrix."""
    lowered = jax.jit(jax.vmap(CHOL)).trace(MATS).lower(lowering_platforms=("tpu",)).as_text()
    ops = re.findall(r"stablehlo\.cholesky [^\n]*: tensor<([\dx]+)xf32>", lowered)
    assert ops == ["3x4x4"]
    both = jax.jit(jax.vmap(CHOL)).trace(MATS).lower(lowering_platforms=("cpu", "tpu")).as_text()
    assert "stablehlo.case" in both  # the platform picks the branch when the program is compiled
