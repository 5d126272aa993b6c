"""The one entry point, :func:`load_dataset`: read a data set, split it, preprocess it.

Known data sets: ``"mnist"``, ``"fashion_mnist"`` (IDX files, raw or ``.gz``),
``"cifar10"`` (python pickles), ``"digits"`` (bundled with scikit-learn; ignores
``data_dir``, ``verify`` and ``checksums``) and the UCI regression sets ``"uci_boston"``,
``"uci_concrete"``, ``"uci_energy"``, ``"uci_kin8nm"``, ``"uci_naval"``, ``"uci_power"``,
``"uci_protein"``, ``"uci_wine"``, ``"uci_yacht"`` (the text files of Hernández-Lobato &
Adams's splits, :mod:`sgrld.data.uci`) and the LIBSVM binary sets ``"australian"`` and ``"a9a"``
(:mod:`sgrld.data.libsvm`, labels 0/1). Nothing is downloaded: the error for a missing file
says where to get it. Where the files are looked for is described in
:func:`sgrld.data.resolve_data_dir`.

Splits: the official test set is kept as is (for ``"digits"``, a fixed 20 % = 359
images; for a UCI set, the rows of ``index_test_{split}.txt``; for a9a, ``a9a.t``); a set with
no official test split (australian) holds out ``test_size`` rows as its test set (default
``DATASETS[name].test_size``: 138 = 20 % for australian; 0 keeps every row for training and
leaves the test set empty), with a fixed seed independent of ``seed``; ``validation_size``
examples of the official training set are held out with
``np.random.default_rng(seed).permutation`` (see :func:`sgrld.data.holdout_indices`).
Defaults: 10000 for MNIST, Fashion-MNIST and CIFAR-10, as in Yu et al. (2023), leaving
50000 / 50000 / 40000 training examples; 180 (10 %) for digits, leaving 1258; none for the
UCI and LIBSVM sets (the UCI sets' published protocol trains on the whole training split).

Inputs are ``float32`` pixels divided by their maximum (255, or 16 for digits), or the
UCI and LIBSVM features as they are. With ``standardize`` they are then standardised per channel
(per feature) with the mean and std of the training split; a regression target is then
standardised the same way, and ``target_mean`` / ``target_std`` of the result undo it
(``y = y_std·target_std + target_mean``). By default CIFAR-10, the UCI sets and australian are
standardised; a9a's binary features are kept 0/1 (standardising would blow a rare indicator up
to a large value). With ``flatten`` each image becomes a vector in height-width-channel order
(784 for MNIST, 3072 for CIFAR-10, 64 for digits), else it keeps its NHWC shape.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from .cifar import load_cifar10
from .dataset import Dataset
from .digits import load_digits_arrays
from .files import DataFiles
from .idx import load_idx
from .libsvm import load_libsvm_set
from .registry import DatasetInfo, dataset_info
from .splits import train_validation_split
from .transforms import flatten_inputs, standardize_channels
from .uci import load_uci

__all__ = ["load_dataset", "preprocess"]

_FILE_LOADERS = {"idx": load_idx, "cifar": load_cifar10}


def load_dataset(
    name: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    validation_size: int | None = None,
    seed: int = 1,
    split: int = 0,
    test_size: int | None = None,
    flatten: bool = True,
    standardize: bool | None = None,
    verify: bool | None = None,
    checksums: Mapping[str, str] | None = None,
) -> Dataset:
    """Load a data set from local files and split off a validation set.

    Known names: ``sgrld.data.DATASETS``. Nothing is downloaded; the splits and the input and
    target preprocessing are described in :mod:`sgrld.data.loader`.

    Args:
        name: Data-set name, one of ``sgrld.data.DATASETS``.
        data_dir: Base data directory, or the folder holding the files; ``None`` uses
            ``$SGRLD_DATA_DIR``, else ``~/.cache/sgrld/data``.
        validation_size: Training examples held out for validation; ``None`` for the
            data set's default, ``0`` for none.
        seed: Seed of the validation split.
        split: The published train/test split of a UCI set, ``0 <= split < n_splits``;
            the other data sets have only split 0.
        test_size: Examples held out as the test set of a set with no official test split
            (australian); ``None`` for the data set's default, ``0`` for none.
        flatten: Return ``(n, features)`` inputs instead of ``(n, height, width, channels)``.
        standardize: Standardise per channel (and regression targets); ``None`` means yes
            for CIFAR-10 and the UCI sets.
        verify: Check SHA-256 checksums: ``None`` checks every file whose exact name has a
            known checksum, ``True`` additionally fails for a file with none, ``False``
            checks nothing.
        checksums: SHA-256 (hex) per exact file name, replacing the built-in table of the
            data set (``sgrld.data.DATASETS[name].checksums``); ``None`` keeps it.

    Returns:
        The :class:`Dataset`, with ``int32`` labels (``float32`` targets for regression).

    Raises:
        ValueError: If ``name`` is unknown, ``validation_size``, ``split`` or ``test_size`` out
            of range, or ``test_size`` given for a data set with a test split.
        MissingDataError: If a file is missing (also a ``FileNotFoundError``).
        DataError: If a file fails its checksum, is truncated or malformed.

    Example:
        >>> ds = load_dataset("digits")
        >>> ds.x_train.shape, ds.x_val.shape, ds.x_test.shape, ds.num_classes
        ((1258, 64), (180, 64), (359, 64), 10)
        >>> ds.x_train.dtype, ds.y_train.dtype
        (dtype('float32'), dtype('int32'))
    """
    info = dataset_info(name)
    x_full, y_full, x_test, y_test = _read_splits(
        info, data_dir, (split, test_size), checksums, verify
    )
    size = info.validation_size if validation_size is None else validation_size
    x_train, y_train, x_val, y_val = train_validation_split(x_full, y_full, size, seed)
    splits = (x_train, y_train, x_val, y_val, x_test, y_test)
    standardize = info.standardize if standardize is None else standardize
    return preprocess(splits, info.num_classes, info.name, standardize=standardize, flatten=flatten)


def preprocess(
    splits: tuple[np.ndarray, ...],
    num_classes: int,
    name: str,
    *,
    standardize: bool,
    flatten: bool,
) -> Dataset:
    """Standardise (inputs per channel, regression targets) and flatten the six split arrays.

    Args:
        splits: ``(x_train, y_train, x_val, y_val, x_test, y_test)``.
        num_classes: Number of classes; 0 for regression (whose targets ``standardize`` scales).
        name: The data set's name.
        standardize: Standardise with the training split's statistics
            (:func:`sgrld.data.transforms.standardize_channels`).
        flatten: Flatten each input to a vector (:func:`sgrld.data.transforms.flatten_inputs`).

    Returns:
        The :class:`Dataset`.

    Example:
        >>> x, y = np.arange(8.0, dtype=np.float32).reshape(4, 2), np.arange(4.0, dtype=np.float32)
        >>> ds = preprocess((x, y, x[:0], y[:0], x, y), 0, "toy", standardize=True, flatten=True)
        >>> ds.x_train.std(axis=0), ds.target_mean
        (array([1., 1.], dtype=float32), 1.5)
    """
    x_train, y_train, x_val, y_val, x_test, y_test = splits
    target_mean, target_std = 0.0, 1.0
    if standardize:
        x_train, x_val, x_test = standardize_channels(x_train, x_val, x_test)
        if not num_classes:
            (y_train, y_val, y_test), target_mean, target_std = _standardize_targets(
                y_train, y_val, y_test
            )
    if flatten:
        x_train, x_val, x_test = map(flatten_inputs, (x_train, x_val, x_test))
    return Dataset(
        x_train,
        y_train,
        x_val,
        y_val,
        x_test,
        y_test,
        num_classes,
        name,
        target_mean,
        target_std,
    )


def _read_splits(
    info: DatasetInfo,
    data_dir: str | os.PathLike[str] | None,
    splits: tuple[int, int | None],
    checksums: Mapping[str, str] | None,
    verify: bool | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x_train, y_train, x_test, y_test)`` of a data set, read by the loader of its format;
    ``splits`` are ``load_dataset``'s ``split`` and ``test_size``."""
    split, test_size = splits
    if info.format != "uci" and split != 0:
        raise ValueError(f"only the UCI data sets have splits, not {info.name!r} (split={split!r})")
    if test_size is not None and not info.test_size:
        raise ValueError(
            f"test_size is for a data set without an official test split (australian), not "
            f"{info.name!r} (test_size={test_size!r})"
        )
    if info.format == "sklearn":
        return load_digits_arrays()
    files = DataFiles.resolve(info.name, data_dir, checksums, verify)
    if info.format == "uci":
        return load_uci(files, split)
    if info.format == "libsvm":
        size = info.test_size if test_size is None else test_size
        return load_libsvm_set(files, size)
    return _FILE_LOADERS[info.format](files)


def _standardize_targets(*targets: np.ndarray) -> tuple[tuple[np.ndarray, ...], float, float]:
    """Standardise regression targets with the mean and std of the first (the training split).

    Returns:
        ``(standardised, mean, std)``: ``(y - mean) / std`` in ``float32`` for each of
        ``targets``, and the two statistics (a zero std is replaced by 1).
    """
    target_mean = float(np.mean(targets[0], dtype=np.float64))
    target_std = float(np.std(targets[0], dtype=np.float64)) or 1.0
    return (
        tuple(((y - target_mean) / target_std).astype(np.float32) for y in targets),
        target_mean,
        target_std,
    )
