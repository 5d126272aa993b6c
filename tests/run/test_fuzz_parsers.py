"""Fuzzing the data loaders: every damaged file either loads with consistent shapes or raises
:class:`~sgrld.data.DataError` naming the file; never another exception, a hang or a wrong shape.

Each test writes a small valid copy of a data set's files, replaces one file with a damaged version
(:func:`tests.fuzzing.damaged`, or an input built for that format: oversized header dimensions,
wrong dtypes, malformed numbers) and loads the whole set through the public loader. Example counts:
:data:`tests.fuzzing.FAST` per loader in the normal run, :data:`tests.fuzzing.SLOW` under
``-m slow``. The bugs these found have a regression test each at the end of the file.
"""

from __future__ import annotations

import gzip
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

from sgrld.data import DATASETS, DataError
from sgrld.data.cifar import load_cifar10, parse_cifar_batch
from sgrld.data.files import DataFiles
from sgrld.data.idx import load_idx
from sgrld.data.libsvm import load_libsvm, parse_libsvm
from sgrld.data.uci import load_uci, parse_table
from tests.fuzzing import BUDGETS, damaged, fuzz


def load_replaced(name: str, valid: dict[str, bytes], stored: str, data: bytes, load):
    """Write ``valid`` into a fresh folder with ``stored`` holding ``data``, then ``load`` it."""
    with tempfile.TemporaryDirectory() as folder:
        for filename, content in valid.items():
            if filename != stored.removesuffix(".gz"):
                (Path(folder) / filename).write_bytes(content)
        (Path(folder) / stored).write_bytes(data)
        return load(DataFiles.resolve(name, folder, checksums={}, verify=None))


def assert_names(err: DataError, filename: str) -> None:
    """The message names the damaged file."""
    assert filename.removesuffix(".gz") in str(err), str(err)


ODD_NUMBERS = ["nan", "inf", "-inf", "1e300", "-1e39", "3e38", "1e-50", "1" * 25, "9" * 5000]
ODD_NUMBERS += ["0x10", "1_0", "١", "1,5", "+", "-", ":", "1:", ":1", "\x00", "", "é"]


def mostly(valid: list[str]) -> st.SearchStrategy[str]:
    """A token: one of ``valid`` three times in four, else an odd number or a non-number."""
    return st.sampled_from(valid * 3 + ODD_NUMBERS[: len(valid)] + ODD_NUMBERS[len(valid) :])


def lines(rows: st.SearchStrategy[list[str]]) -> st.SearchStrategy[bytes]:
    """Text of up to eight lines, each a row of tokens joined by a space."""
    text = st.lists(rows.map(" ".join), max_size=8).map("\n".join)
    return text.map(lambda t: t.encode("utf-8", "surrogatepass"))


# --------------------------------------------------------------------------- IDX (MNIST)


def idx_file(array: np.ndarray) -> bytes:
    return (
        bytes([0, 0, 8, array.ndim])
        + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
        + array.tobytes()
    )


IDX_VALID = dict(
    zip(
        DATASETS["mnist"].files,
        [
            idx_file(np.arange(3 * 28 * 28, dtype=np.uint8).reshape(3, 28, 28)),
            idx_file(np.array([0, 9, 4], np.uint8)),
            idx_file(np.full((2, 28, 28), 7, np.uint8)),
            idx_file(np.array([1, 2], np.uint8)),
        ],
        strict=True,
    )
)


def idx_headers(ndim: int) -> st.SearchStrategy[bytes]:
    """IDX files with any dtype code and rank, oversized or zero dimensions, a short body."""
    dims = st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 30), min_size=0, max_size=ndim + 1)
    return st.builds(
        lambda code, rank, sizes, body: (
            bytes([0, 0, code, rank]) + b"".join(d.to_bytes(4, "big") for d in sizes) + body
        ),
        st.sampled_from([0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E]) | st.integers(0, 255),
        st.just(ndim) | st.integers(0, 255),
        dims,
        st.binary(max_size=64),
    )


def idx_cases() -> st.SearchStrategy[tuple[str, bytes]]:
    """(stored file name, content): raw damaged, gzipped damaged or a damaged gzip stream."""
    cases = []
    for filename, valid in IDX_VALID.items():
        content = damaged(valid, idx_headers(3 if "images" in filename else 1))
        cases += [
            st.tuples(st.just(filename), content),
            st.tuples(st.just(f"{filename}.gz"), content.map(lambda b: gzip.compress(b, mtime=0))),
            st.tuples(st.just(f"{filename}.gz"), damaged(gzip.compress(valid, mtime=0))),
        ]
    return st.one_of(cases)


@pytest.mark.parametrize("budget", BUDGETS)
def test_fuzz_idx_loader(budget):
    @fuzz(budget, idx_cases())
    def _(case):
        stored, data = case
        try:
            x_train, y_train, x_test, y_test = load_replaced(
                "mnist", IDX_VALID, stored, data, load_idx
            )
        except DataError as err:
            assert_names(err, stored)
            return
        for x, y in ((x_train, y_train), (x_test, y_test)):
            assert x.shape == (len(y), 28, 28, 1) and x.dtype == np.float32
            assert y.dtype == np.int32 and y.min() >= 0 and y.max() < 10


# --------------------------------------------------------------------------- CIFAR-10 pickles


def cifar_file(n: int, protocol: int) -> bytes:
    rows = np.arange(n * 3072, dtype=np.uint8).reshape(n, 3072)
    return pickle.dumps({b"data": rows, b"labels": list(range(n))}, protocol=protocol)


CIFAR_VALID = {name: cifar_file(2, protocol=2) for name in DATASETS["cifar10"].files}


class _OversizedArray:
    """Pickles as a uint8 array whose header claims ``shape`` but carries a few bytes."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape

    def __reduce__(self):
        rebuild = np.ndarray.__reduce__(np.zeros(1, np.uint8))
        return (*rebuild[:2], (1, self.shape, np.dtype(np.uint8), False, b"\0" * 16))


def cifar_wrong_types() -> st.SearchStrategy[bytes]:
    """Pickles of the wrong objects: dtypes, shapes, label lists, keys, oversized arrays."""
    arrays = st.builds(
        lambda dtype, shape: np.zeros(shape, dtype),
        st.sampled_from([np.uint8, np.int8, np.float32, np.int64, np.bool_, object]),
        st.sampled_from([(2, 3072), (2, 3071), (3072,), (2, 32, 32, 3), (0, 3072), ()]),
    )
    oversized = st.builds(
        _OversizedArray, st.tuples(st.integers(0, 2**62), st.sampled_from([3072, 2**40]))
    )
    scalars = st.one_of(st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=3), st.none())
    labels = st.one_of(
        st.lists(st.integers(-3, 12), min_size=0, max_size=3),
        st.lists(st.lists(st.integers(0, 9), max_size=2) | scalars, max_size=3),
        scalars,
        arrays,
    )
    batch = st.fixed_dictionaries(
        {}, optional={b"data": st.one_of(arrays, oversized, scalars), b"labels": labels}
    )
    return st.builds(
        pickle.dumps, st.one_of(batch, st.lists(arrays, max_size=2)), st.integers(0, 5)
    )


def cifar_cases() -> st.SearchStrategy[tuple[str, bytes]]:
    """(file name, content) for one of the six batches."""
    content = damaged(CIFAR_VALID["data_batch_1"], cifar_wrong_types())
    return st.tuples(st.sampled_from(sorted(CIFAR_VALID)), content)


@pytest.mark.parametrize("budget", BUDGETS)
def test_fuzz_cifar_loader(budget):
    @fuzz(budget, cifar_cases())
    def _(case):
        stored, data = case
        try:
            x_train, y_train, x_test, y_test = load_replaced(
                "cifar10", CIFAR_VALID, stored, data, load_cifar10
            )
        except DataError as err:
            assert_names(err, stored)
            return
        for x, y in ((x_train, y_train), (x_test, y_test)):
            assert x.shape == (len(y), 32, 32, 3) and x.dtype == np.float32
            assert y.dtype == np.int32 and y.min() >= 0 and y.max() < 10


# --------------------------------------------------------------------------- UCI regression text

UCI_VALID = {
    "data.txt": b"0.5 1 10\n1.5 2 20\n2.5 3 30\n3.5 4 40\n4.5 5 50\n5.5 6 60\n",
    "index_features.txt": b"0\n1\n",
    "index_target.txt": b"2\n",
    "n_splits.txt": b"1\n",
    "index_train_0.txt": b"0\n1\n2\n3\n",
    "index_test_0.txt": b"4\n5\n",
}


def uci_cases() -> st.SearchStrategy[tuple[str, bytes]]:
    """(file name, content) for one of the six files split 0 reads."""
    cell = mostly(["0.5", "-2", "3e2", "1"])
    tables = st.integers(1, 5).flatmap(
        lambda width: lines(st.lists(cell, min_size=width, max_size=width))
    )
    indices = lines(st.lists(mostly([str(i) for i in range(7)]), max_size=1))
    return st.one_of(
        [
            st.tuples(st.just(name), damaged(valid, tables if name == "data.txt" else indices))
            for name, valid in UCI_VALID.items()
        ]
    )


@pytest.mark.parametrize("budget", BUDGETS)
def test_fuzz_uci_loader(budget):
    @fuzz(budget, uci_cases())
    def _(case):
        stored, data = case
        try:
            x_train, y_train, x_test, y_test = load_replaced(
                "uci_boston", UCI_VALID, stored, data, lambda files: load_uci(files, 0)
            )
        except DataError as err:
            assert_names(err, stored)
            return
        assert x_train.ndim == x_test.ndim == 2 and x_train.shape[1] == x_test.shape[1] >= 1
        assert x_train.shape[0] == len(y_train) >= 1 and x_test.shape[0] == len(y_test) >= 1
        for array in (x_train, y_train, x_test, y_test):
            assert array.dtype == np.float32 and np.all(np.isfinite(array))


# --------------------------------------------------------------------------- LIBSVM text

LIBSVM_VALID = b"+1 1:0.5 3:2\n-1 2:-1 4:1e-3\r\n\n0 4:7\n"


def libsvm_cases() -> st.SearchStrategy[bytes]:
    value = mostly(["1", "-0.5", "2e3", "0"])
    index = mostly(["1", "2", "3", "4"])
    pairs = st.lists(st.builds("{}:{}".format, index, value), max_size=3)
    return damaged(LIBSVM_VALID, lines(st.builds(lambda y, xs: [y, *xs], value, pairs)))


@pytest.mark.parametrize("budget", BUDGETS)
def test_fuzz_libsvm_loader(budget, tmp_path):
    path = tmp_path / "train.libsvm"

    @fuzz(budget, libsvm_cases())
    def _(data):
        path.write_bytes(data)
        try:
            x, y = load_libsvm(path, num_features=4)
        except DataError as err:
            assert_names(err, str(path))
            return
        assert x.shape == (len(y), 4) and len(y) >= 1
        assert x.dtype == y.dtype == np.float32
        assert np.all(np.isfinite(x)) and np.all(np.isfinite(y))


# --------------------------------------------------------------------------- bugs found


def test_cifar_ragged_labels_are_a_data_error():
    blob = pickle.dumps({b"data": np.zeros((2, 12), np.uint8), b"labels": [[1], 2]})
    with pytest.raises(DataError, match="batch_1: b'labels' is not a flat list of integers"):
        parse_cifar_batch(blob, (2, 2, 3), "batch_1")


def test_libsvm_index_of_thousands_of_digits_is_a_data_error():
    with pytest.raises(DataError, match="f, line 1: feature index 1111.* is outside \\[1, 3\\]"):
        parse_libsvm(b"1 " + b"1" * 5000 + b":2\n", 3, "f")


def test_cifar_bytearray_longer_than_the_file_is_refused_before_unpickling():
    """A flipped opcode declaring an 8e18-byte bytearray made the C unpickler print a
    ``SystemError`` (a buffer export leaked past its bytearray); the length is now checked first.
    """
    code = (
        "import pickle, numpy as np\n"
        "from sgrld.data import DataError\n"
        "from sgrld.data.cifar import parse_cifar_batch\n"
        "blob = bytearray(pickle.dumps({b'data': np.zeros((2, 3072), np.uint8)}, protocol=2))\n"
        "blob[blob.index(b'latin1q\\x03\\x86') + 8] = 0x96  # TUPLE2 -> BYTEARRAY8\n"
        "try:\n"
        "    parse_cifar_batch(bytes(blob), source='batch_1')\n"
        "except DataError as err:\n"
        "    print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "batch_1: cannot unpickle" in out.stdout and "bytearray8" in out.stdout
    assert out.stderr == ""


def test_uci_value_beyond_float32_is_a_data_error():
    with pytest.raises(DataError, match="data.txt: row 1 holds a value beyond float32's range"):
        parse_table(b"1 2\n1e300 3\n", "data.txt")


def test_libsvm_value_beyond_float32_is_a_data_error():
    with pytest.raises(DataError, match="f, line 2: label '1e100' is beyond float32's range"):
        parse_libsvm(b"1 1:2\n1e100 2:1\n", 3, "f")


def test_uci_target_among_features_names_both_index_files(tmp_path):
    for name, content in {**UCI_VALID, "index_features.txt": b"2\n"}.items():
        (tmp_path / name).write_bytes(content)
    files = DataFiles.resolve("uci_boston", tmp_path, checksums={}, verify=None)
    with pytest.raises(DataError, match="index_target.txt .* not a feature .*index_features.txt"):
        load_uci(files, 0)
