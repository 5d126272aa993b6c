"""scikit-learn's bundled 8x8 handwritten digits (no download, no data directory).

scikit-learn is imported when the digits are loaded, not with this module.
"""

from __future__ import annotations

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
    from sklearn.datasets import load_digits  # imported here: `import sgrld.data` needs no sklearn

    bunch = load_digits()
    x = (bunch.images.astype(np.float32) / 16)[..., None]
    y = bunch.target.astype(np.int32)
    return train_validation_split(x, y, DIGITS_TEST_SIZE, DIGITS_TEST_SEED)
