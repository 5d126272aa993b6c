"""A data set of one's own: arrays read from an NPZ, CSV or Parquet file (:func:`load_file`).

The readers are NumPy's (``np.load``, ``.npz``) and pandas's (``pd.read_csv``, ``.csv``;
``pd.read_parquet`` with pyarrow, ``.parquet`` or ``.pq``); pandas and pyarrow come with
``pip install sgrld[files]`` and are imported when a table is read. The file is read once: its
bytes are hashed (``Dataset.sha256``, recorded by ``sgrld run`` in the run folder) and parsed.

* **NPZ**: ``inputs`` names the key of the inputs ``(n, ...)`` (default ``"x"``; several keys of
  ``(n,)`` or ``(n, k)`` arrays are joined column by column), ``target`` the key of the ``(n,)``
  targets (default ``"y"``). The inputs keep their shape (images stay ``(n, H, W, C)``).
* **CSV, Parquet**: a table with named columns (a CSV's first line is its header); ``target``
  names the target column (default: the last), ``inputs`` the input columns (default: all the
  others). Every one must be numeric.

The task: ``"classification"`` for integer (or boolean) targets, else ``"regression"``
(``task="auto"``); stated, classification takes targets that are whole numbers ``0, 1, …, K−1``
(``K`` classes: the largest plus one). Rows are split as a registry set with no official test split
(:func:`sgrld.data.load_dataset`): ``test_size`` rows (default 20 %) are held out with the fixed
seed :data:`FILE_TEST_SEED`, then ``validation_size`` (default 10 % of all rows) with ``seed``;
with ``standardize`` the inputs (per feature, per channel of an image) and a regression target are
standardised with the training rows' mean and std. Every problem is one :class:`DataError` naming
the file: a missing file, key or column, a NaN or empty field (a short row), a ragged row, a value
that is not a number, too few rows for the split.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import numpy as np

from .dataset import FLOAT32_MAX, Dataset, check_labels
from .errors import DataError, MissingDataError
from .files import sha256_hex
from .loader import preprocess
from .splits import train_validation_split

__all__ = ["FILE_FORMATS", "FILE_TEST_SEED", "TASKS", "load_file"]

FILE_FORMATS = {".npz": "npz", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
"""The file formats :func:`load_file` reads, by the file's suffix."""

FILE_TEST_SEED = 0
"""The seed of a file's test rows, fixed so that every ``seed`` sees the same test set."""

TASKS = ("auto", "classification", "regression")
"""The values of :func:`load_file`'s ``task``."""

TEST_SHARE, VALIDATION_SHARE = 0.2, 0.1
"""The default test and validation sizes, as shares of the file's rows (rounded down)."""

Columns = tuple[np.ndarray, list[str]]
"""A table's values ``(n, k)`` and the name of each of its ``k`` columns."""


def load_file(
    path: str | os.PathLike[str],
    *,
    inputs: str | list[str] | tuple[str, ...] | None = None,
    target: str | None = None,
    task: str = "auto",
    validation_size: int | None = None,
    test_size: int | None = None,
    seed: int = 1,
    standardize: bool = True,
) -> Dataset:
    """Read a data set from an NPZ, CSV or Parquet file and split it (see the module docstring).

    Args:
        path: The file; its suffix names its format (:data:`FILE_FORMATS`).
        inputs: The inputs' key (NPZ) or columns (a table); ``None``: ``"x"``, or every column
            but the target.
        target: The targets' key or column; ``None``: ``"y"``, or the table's last column.
        task: ``"auto"``, ``"classification"`` or ``"regression"`` (:data:`TASKS`).
        validation_size: Rows held out for validation; ``None``: 10 % of the rows.
        test_size: Rows held out as the test set; ``None``: 20 % of the rows.
        seed: Seed of the validation split.
        standardize: Standardise the inputs and a regression target (training rows' statistics).

    Returns:
        The :class:`Dataset`: ``name`` is the file's name, ``sha256`` its SHA-256.

    Raises:
        MissingDataError: If the file does not exist.
        DataError: If it cannot be read as a data set, naming the file and the problem.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "toy.csv"
        >>> rows = "".join(f"{i},{i % 3},{i % 2}\\n" for i in range(10))
        >>> _ = path.write_text("a,b,label\\n" + rows)
        >>> ds = load_file(path)
        >>> ds
        Dataset('toy.csv', 2 classes, train x (7, 2) float32 y (7,) int32,
        val x (1, 2) float32 y (1,) int32, test x (2, 2) float32 y (2,) int32)
        >>> len(ds.sha256)
        64
    """
    path = Path(path)
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, not {task!r}")
    data, form = _read_bytes(path)
    if form == "npz":
        x, y, target_name = _read_npz(path, data, inputs, target)
    else:
        x, y, target_name = _read_table(path, data, form, inputs, target)
    labels, num_classes = _targets(path, y, target_name, task)
    n = len(x)
    test = int(TEST_SHARE * n) if test_size is None else test_size
    val = int(VALIDATION_SHARE * n) if validation_size is None else validation_size
    if min(test, val) < 0 or test + val >= n:
        raise DataError(
            f"{path}: {n} rows are too few for a test split of {test} and a validation split of "
            f"{val} rows (test_size, validation_size): none would be left to train on"
        )
    x_full, y_full, x_test, y_test = train_validation_split(x, labels, test, FILE_TEST_SEED)
    splits = (*train_validation_split(x_full, y_full, val, seed), x_test, y_test)
    ds = preprocess(splits, num_classes, path.name, standardize=standardize, flatten=False)
    return ds._replace(sha256=sha256_hex(data))


def _read_bytes(path: Path) -> tuple[bytes, str]:
    """The file's bytes and its format, from its suffix."""
    form = FILE_FORMATS.get(path.suffix.lower())
    if form is None:
        raise DataError(
            f"{path}: unknown file format {path.suffix or '(no suffix)'!r}; a data file is "
            f"{', '.join(FILE_FORMATS)}"
        )
    try:
        return path.read_bytes(), form
    except FileNotFoundError:
        raise MissingDataError(f"{path}: no such file") from None
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None


def _read_npz(
    path: Path, data: bytes, inputs: str | list[str] | tuple[str, ...] | None, target: str | None
) -> tuple[np.ndarray, np.ndarray, str]:
    """The inputs ``(n, ...)``, the targets ``(n,)`` and the target's name, from an NPZ file."""
    keys = [inputs or "x"] if isinstance(inputs, str) or inputs is None else list(inputs)
    target = target or "y"
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            missing = [k for k in (*keys, target) if k not in npz.files]
            if missing:
                raise DataError(
                    f"{path}: no key {missing[0]!r} (its keys: {', '.join(npz.files) or 'none'})"
                )
            arrays = {k: _numeric_array(path, npz, k) for k in (*keys, target)}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        if isinstance(err, DataError):
            raise
        raise DataError(f"{path}: not a readable NPZ file ({err})") from None
    x = arrays[keys[0]] if len(keys) == 1 else _join_columns(path, keys, arrays)
    y = arrays[target]
    y = y[:, 0] if y.ndim == 2 and y.shape[1] == 1 else y
    if y.ndim != 1 or x.ndim == 0 or len(x) != len(y):
        raise DataError(
            f"{path}: the inputs {', '.join(keys)} {x.shape} and the target {target!r} {y.shape} "
            "must have one row per example, the target one value per row"
        )
    x = x[:, None] if x.ndim == 1 else x
    values = x.reshape(len(x), -1)
    names = [keys[0]] * values.shape[1] if len(keys) == 1 else _column_keys(keys, arrays)
    _check_finite(path, values, names)
    _check_finite(path, y[:, None], [target])
    return _float32(path, values).reshape(x.shape), y, target


def _numeric_array(path: Path, npz: np.lib.npyio.NpzFile, key: str) -> np.ndarray:
    """``npz[key]`` if it is an array of numbers (or booleans)."""
    try:
        array = npz[key]
    except ValueError:  # NumPy refuses an object array when pickles are not allowed
        array = None
    if array is None or not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        what = "an array of objects (ragged rows?)" if array is None else f"{array.dtype} values"
        raise DataError(f"{path}: key {key!r} is not an array of numbers: {what}")
    return array


def _join_columns(path: Path, keys: list[str], arrays: dict[str, np.ndarray]) -> np.ndarray:
    """Several NPZ keys of ``(n,)`` or ``(n, k)`` arrays as the columns of one ``(n, K)``."""
    shapes = {k: arrays[k].shape for k in keys}
    if any(len(s) not in (1, 2) or s[0] != shapes[keys[0]][0] for s in shapes.values()):
        raise DataError(
            f"{path}: inputs of several keys must be (n,) or (n, k) arrays of the same n, not "
            + ", ".join(f"{k} {s}" for k, s in shapes.items())
        )
    return np.column_stack([arrays[k] for k in keys])


def _column_keys(keys: list[str], arrays: dict[str, np.ndarray]) -> list[str]:
    """The NPZ key of each column of :func:`_join_columns`'s array."""
    return [k for k in keys for _ in range(1 if arrays[k].ndim == 1 else arrays[k].shape[1])]


def _read_table(
    path: Path,
    data: bytes,
    form: str,
    inputs: str | list[str] | tuple[str, ...] | None,
    target: str | None,
) -> tuple[np.ndarray, np.ndarray, str]:
    """The inputs ``(n, k)``, the targets ``(n,)`` and the target's name, from a table."""
    frame = _read_frame(path, data, form)
    columns = [str(c) for c in frame.columns]
    frame.columns = columns
    target = columns[-1] if target is None and columns else target
    names = [inputs] if isinstance(inputs, str) else inputs
    names = [c for c in columns if c != target] if names is None else list(names)
    _check_columns(path, columns, names, target)
    x, x_names = _numeric_columns(path, frame, names)
    y, _ = _numeric_columns(path, frame, [target])
    missing = "an empty field, or a short row" if form == "csv" else "a missing value"
    _check_finite(path, x, x_names, missing)
    _check_finite(path, y, [target], missing)
    kinds = frame[target].dtype.kind
    y = y[:, 0].astype(np.int64) if kinds in "iub" else y[:, 0]
    return _float32(path, x), y, target


def _check_columns(path: Path, columns: list[str], inputs: list[str], target: str | None) -> None:
    """Refuse inputs or a target that are not columns, a target among the inputs, no inputs."""
    missing = [c for c in (*inputs, target) if c not in columns]
    if missing:
        problem = f"no column {missing[0]!r}"
    elif target in inputs:
        problem = f"the target {target!r} is also an input"
    elif not inputs:
        problem = "no input column"
    else:
        return
    raise DataError(f"{path}: {problem} (its columns: {', '.join(columns) or 'none'})")


def _read_frame(path: Path, data: bytes, form: str):
    """The file's table, read by pandas."""
    what = "a CSV file" if form == "csv" else "a Parquet file"
    try:
        import pandas as pd  # optional: sgrld[files]

        if form == "csv":
            return pd.read_csv(io.BytesIO(data))
        return pd.read_parquet(io.BytesIO(data))
    except ImportError as err:
        raise DataError(
            f"{path}: reading {what} needs {err.name or 'pyarrow'} (pip install 'sgrld[files]')"
        ) from None
    except (ValueError, OSError) as err:
        if form == "csv" and "Expected" in str(err):
            raise DataError(f"{path}: a ragged row: {str(err).strip()}") from None
        raise DataError(f"{path}: not readable as {what} ({str(err).strip()})") from None


def _numeric_columns(path: Path, frame, names: list[str]) -> Columns:
    """The columns ``names`` of ``frame`` as ``float64 (n, k)`` (missing values NaN), each
    checked to be numbers."""
    import pandas as pd  # optional: sgrld[files]; loaded by _read_frame

    for name in names:
        column = frame[name]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            continue
        numbers = pd.to_numeric(column, errors="coerce")
        bad = np.flatnonzero((numbers.isna() & column.notna()).to_numpy())
        value = f"row {bad[0]}: {column.iloc[bad[0]]!r}" if bad.size else f"{column.dtype}"
        raise DataError(f"{path}: column {name!r} is not numeric ({value})")
    return frame[names].to_numpy(np.float64, na_value=np.nan), names


def _check_finite(
    path: Path, values: np.ndarray, names: list[str], missing: str | None = None
) -> None:
    """Refuse a NaN or an infinite value in ``values (n, k)``, naming its column and row (and,
    for a NaN, the ``missing`` value of a table it may come from)."""
    bad = ~np.isfinite(values.astype(np.float64, copy=False))
    if bad.any():
        row, col = np.argwhere(bad)[0]
        value = values[row, col]
        what = f"{value}" if not np.isnan(value) else f"a NaN ({missing})" if missing else "a NaN"
        count = int(bad.sum())
        raise DataError(
            f"{path}: {names[col]!r} has {what} at row {row} ({count} such value"
            f"{'s' if count > 1 else ''}); drop or fill the rows"
        )


def _float32(path: Path, values: np.ndarray) -> np.ndarray:
    """``values`` as float32, refusing one too large for float32."""
    too_large = np.abs(values.astype(np.float64, copy=False)) > FLOAT32_MAX
    if too_large.any():
        raise DataError(f"{path}: a value {values[too_large][0]} is too large for float32")
    return values.astype(np.float32)


def _targets(path: Path, y: np.ndarray, name: str, task: str) -> tuple[np.ndarray, int]:
    """The targets as float32 (regression, 0 classes) or int32 labels and the number of classes."""
    whole = np.issubdtype(y.dtype, np.integer) or y.dtype == bool
    if task == "regression" or (task == "auto" and not whole):
        return _float32(path, y), 0
    if not whole:
        fraction = np.flatnonzero(y != np.round(y))
        if fraction.size:
            i = int(fraction[0])
            raise DataError(
                f"{path}: target {name!r} is not a class label at row {i} ({y[i]}); "
                'classification needs whole numbers 0, 1, …, or task="regression"'
            )
    labels = y.astype(np.int64)
    num_classes = int(labels.max(initial=0)) + 1
    if num_classes < 2:
        raise DataError(f"{path}: target {name!r} has a single class; classification needs two")
    return check_labels(labels, num_classes, f"{path}: target {name!r}"), num_classes
