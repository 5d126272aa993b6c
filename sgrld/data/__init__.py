"""Data-set loaders: MNIST, Fashion-MNIST, CIFAR-10, digits and the UCI regression sets, and a
data set of one's own from an NPZ, CSV or Parquet file.

Everything is read from local files (nothing is downloaded) and returned as numpy arrays in
a :class:`Dataset`; see :func:`load_dataset`, :func:`resolve_data_dir` and :func:`load_file`.

Example:
    >>> from sgrld.data import load_dataset
    >>> load_dataset("digits", flatten=False).x_test.shape
    (359, 8, 8, 1)
"""

from .dataset import Dataset
from .errors import DataError, MissingDataError
from .loader import load_dataset
from .registry import DATA_DIR_ENV, DATASETS, DatasetInfo, resolve_data_dir
from .splits import holdout_indices, train_validation_split
from .user_files import load_file

__all__ = [
    "DATASETS",
    "DATA_DIR_ENV",
    "DataError",
    "Dataset",
    "DatasetInfo",
    "MissingDataError",
    "holdout_indices",
    "load_dataset",
    "load_file",
    "resolve_data_dir",
    "train_validation_split",
]
