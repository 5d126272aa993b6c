"""The LIBSVM sparse text format of the LIBSVM binary-classification data sets.

One example a line: a label, then ``index:value`` pairs with 1-based feature indices, separated
by white space (``-1 1:0.5 3:2``); features left out are 0. Blank lines are skipped and line
ends may be ``\\n`` or ``\\r\\n``. See https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/.

:func:`load_libsvm_set` reads a known binary set (``sgrld.data.DATASETS``, format ``"libsvm"``):
its labels ±1 (or 0/1) become the classes 0/1, and a set with no official test file (australian)
has its test rows held out with the fixed seed :data:`LIBSVM_TEST_SEED`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .dataset import FLOAT32_MAX
from .errors import DataError, MissingDataError
from .files import DataFiles
from .splits import train_validation_split

__all__ = ["LIBSVM_TEST_SEED", "binary_labels", "load_libsvm", "load_libsvm_set", "parse_libsvm"]

LIBSVM_TEST_SEED = 0
"""Seed of the test rows held out from a set without a test file; fixed, so every validation
seed sees the same test set (as digits' :data:`sgrld.data.digits.DIGITS_TEST_SEED`)."""


def _number(token: str, what: str, where: str) -> float:
    """``float(token)``, or a :class:`DataError` at ``where`` if it is not a finite number."""
    try:
        value = float(token)
    except ValueError:
        raise DataError(f"{where}: {what} {token!r} is not a number") from None
    if not math.isfinite(value):
        raise DataError(f"{where}: {what} {token!r} is not finite")
    if abs(value) > FLOAT32_MAX:  # the arrays are float32
        raise DataError(f"{where}: {what} {token!r} is beyond float32's range (3.4e38)")
    return value


def _index(token: str, num_features: int, where: str) -> int:
    """The 0-based column of a 1-based ``token``, checked against ``[1, num_features]``."""
    if not (token.isascii() and token.isdigit()):
        raise DataError(f"{where}: feature index {token!r} is not a positive integer")
    if len(token.lstrip("0")) > 18 or not 1 <= int(token) <= num_features:  # int() stops at 4300
        raise DataError(f"{where}: feature index {token[:30]} is outside [1, {num_features}]")
    return int(token) - 1


def _parse_line(line: str, num_features: int, where: str) -> tuple[float, dict[int, float]]:
    """The label and ``{column: value}`` of one non-blank line."""
    label, *pairs = line.split()
    row: dict[int, float] = {}
    for pair in pairs:
        index, sep, value = pair.partition(":")
        if not sep:
            raise DataError(f"{where}: token {pair!r} is not of the form index:value")
        column = _index(index, num_features, where)
        if column in row:
            raise DataError(f"{where}: feature index {column + 1} appears twice")
        row[column] = _number(value, "value", where)
    return _number(label, "label", where), row


def parse_libsvm(
    data: bytes, num_features: int, source: str = "<bytes>"
) -> tuple[np.ndarray, np.ndarray]:
    """Parse the bytes of a LIBSVM file into a dense design matrix and its labels.

    Args:
        data: The whole file.
        num_features: d, the number of features; every index must lie in ``[1, d]``.
        source: Name of the file, used in error messages.

    Returns:
        ``(x, y)``: ``float32`` features of shape ``(n, d)`` (absent entries 0) and the labels as
        written (e.g. ±1 or 0/1), ``float32`` of shape ``(n,)``.

    Raises:
        ValueError: If ``num_features`` is not a positive integer.
        DataError: Naming the file and line, on text that is not ASCII/UTF-8, a token not of the
            form ``index:value``, an index that is not an integer in ``[1, d]`` or appears twice
            in a line, a label or value that is not a finite float32 number, or a file with no
            examples.

    Example:
        >>> x, y = parse_libsvm(b"+1 1:0.5 3:2\\n-1 2:-1\\n", num_features=3)
        >>> x.tolist(), y.tolist()
        ([[0.5, 0.0, 2.0], [0.0, -1.0, 0.0]], [1.0, -1.0])
    """
    if isinstance(num_features, bool) or int(num_features) != num_features or num_features < 1:
        raise ValueError(f"num_features must be a positive integer, got {num_features!r}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{source}: not a text file ({err})") from None
    labels, rows = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            label, row = _parse_line(line, int(num_features), f"{source}, line {number}")
            labels.append(label)
            rows.append(row)
    if not rows:
        raise DataError(f"{source}: no examples (empty file)")
    x = np.zeros((len(rows), int(num_features)), np.float32)
    for i, row in enumerate(rows):
        x[i, list(row)] = list(row.values())
    return x, np.asarray(labels, np.float32)


def load_libsvm(path: str | Path, num_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Read and parse a LIBSVM file (:func:`parse_libsvm`).

    Raises:
        MissingDataError: If ``path`` does not exist.
        DataError: If the file is malformed.
    """
    path = Path(path)
    if not path.is_file():
        raise MissingDataError(f"{path}: no such LIBSVM file")
    return parse_libsvm(path.read_bytes(), num_features, str(path))


def binary_labels(labels: np.ndarray, source: str) -> np.ndarray:
    """The classes ``int32`` 0/1 of binary labels written ±1 (``+1`` → 1, ``−1`` → 0) or 0/1.

    Raises:
        DataError: If a label is none of −1, 0, +1, or both −1 and 0 appear.

    Example:
        >>> binary_labels(np.array([1.0, -1.0, 1.0]), "x").tolist()
        [1, 0, 1]
    """
    bad = np.flatnonzero(~np.isin(labels, (-1.0, 0.0, 1.0)))
    if bad.size:
        i = int(bad[0])
        raise DataError(
            f"{source}: label {labels[i]:g} of example {i} is not a binary label (±1 or 0/1)"
        )
    if np.any(labels == -1) and np.any(labels == 0):
        raise DataError(f"{source}: labels mix -1 and 0; a binary set uses ±1 or 0/1")
    return (labels > 0).astype(np.int32)


def load_libsvm_set(
    files: DataFiles, test_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read a LIBSVM binary classification set of the registry.

    The features are dense ``float32`` (not standardised) and the labels :func:`binary_labels`.
    The test split is the file ``<name>.t`` where the set has one (a9a); otherwise
    ``test_size`` rows of ``<name>`` are held out by ``holdout_indices(n, test_size,
    LIBSVM_TEST_SEED)`` (:func:`sgrld.data.holdout_indices`), 0 keeping every row for training.

    Args:
        files: the data set's resolved files.
        test_size: test rows to hold out from a set without a test file (ignored otherwise).

    Returns:
        ``(x_train, y_train, x_test, y_test)``, rows in file order.

    Raises:
        MissingDataError: If a file is missing.
        DataError: If a file fails its checksum or is malformed, or a label is not binary.
        ValueError: If ``test_size`` is negative or exceeds the rows of the file.
    """
    info = files.info
    sets = []
    for name in info.files:
        path, data = files.read(name)
        x, labels = parse_libsvm(data, info.num_features, str(path))
        sets.append((x, binary_labels(labels, str(path))))
    if len(sets) == 2:
        (x_train, y_train), (x_test, y_test) = sets
        return x_train, y_train, x_test, y_test
    [(x, y)] = sets
    return train_validation_split(x, y, test_size, LIBSVM_TEST_SEED)
