"""Input transforms applied after splitting: per-channel standardisation and flattening."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["flatten_inputs", "standardize_channels"]


def standardize_channels(train: np.ndarray, *others: np.ndarray) -> tuple[np.ndarray, ...]:
    """Standardise NHWC inputs per channel with the mean and std of ``train``.

    Statistics are computed in float64 over all axes but the last, on ``train`` only (so
    nothing leaks from validation or test data) and applied to every array. A constant
    channel (std 0) is only centred.

    Args:
        train: Training inputs, ``(n, ..., channels)``.
        *others: Further arrays (validation, test) of the same trailing shape.

    Returns:
        ``(train, *others)`` standardised, as ``float32``.

    Example:
        >>> x = np.array([[[[0.0, 1.0]]], [[[2.0, 1.0]]]], np.float32)  # (2, 1, 1, 2)
        >>> standardize_channels(x)[0][:, 0, 0]
        array([[-1.,  0.],
               [ 1.,  0.]], dtype=float32)
    """
    axes = tuple(range(train.ndim - 1))
    mean = train.mean(axis=axes, dtype=np.float64)
    std = train.std(axis=axes, dtype=np.float64)
    scale = np.where(std > 0, std, 1.0)
    mean32, scale32 = mean.astype(np.float32), scale.astype(np.float32)
    return tuple((x - mean32) / scale32 for x in (train, *others))


def flatten_inputs(x: np.ndarray) -> np.ndarray:
    """Flatten ``(n, ...)`` inputs to ``(n, features)``, keeping the (HWC) element order.

    Example:
        >>> flatten_inputs(np.zeros((0, 32, 32, 3))).shape
        (0, 3072)
    """
    return x.reshape(len(x), math.prod(x.shape[1:]))
