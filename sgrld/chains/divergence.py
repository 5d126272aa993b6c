"""Reporting a divergence: which chain produced a NaN/inf, at which step, in which parameter.

The engine (:mod:`sgrld.chains.engine`) marks each chain's first non-finite step and leaf in its
carry; :func:`first_divergence` reads the earliest, and every message ends with :data:`ADVICE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from sgrld.numerics.pytrees import PyTree

ADVICE = (
    "Try a smaller learning rate (sampler.learning_rate), a larger eps for an adaptive metric, "
    "or max_drift_norm."
)
"""What to change after a divergence; every divergence message ends with it."""


class Divergence(NamedTuple):
    """The first divergence of a run: which chain, at which global step, in which leaf."""

    chain: int
    step: int
    leaf: str
    count: int
    num_chains: int


def first_divergence(carry: Any, leaf_names: Sequence[str]) -> Divergence | None:
    """The earliest divergence in ``carry`` (``None`` if no chain diverged)."""
    bad = np.asarray(carry.diverged_step)
    chains = np.flatnonzero(bad >= 0)
    if not chains.size:
        return None
    first = int(chains[np.argmin(bad[chains])])
    leaf = int(np.asarray(carry.diverged_leaf)[first])
    name = leaf_names[leaf] if 0 <= leaf < len(leaf_names) else "?"
    return Divergence(first, int(bad[first]), name or "(root)", int(chains.size), bad.size)


def leaf_names(params: PyTree) -> list[str]:
    """Readable names of the leaves of ``params``, in ``jax.tree.leaves`` order.

    Example:
        >>> leaf_names({"net": {"w": 0.0}, "prior": {}})
        ["['net']['w']"]
    """
    return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
