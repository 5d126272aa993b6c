"""CIFAR-10 in its "python version" format (``cifar-10-batches-py``).

The archive ``cifar-10-python.tar.gz`` from https://www.cs.toronto.edu/~kriz/cifar.html
extracts to ``cifar-10-batches-py/`` with ``data_batch_1`` ... ``data_batch_5`` (10000 training
images each) and ``test_batch``. Each is a pickle (written by Python 2, hence
``encoding="bytes"``) of a dict whose ``b"data"`` is a ``uint8`` array ``(n, 3072)``: per
image the 1024 red, then 1024 green, then 1024 blue pixels of a 32x32 image, row-major; and
whose ``b"labels"`` is a list of ``n`` ints in ``[0, 10)``. Only these two keys are read.

Security: unpickling can execute arbitrary code. Only load CIFAR files from a trusted source
(ideally the official archive, checked against its MD5 ``c58f30108f718f92721af3b95e74349a``).
As a second line of defence the unpickler here refuses every global except the few numpy
constructors an array needs, and the opcodes are read (:func:`pickletools.genops`, which runs
nothing) before unpickling, so that a length field larger than the file is refused before the
unpickler allocates it.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import Any

import numpy as np

from .dataset import check_labels
from .errors import DataError
from .files import DataFiles

__all__ = ["expected_layout", "load_cifar10", "parse_cifar_batch"]

_ALLOWED_GLOBALS = frozenset(
    {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),  # pickles written by numpy 1.x
        ("numpy._core.multiarray", "_reconstruct"),  # pickles written by numpy 2.x
        ("numpy.core.numeric", "_frombuffer"),  # protocol-5 pickles, numpy 1.x
        ("numpy._core.numeric", "_frombuffer"),  # protocol-5 pickles, numpy 2.x
        ("_codecs", "encode"),  # bytes in protocol-2 pickles written by Python 3
    }
)


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickler that resolves only the globals needed to rebuild numpy arrays."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")
        return super().find_class(module, name)


def parse_cifar_batch(
    data: bytes, image_shape: tuple[int, int, int] = (32, 32, 3), source: str = "<bytes>"
) -> tuple[np.ndarray, np.ndarray]:
    """Parse the bytes of one CIFAR-10 python batch file.

    Args:
        data: The whole pickle file.
        image_shape: ``(height, width, channels)`` of one image.
        source: Name of the file, used in error messages.

    Returns:
        ``(images, labels)``: ``uint8`` images ``(n, height, width, channels)`` (NHWC) and
        the labels as a 1-D integer array (not range-checked).

    Raises:
        DataError: If the pickle is truncated or corrupt, refers to a non-numpy global, is
            not a dict with ``b"data"`` and ``b"labels"``, or the arrays have the wrong
            dtype, shape or length.

    Example:
        >>> raw = np.arange(2 * 12, dtype=np.uint8).reshape(2, 12)
        >>> blob = pickle.dumps({b"data": raw, b"labels": [3, 4]})
        >>> images, labels = parse_cifar_batch(blob, (2, 2, 3))
        >>> images[0, 0, 0], labels
        (array([0, 4, 8], dtype=uint8), array([3, 4]))
    """
    try:
        for _ in pickletools.genops(data):  # checks every length against the data's size
            pass
        batch = _ArrayUnpickler(io.BytesIO(data), encoding="bytes").load()
    except Exception as err:  # a corrupt pickle can raise almost anything
        raise DataError(
            f"{source}: cannot unpickle a CIFAR batch ({type(err).__name__}: {err}); "
            f"the file is truncated or corrupt"
        ) from err
    if not isinstance(batch, dict) or not {b"data", b"labels"} <= batch.keys():
        found = list(batch)[:10] if isinstance(batch, dict) else type(batch).__name__
        raise DataError(f"{source}: expected a dict with keys b'data' and b'labels', got {found}")
    images = batch[b"data"]
    try:
        labels = np.asarray(batch[b"labels"])
    except (ValueError, TypeError, OverflowError) as err:  # ragged or mixed lists
        raise DataError(f"{source}: b'labels' is not a flat list of integers ({err})") from None
    height, width, channels = image_shape
    row = height * width * channels
    if not isinstance(images, np.ndarray) or images.dtype != np.uint8 or images.ndim != 2:
        what = f"{images.dtype} {images.shape}" if isinstance(images, np.ndarray) else images
        raise DataError(f"{source}: b'data' must be a 2-D uint8 array, got {what!s:.80}")
    if images.shape[1] != row:
        raise DataError(f"{source}: b'data' has {images.shape[1]} columns, expected {row}")
    if labels.shape != (len(images),):
        raise DataError(
            f"{source}: {labels.size} labels in b'labels' for {len(images)} images in b'data'"
        )
    nhwc = images.reshape(-1, channels, height, width).transpose(0, 2, 3, 1)
    return nhwc, labels


def expected_layout(image_shape: tuple[int, int, int] = (32, 32, 3), num_classes: int = 10) -> str:
    """What a CIFAR batch file must hold, for error messages.

    Example:
        >>> expected_layout()[:60]
        "expected layout: a pickled dict {b'data': uint8 array (n, 30"
    """
    height, width, channels = image_shape
    return (
        f"expected layout: a pickled dict {{b'data': uint8 array (n, {height * width * channels}),"
        f" one image a row, its {height * width} pixels of channel 0, then of channel 1, ..., "
        f"each {height}x{width} row-major; b'labels': list of n ints in [0, {num_classes})}}, "
        "as in cifar-10-batches-py of the official python archive"
    )


def load_cifar10(files: DataFiles) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Load the five training batches and the test batch of CIFAR-10.

    Args:
        files: The data set's files (``data_batch_1`` ... ``data_batch_5``, ``test_batch``)
            and checksum policy.

    Returns:
        ``(x_train, y_train, x_test, y_test)``: ``float32`` NHWC images in ``[0, 1]`` and
        ``int32`` labels; training batches concatenated in order.

    Raises:
        MissingDataError: If a file is missing.
        DataError: If a file fails its checksum or is malformed, or a label is out of range.
    """
    info = files.info
    parts = []
    for filename in info.files:
        path, data = files.read(filename)
        try:
            images, labels = parse_cifar_batch(data, info.image_shape, str(path))
            labels = check_labels(labels, info.num_classes, str(path))
        except DataError as err:
            layout = expected_layout(info.image_shape, info.num_classes)
            raise DataError(f"{err}; {layout}; {files.hint(filename)}") from err
        parts.append((images, labels))
    *train, (test_images, y_test) = parts
    train_images = np.concatenate([x for x, _ in train])
    y_train = np.concatenate([y for _, y in train])
    return (
        train_images.astype(np.float32) / 255,
        y_train,
        test_images.astype(np.float32) / 255,
        y_test,
    )
