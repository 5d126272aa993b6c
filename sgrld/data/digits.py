"""scikit-learn's bundled 8x8 handwritten digits (no download, no data directory).

The digits are read from the file scikit-learn ships them in, without importing scikit-learn
(0.65 s of a run's start): ``sklearn.datasets.load_digits`` reads the same file, and is the
fallback where a scikit-learn release keeps it elsewhere.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from .splits import train_validation_split

__all__ = ["DIGITS_TEST_SEED", "DIGITS_TEST_SIZE", "load_digits_arrays"]

DIGITS_TEST_SIZE = 359
"""Test examples: 20 % of the 1797 images, rounded."""

DIGITS_TEST_SEED = 0
"""Seed of the test split; fixed, so every validation seed sees the same test set."""


def load_digits_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Load the 1797 digits and hold out a fixed 20 % test set.

    Pixels (0..16 in scikit-learn) are divided by 16. The test set is drawn with
    :data:`DIGITS_TEST_SEED` (see :func:`sgrld.data.splits.holdout_indices`), independently
    of the validation seed of :func:`sgrld.data.load_dataset`.

    Returns:
        ``(x_train, y_train, x_test, y_test)``: ``float32`` images ``(n, 8, 8, 1)`` in
        ``[0, 1]`` and ``int32`` labels, with 1438 training and 359 test examples.

    Example:
        >>> x_train, y_train, x_test, y_test = load_digits_arrays()
        >>> x_train.shape, x_test.shape, float(x_train.max())
        ((1438, 8, 8, 1), (359, 8, 8, 1), 1.0)
    """
    images, labels = _bundled_digits()
    x = (images.astype(np.float32) / 16).reshape(-1, 8, 8, 1)
    return train_validation_split(x, labels.astype(np.int32), DIGITS_TEST_SIZE, DIGITS_TEST_SEED)


def _bundled_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 1797 digits as scikit-learn ships them: pixels ``(1797, 64)`` and labels."""
    spec = importlib.util.find_spec("sklearn")
    folder = Path(spec.origin).parent if spec is not None and spec.origin else Path()
    path = folder / "datasets" / "data" / "digits.csv.gz"
    if spec is None or not path.is_file():
        from sklearn.datasets import load_digits

        bunch = load_digits()
        return bunch.data, bunch.target
    table = np.loadtxt(path, delimiter=",")
    return table[:, :-1], table[:, -1].astype(int)
