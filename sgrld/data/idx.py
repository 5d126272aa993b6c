"""The IDX file format of MNIST and Fashion-MNIST.

An IDX file is a big-endian header followed by the raw array:

* 4-byte magic number: two zero bytes, a dtype code (``0x08`` = unsigned byte, the only code
  used by MNIST) and the number of dimensions (3 for images, 1 for labels, so the magic
  numbers are 2051 and 2049),
* one unsigned 32-bit big-endian size per dimension,
* ``prod(sizes)`` data bytes, row-major.

See http://yann.lecun.com/exdb/mnist/ (bottom of the page).
"""

from __future__ import annotations

import math

import numpy as np

from .dataset import check_labels
from .errors import DataError
from .files import DataFiles

__all__ = ["IDX_UBYTE", "load_idx", "parse_idx"]

IDX_UBYTE = 0x08
"""IDX dtype code of unsigned bytes."""


def parse_idx(data: bytes, ndim: int, source: str = "<bytes>") -> np.ndarray:
    """Parse the bytes of an unsigned-byte IDX file.

    Args:
        data: The whole (decompressed) file.
        ndim: Expected number of dimensions (3 for images, 1 for labels).
        source: Name of the file, used in error messages.

    Returns:
        A read-only ``uint8`` array of the shape given in the header, viewing ``data``.

    Raises:
        DataError: On a wrong magic number, a dtype code other than ``0x08``, an unexpected
            number of dimensions, or a data size that does not match the header (truncated
            file or trailing bytes).

    Example:
        >>> parse_idx(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9]), ndim=1)
        array([7, 8, 9], dtype=uint8)
    """
    expected_magic = (IDX_UBYTE << 8) | ndim
    if len(data) < 4:
        raise DataError(f"{source}: {len(data)} bytes, too short for an IDX magic number")
    magic = int.from_bytes(data[:4], "big")
    if data[:2] != b"\0\0":
        raise DataError(
            f"{source}: wrong magic number 0x{magic:08x} ({magic}), expected "
            f"0x{expected_magic:08x} ({expected_magic}); not an IDX file"
        )
    if data[2] != IDX_UBYTE:
        raise DataError(
            f"{source}: IDX dtype code 0x{data[2]:02x}, expected 0x{IDX_UBYTE:02x} (unsigned byte)"
        )
    if data[3] != ndim:
        raise DataError(
            f"{source}: IDX file has {data[3]} dimensions (magic {magic}), expected {ndim} "
            f"(magic {expected_magic})"
        )
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataError(f"{source}: truncated IDX header ({len(data)} of {header} bytes)")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    size = header + math.prod(shape)
    if len(data) != size:
        problem = "truncated" if len(data) < size else "has trailing bytes"
        raise DataError(
            f"{source}: {problem}: {len(data)} bytes, but the header's shape {shape} needs {size}"
        )
    return np.frombuffer(data, np.uint8, offset=header).reshape(shape)


def _read(files: DataFiles, filename: str, ndim: int) -> tuple[str, np.ndarray]:
    path, data = files.read(filename)
    try:
        return str(path), parse_idx(data, ndim, str(path))
    except DataError as err:
        raise DataError(f"{err}; {files.hint(filename)}") from err


def _load_split(
    files: DataFiles, images_name: str, labels_name: str
) -> tuple[np.ndarray, np.ndarray]:
    height, width, channels = files.info.image_shape
    images_path, images = _read(files, images_name, ndim=3)
    labels_path, labels = _read(files, labels_name, ndim=1)
    if images.shape[1:] != (height, width):
        raise DataError(
            f"{images_path}: images are {images.shape[1]}x{images.shape[2]}, expected "
            f"{height}x{width} for {files.info.name}; {files.hint(images_name)}"
        )
    if len(labels) != len(images):
        raise DataError(
            f"{labels_path} has {len(labels)} labels but {images_path} has {len(images)} "
            f"images; {files.hint(labels_name)}"
        )
    x = (images.astype(np.float32) / 255).reshape(-1, height, width, channels)
    return x, check_labels(labels, files.info.num_classes, labels_path)


def load_idx(files: DataFiles) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Load the train and test IDX files of an MNIST-like data set.

    Args:
        files: The data set's files (``train-``/``t10k-`` ``images-idx3``/``labels-idx1``
            ``-ubyte``, raw or ``.gz``) and checksum policy.

    Returns:
        ``(x_train, y_train, x_test, y_test)``: ``float32`` images in ``[0, 1]`` of shape
        ``(n, height, width, 1)`` and ``int32`` labels.

    Raises:
        MissingDataError: If a file is missing.
        DataError: If a file fails its checksum or is malformed, or if image and label
            counts differ, or a label is out of range.
    """
    train_images, train_labels, test_images, test_labels = files.info.files
    return (
        *_load_split(files, train_images, train_labels),
        *_load_split(files, test_images, test_labels),
    )
