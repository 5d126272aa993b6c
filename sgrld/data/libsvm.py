"""The LIBSVM sparse text format of the LIBSVM binary-classification data sets.

One example a line: a label, then ``index:value`` pairs with 1-based feature indices, separated
by white space (``-1 1:0.5 3:2``); features left out are 0. Blank lines are skipped and line
ends may be ``\\n`` or ``\\r\\n``. See https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .dataset import FLOAT32_MAX
from .errors import DataError, MissingDataError

__all__ = ["load_libsvm", "parse_libsvm"]


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
