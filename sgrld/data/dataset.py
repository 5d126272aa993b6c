"""The :class:`Dataset` container returned by :func:`sgrld.data.load_dataset` and
:func:`sgrld.data.load_file`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .errors import DataError

__all__ = ["FLOAT32_MAX", "Dataset", "check_labels"]

FLOAT32_MAX = float(np.finfo(np.float32).max)
"""The largest ``float32``: a larger number in a data file would load as infinity."""


class Dataset(NamedTuple):
    """Train / validation / test splits of one data set, as host (numpy) arrays.

    Inputs are ``float32``; classification labels are ``int32`` in ``[0, num_classes)``,
    regression targets ``float32``.
    The arrays stay in numpy on purpose: moving them to an accelerator is the runner's job.

    Attributes:
        x_train: Training inputs, ``(n_train, ...)``.
        y_train: Training labels, ``(n_train,)``.
        x_val: Validation inputs, ``(n_val, ...)``; ``n_val`` may be 0.
        y_val: Validation labels, ``(n_val,)``.
        x_test: Test inputs, ``(n_test, ...)``.
        y_test: Test labels, ``(n_test,)``.
        num_classes: Number of classes; 0 for regression (``float32`` targets).
        name: Registry name of the data set, e.g. ``"mnist"``.
        target_mean: Regression targets were standardised as ``(y − target_mean) / target_std``
            (0 for classification and unstandardised targets).
        target_std: See ``target_mean`` (1 for classification and unstandardised targets).
        sha256: The SHA-256 (hex) of the file read by :func:`sgrld.data.load_file`; ``""`` for
            the registry's sets, whose files are checked against their known checksums.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    name: str
    target_mean: float = 0.0
    target_std: float = 1.0
    sha256: str = ""

    def __repr__(self) -> str:
        """The name, the classes and each split's shapes, not the arrays.

        Example:
            >>> z = np.zeros((5, 3), np.float32)
            >>> Dataset(z, z[:, 0], z[:0], z[:0, 0], z[:2], z[:2, 0], 0, "toy", 1.5, 2.0)
            Dataset('toy', regression (targets standardised: mean 1.5, std 2),
            train x (5, 3) float32 y (5,) float32, val x (0, 3) float32 y (0,) float32,
            test x (2, 3) float32 y (2,) float32)
        """
        if self.num_classes:
            kind = f"{self.num_classes} classes"
        else:
            kind = "regression"
            if (self.target_mean, self.target_std) != (0.0, 1.0):
                kind += (
                    f" (targets standardised: mean {self.target_mean:g}, std {self.target_std:g})"
                )
        splits = ", ".join(
            f"{name} x {np.shape(x)} {np.asarray(x).dtype} y {np.shape(y)} {np.asarray(y).dtype}"
            for name, x, y in (
                ("train", self.x_train, self.y_train),
                ("val", self.x_val, self.y_val),
                ("test", self.x_test, self.y_test),
            )
        )
        return f"Dataset({self.name!r}, {kind}, {splits})"


def check_labels(labels: np.ndarray, num_classes: int, source: str) -> np.ndarray:
    """Check that class labels are integers in ``[0, num_classes)`` and return them as int32.

    Args:
        labels: 1-D array of labels.
        num_classes: Number of classes.
        source: What the labels came from (a file path), for the error message.

    Returns:
        ``labels`` as an ``int32`` array.

    Raises:
        DataError: If the labels are not integers or one lies outside ``[0, num_classes)``.

    Example:
        >>> check_labels(np.array([0, 9], np.uint8), 10, "x").dtype
        dtype('int32')
    """
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise DataError(
            f"{source}: labels must be a 1-D integer array, got {labels.dtype} {labels.shape}"
        )
    bad = np.flatnonzero((labels < 0) | (labels >= num_classes))
    if bad.size:
        i = int(bad[0])
        raise DataError(
            f"{source}: label {int(labels[i])} at index {i} is outside [0, {num_classes}) "
            f"({bad.size} such labels)"
        )
    return labels.astype(np.int32)
