"""Data-set loaders: MNIST, Fashion-MNIST, CIFAR-10, digits and the UCI regression sets.

Everything is read from local files (nothing is downloaded) and returned as numpy arrays in
a :class:`Dataset`; see :func:`load_dataset` and :func:`resolve_data_dir`.

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

__all__ = [
    "DATASETS",
    "DATA_DIR_ENV",
    "DataError",
    "Dataset",
    "DatasetInfo",
    "MissingDataError",
    "holdout_indices",
    "load_dataset",
    "resolve_data_dir",
    "train_validation_split",
]
