"""sgrld.numerics.noise draws exactly the numbers of jax.random.normal (it only lowers them
differently)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sgrld.numerics import noise


@pytest.mark.parametrize("shape", [(), (1,), (7,), (5, 3), (2, 3, 4), (0,), (1000, 3)])
@pytest.mark.parametrize("raw", [False, True])
def test_normal_is_bit_identical_to_jax_random_normal(shape, raw):
    key = jax.random.PRNGKey(11) if raw else jax.random.key(11)
    for k in jax.random.split(key, 3):
        ours = jax.jit(noise.normal, static_argnums=(1, 2))(k, shape, jnp.float32)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(jax.random.normal(k, shape)))
        assert ours.shape == shape and ours.dtype == jnp.float32


def test_normal_under_vmap_matches_per_key_draws():
    keys = jax.random.split(jax.random.key(2), 4)
    ours = jax.vmap(lambda k: noise.normal(k, (6, 5)))(keys)
    ref = jnp.stack([jax.random.normal(k, (6, 5)) for k in keys])
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(ref))


@pytest.mark.parametrize(
    "key, dtype",
    [
        (jax.random.key(0, impl="rbg"), jnp.float32),
        (jax.random.key(0, impl="unsafe_rbg"), jnp.float32),
        (jax.random.key(0), jnp.bfloat16),
        (jax.random.key(0), jnp.float16),
    ],
)
def test_other_key_implementations_and_dtypes_fall_back_to_jax(key, dtype):
    np.testing.assert_array_equal(
        np.asarray(noise.normal(key, (9,), dtype), np.float32),
        np.asarray(jax.random.normal(key, (9,), dtype), np.float32),
    )


@pytest.mark.statistical(seed=5)
def test_normals_have_unit_moments(stat_seed):
    """10^6 draws: standard errors 1e-3 (mean) and 1.41e-3 (variance); the bounds are 5 and 4.95
    of them.

    False-failure probability: ≤ 1.4e-6 (2 normal statistics at 5σ and 4.95σ).
    """
    z = np.asarray(noise.normal(jax.random.key(stat_seed), (1_000_000,)), np.float64)
    assert abs(z.mean()) < 5e-3
    assert abs(z.var() - 1.0) < 7e-3
    assert np.all(np.isfinite(z))


def test_normal_like_draws_each_leaf_with_its_own_subkey():
    tree = {"w": jnp.zeros((3, 2)), "b": jnp.zeros(2, jnp.bfloat16), "s": jnp.zeros(())}
    key = jax.random.key(1)
    xi = noise.normal_like(key, tree)
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, len(leaves))
    ref = treedef.unflatten(
        [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)]
    )
    assert jax.tree.structure(xi) == jax.tree.structure(tree)
    for a, b in zip(jax.tree.leaves(xi), jax.tree.leaves(ref), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))


def test_threefry_float32_draws_take_the_unrolled_path():
    jaxpr = str(jax.make_jaxpr(lambda k: noise.normal(k, (8,)))(jax.random.key(0)))
    assert "threefry2x32" not in jaxpr and "random_bits" not in jaxpr
    reference = jax.make_jaxpr(lambda k: jax.random.normal(k, (8,)))(jax.random.key(0))
    assert "random_bits" in str(reference)


def test_non_partitionable_threefry_falls_back_to_jax():
    key = jax.random.key(4)
    with jax.threefry_partitionable(False):
        np.testing.assert_array_equal(
            np.asarray(noise.normal(key, (9,))), np.asarray(jax.random.normal(key, (9,)))
        )


def test_a_negative_shape_is_a_clear_error():
    with pytest.raises(ValueError, match=r"non-negative dimensions, got \(3, -2\)"):
        noise.normal(jax.random.key(0), (3, -2))


@pytest.mark.parametrize("batch_shape", [(), (3,), (2, 3)])
def test_normal_like_under_jit_and_nested_vmap_matches_per_key_draws(batch_shape):
    tree = {"w": jnp.zeros((4, 5)), "b": jnp.zeros(5)}
    keys = jax.random.split(jax.random.key(2), batch_shape) if batch_shape else jax.random.key(2)
    draw = lambda k: noise.normal_like(k, tree)
    for _ in batch_shape:
        draw = jax.vmap(draw)
    xi = jax.jit(draw)(keys)
    for index in np.ndindex(*batch_shape):
        expected = noise.normal_like(keys[index], tree)
        for a, b in zip(jax.tree.leaves(xi), jax.tree.leaves(expected), strict=True):
            np.testing.assert_array_equal(np.asarray(a[index]), np.asarray(b))
    assert noise.normal_like(jax.random.key(0), {}) == {}


def test_a_batched_normal_like_is_one_unbatched_conditional():
    # Under vmap a batched predicate would turn the conditional into a select of two draws.
    keys = jax.random.split(jax.random.key(0), 4)
    draw = jax.jit(jax.vmap(lambda k: noise.normal_like(k, jnp.zeros(3))))
    assert draw.lower(keys).compile().as_text().count(" conditional(") == 1


def _hashing_computations(fn, *args) -> int:
    text = jax.jit(fn).lower(*args).compile().as_text()
    return sum("466688986" in comp for comp in text.split("\n\n"))  # 0x1BD11BDA: threefry


def test_noise_read_twice_is_not_hashed_twice():
    # Monge-like use: <m, xi> first, then xi again. Kept in memory, xi costs no more hashing
    # than a single read; recomputed per reader (plain fusion) it would cost one more per leaf.
    m = {"w": jnp.full((30, 20), 0.1), "b": jnp.full(20, 0.1)}
    once = lambda k: noise.normal_like(k, m)

    def twice(k):
        xi = noise.normal_like(k, m)
        pairs = zip(jax.tree.leaves(m), jax.tree.leaves(xi), strict=True)
        c = sum(jnp.vdot(a, b) for a, b in pairs)
        return jax.tree.map(lambda x, y: x + c * y, xi, m)

    key = jax.random.key(0)
    assert _hashing_computations(twice, key) == _hashing_computations(once, key)


@pytest.mark.parametrize("shape", [(), (1,), (7,), (5, 3), (0,), (1000, 3)])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.int32])
@pytest.mark.parametrize("raw", [False, True])
def test_rademacher_is_bit_identical_to_jax_random_rademacher(shape, dtype, raw):
    key = jax.random.PRNGKey(3) if raw else jax.random.key(3)
    for k in jax.random.split(key, 3):
        ours = jax.jit(noise.rademacher, static_argnums=(1, 2))(k, shape, dtype)
        ref = jax.random.rademacher(k, shape, dtype)
        assert ours.shape == ref.shape == shape and ours.dtype == ref.dtype
        np.testing.assert_array_equal(np.asarray(ours, np.float32), np.asarray(ref, np.float32))


def test_rademacher_takes_the_unrolled_path_and_falls_back_to_jax():
    jaxpr = str(jax.make_jaxpr(lambda k: noise.rademacher(k, (8,)))(jax.random.key(0)))
    assert "threefry2x32" not in jaxpr and "random_bits" not in jaxpr
    for key in (jax.random.key(0, impl="rbg"), jax.random.key(0, impl="unsafe_rbg")):
        np.testing.assert_array_equal(
            np.asarray(noise.rademacher(key, (9,))), np.asarray(jax.random.rademacher(key, (9,)))
        )
    with jax.enable_x64(True):  # jax.random then draws 64-bit words
        key = jax.random.key(5)
        np.testing.assert_array_equal(
            np.asarray(noise.rademacher(key, (9,))), np.asarray(jax.random.rademacher(key, (9,)))
        )
    with pytest.raises(ValueError, match="non-negative dimensions"):
        noise.rademacher(jax.random.key(0), (-1,))


@pytest.mark.statistical(seed=6)
def test_rademacher_signs_are_balanced(stat_seed):
    """10^6 draws: the mean has standard error 1e-3; the bound is 5 of them.

    False-failure probability: ≤ 5.8e-7 (1 normal statistic at 5σ).
    """
    z = np.asarray(noise.rademacher(jax.random.key(stat_seed), (1_000_000,)), np.float64)
    assert set(np.unique(z)) == {-1.0, 1.0} and abs(z.mean()) < 5e-3
