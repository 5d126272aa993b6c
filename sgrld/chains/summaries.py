"""Per-chunk summaries of a sampler's ``info``: what the engine reports about every step without
storing any of them.

The engine folds each step whose ``info`` it reads into per-chain accumulators
(:func:`summary_update`) and reduces them over chains at the end of a chunk
(:func:`summary_final`); :func:`summarise` does the same for stacked ``info`` (fields ``[n, K]``).
The engine reads the ``info`` of the last step of each of its blocks (:mod:`sgrld.chains.engine`):
every ``thin``-th step (the thinning grid, burn-in included) and the chunk's last, every step with
``thin == 1`` or in a chunk re-run after a divergence. Float fields give ``NAME_sum`` and
``NAME_max``, boolean fields ``NAME_count``, integer fields (cumulative counters, which count
every step) ``NAME_last``; ``steps`` counts the summarised steps that count (finite steps of
chains that had not diverged).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

ENGINE_FIELDS = ("is_finite", "nonfinite_leaf")
"""The fields of ``info`` that the engine itself reads (not summarised)."""


def summary_init(info: Any) -> dict[str, jax.Array]:
    """Empty per-chain accumulators for ``info`` (fields ``[K]``, shapes only)."""
    k = info.is_finite.shape
    acc = {"steps": jnp.zeros(k, jnp.float32)}
    for name, x in info._asdict().items():
        if name in ENGINE_FIELDS:
            continue
        if x.dtype == bool:
            acc[f"{name}_count"] = jnp.zeros(k, jnp.int32)
        elif jnp.issubdtype(x.dtype, jnp.integer):
            acc[f"{name}_last"] = jnp.zeros(k, x.dtype)
        else:
            acc[f"{name}_sum"] = jnp.zeros(k, jnp.float32)
            acc[f"{name}_max"] = jnp.full(k, -jnp.inf, jnp.float32)
    return acc


def summary_update(acc: dict, info: Any, ok: jax.Array) -> dict[str, jax.Array]:
    """Fold one step (fields ``[K]``) into the accumulators; only ``ok`` chains count."""
    out = {"steps": acc["steps"] + ok}
    for name, x in info._asdict().items():
        if name in ENGINE_FIELDS:
            continue
        if x.dtype == bool:
            out[f"{name}_count"] = acc[f"{name}_count"] + (x & ok)
        elif jnp.issubdtype(x.dtype, jnp.integer):
            out[f"{name}_last"] = x
        else:  # not x * ok: a NaN times 0 is NaN
            out[f"{name}_sum"] = acc[f"{name}_sum"] + jnp.where(ok, x, 0.0)
            out[f"{name}_max"] = jnp.maximum(acc[f"{name}_max"], jnp.where(ok, x, -jnp.inf))
    return out


def summary_final(acc: dict) -> dict[str, jax.Array]:
    """Over chains: sums, counts and last values added, maxima maximised."""
    return {k: jnp.max(v) if k.endswith("_max") else jnp.sum(v) for k, v in acc.items()}


def summarise(info: Any, ok: jax.Array) -> dict[str, jax.Array]:
    """Summary of a sampler's ``info`` over steps (fields ``[n, K]``) and chains, ``ok`` steps only.

    Float fields give ``NAME_sum`` and ``NAME_max``, boolean fields ``NAME_count``, integer
    fields (cumulative counters) ``NAME_last``, the sum over chains of the last step's value;
    ``steps`` counts the ok steps. ``is_finite`` and ``nonfinite_leaf`` are the engine's own.
    The engine folds each step in as it runs (nothing per step is stored).
    """
    first = jax.tree.map(lambda x: x[0], info)
    acc, _ = jax.lax.scan(
        lambda a, xs: (summary_update(a, *xs), None), summary_init(first), (info, ok)
    )
    return summary_final(acc)
