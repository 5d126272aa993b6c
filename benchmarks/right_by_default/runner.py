"""Variants side by side in one program: ``[variants, chains]`` vmapped chains of share.py's step.

Every variant (a :class:`share.Config`: fixed share, ĉ, frozen after burn-in) runs on the same
chain keys (common random numbers), so that their differences are the variants', not the noise's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from share import Config

NEVER = 2**30


def configs(variants: Sequence[tuple[str, dict]]) -> tuple[list[str], Config]:
    """Names and a stacked :class:`Config` of ``(name, {scale, auto, freeze_at, freeze_average,
    window, order})``."""
    names = [n for n, _ in variants]
    get = lambda k, d: [v.get(k, d) for _, v in variants]
    cfg = Config(
        scale=jnp.asarray(get("scale", 0.0), jnp.float32),
        auto=jnp.asarray(get("auto", False)),
        freeze_at=jnp.asarray(get("freeze_at", NEVER), jnp.int32),
        freeze_average=jnp.asarray(get("freeze_average", False)),
        window=jnp.asarray(get("window", 20.0), jnp.float32),
        order=jnp.asarray(get("order", 1), jnp.int32),
    )
    return names, cfg


def simulate(
    init: Callable,
    step: Callable,
    cfg: Config,
    params0: Any,
    key: jax.Array,
    *,
    chains: int,
    burn_in: int,
    num_samples: int,
    thin: int,
    batch_fn: Callable[[jax.Array], Any],
    record: Callable[[Any, Any, Any], Any],
) -> tuple[Any, float]:
    """Run ``[variants, chains]`` chains; returns ``record(params_t, info_t, state)`` of every
    kept step stacked ``[variants, chains, num_samples, ...]`` and the wall seconds (with
    compilation). ``params_t`` is θ_t, ``info_t`` the info of the step taken from it."""

    def one(cfg, key):
        state = init(params0)

        def body(s, i):
            k = jax.random.fold_in(key, i)
            s, _ = step(cfg, k, s, batch_fn(jax.random.fold_in(k, 7)))
            return s, None

        state = jax.lax.scan(body, state, jnp.arange(burn_in))[0]

        def block(s, j):
            start = burn_in + j * thin
            s = jax.lax.scan(body, s, start + jnp.arange(thin - 1))[0]
            k = jax.random.fold_in(key, start + thin - 1)
            p = s.params
            s, info = step(cfg, k, s, batch_fn(jax.random.fold_in(k, 7)))
            return s, record(p, info, s)

        return jax.lax.scan(block, state, jnp.arange(num_samples))[1]

    keys = jax.random.split(key, chains)
    fn = jax.jit(jax.vmap(jax.vmap(one, (None, 0)), (0, None)))
    start = time.perf_counter()
    out = jax.block_until_ready(fn(cfg, keys))
    return jax.tree.map(np.asarray, out), time.perf_counter() - start
