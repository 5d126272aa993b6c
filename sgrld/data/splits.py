"""Deterministic hold-out splits (validation from train, test from a single pool)."""

from __future__ import annotations

import operator

import numpy as np

__all__ = ["holdout_indices", "train_validation_split"]


def holdout_indices(n: int, holdout_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split ``range(n)`` into kept and held-out indices with a seeded permutation.

    The held-out indices are the first ``holdout_size`` entries of
    ``np.random.default_rng(seed).permutation(n)``; both index sets are returned sorted, so
    the examples keep their original order and ``holdout_size=0`` is the identity.

    Args:
        n: Number of examples.
        holdout_size: Number of examples to hold out, ``0 <= holdout_size <= n``.
        seed: Seed of the permutation.

    Returns:
        ``(kept, held_out)``: disjoint sorted ``int64`` index arrays covering ``range(n)``.

    Raises:
        TypeError: If ``holdout_size`` is not an integer.
        ValueError: If ``holdout_size`` is negative or larger than ``n``.

    Example:
        >>> kept, held_out = holdout_indices(5, 2, seed=0)
        >>> len(held_out), np.union1d(kept, held_out).tolist()
        (2, [0, 1, 2, 3, 4])
    """
    size = operator.index(holdout_size)
    if not 0 <= size <= n:
        raise ValueError(f"cannot hold out {size} of {n} examples")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[size:]), np.sort(perm[:size])


def train_validation_split(
    x: np.ndarray, y: np.ndarray, validation_size: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Hold out ``validation_size`` random examples of ``(x, y)`` for validation.

    Args:
        x: Inputs, ``(n, ...)``.
        y: Labels, ``(n,)``.
        validation_size: Number of validation examples (see :func:`holdout_indices`).
        seed: Seed of the permutation; the same seed always gives the same split.

    Returns:
        ``(x_train, y_train, x_val, y_val)``, each in the original order.

    Raises:
        TypeError: If ``validation_size`` is not an integer.
        ValueError: If ``validation_size`` is negative or exceeds ``n``.

    Example:
        >>> x_tr, y_tr, x_va, y_va = train_validation_split(np.arange(10.0), np.arange(10), 3, 1)
        >>> len(x_tr), len(x_va), set(y_tr) & set(y_va)
        (7, 3, set())
    """
    train, val = holdout_indices(len(x), validation_size, seed)
    return x[train], y[train], x[val], y[val]
