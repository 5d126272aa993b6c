"""Tests of sgrld.data: IDX and CIFAR-10 parsing, checksums, directories, splits, digits."""

from __future__ import annotations

import gzip
import hashlib
import pickle
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from sgrld.data import (
    DATA_DIR_ENV,
    DATASETS,
    DataError,
    MissingDataError,
    holdout_indices,
    load_dataset,
    resolve_data_dir,
)
from sgrld.data.cifar import parse_cifar_batch
from sgrld.data.idx import parse_idx

IDX_NAMES = ("train-images", "train-labels", "t10k-images", "t10k-labels")
MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
FASHION_URL = "https://github.com/zalandoresearch/fashion-mnist"
REAL_MNIST = Path("/work/shared/data/mnist")


# --------------------------------------------------------------------------- helpers


def idx_bytes(array: np.ndarray, header: bytes | None = None) -> bytes:
    """Serialise a uint8 array as IDX; ``header`` replaces the 4-byte magic number."""
    magic = bytes([0, 0, 8, array.ndim]) if header is None else header
    dims = b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return magic + dims + array.astype(np.uint8).tobytes()


def idx_filename(stem: str) -> str:
    return f"{stem}-idx{3 if 'images' in stem else 1}-ubyte"


def mnist_arrays(n_train: int = 20, n_test: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    """Random MNIST-like arrays; image i of the train set has pixel (0, 0) = i."""
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels": rng.integers(0, 10, n_train, dtype=np.uint8),
        "t10k-images": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    arrays["train-images"][:, 0, 0] = np.arange(n_train)
    return arrays


def write_mnist(directory: Path, arrays: dict[str, np.ndarray], gz: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for stem, array in arrays.items():
        data = idx_bytes(array)
        name = idx_filename(stem)
        if gz:
            (directory / f"{name}.gz").write_bytes(gzip.compress(data, mtime=0))
        else:
            (directory / name).write_bytes(data)
    return directory


def cifar_arrays(n: int = 12, seed: int = 0) -> list[tuple[np.ndarray, list[int]]]:
    """Six batches (5 train, 1 test) of random NHWC uint8 images and labels."""
    rng = np.random.default_rng(seed)
    return [
        (rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, n).tolist())
        for _ in range(6)
    ]


def cifar_batch_bytes(images: np.ndarray, labels: list[int]) -> bytes:
    """Pickle a batch as in the official files: channel-major rows of 3072 bytes."""
    rows = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    return pickle.dumps({b"batch_label": b"test", b"data": rows, b"labels": labels})


def write_cifar(directory: Path, batches: list[tuple[np.ndarray, list[int]]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name, (images, labels) in zip(names, batches, strict=True):
        (directory / name).write_bytes(cifar_batch_bytes(images, labels))
    return directory


@pytest.fixture
def mnist_dir(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    arrays = mnist_arrays()
    return write_mnist(tmp_path / "mnist", arrays), arrays


# --------------------------------------------------------------------------- IDX


def test_idx_exact_values_and_shapes(mnist_dir):
    directory, arrays = mnist_dir
    ds = load_dataset("mnist", directory, validation_size=0, verify=False)
    assert ds.name == "mnist" and ds.num_classes == 10
    assert ds.x_train.shape == (20, 784) and ds.x_train.dtype == np.float32
    assert ds.x_val.shape == (0, 784) and ds.y_val.shape == (0,)
    np.testing.assert_array_equal(
        ds.x_train, arrays["train-images"].reshape(20, 784).astype(np.float32) / 255
    )
    np.testing.assert_array_equal(ds.x_test.reshape(8, 28, 28) * 255, arrays["t10k-images"])
    assert ds.y_train.dtype == np.int32 and ds.y_test.dtype == np.int32
    np.testing.assert_array_equal(ds.y_train, arrays["train-labels"])
    np.testing.assert_array_equal(ds.y_test, arrays["t10k-labels"])

    nhwc = load_dataset("mnist", directory, validation_size=0, verify=False, flatten=False)
    assert nhwc.x_train.shape == (20, 28, 28, 1)
    np.testing.assert_array_equal(nhwc.x_train.reshape(20, 784), ds.x_train)


def test_raw_and_gz_give_identical_arrays(tmp_path):
    arrays = mnist_arrays()
    raw = load_dataset(
        "mnist", write_mnist(tmp_path / "raw", arrays), verify=False, seed=5, validation_size=4
    )
    gz = load_dataset(
        "fashion_mnist",
        write_mnist(tmp_path / "gz", arrays, gz=True),
        verify=False,
        seed=5,
        validation_size=4,
    )
    assert gz.name == "fashion_mnist"
    for a, b in zip(raw[:6], gz[:6], strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_raw_file_is_preferred_over_gz(tmp_path):
    directory = write_mnist(tmp_path, mnist_arrays(seed=1), gz=True)
    arrays = mnist_arrays(seed=2)
    write_mnist(tmp_path, arrays)
    ds = load_dataset("mnist", directory, validation_size=0, verify=False)
    np.testing.assert_array_equal(ds.y_train, arrays["train-labels"])


def test_validation_split_is_seeded_disjoint_and_complete(mnist_dir):
    directory, arrays = mnist_dir

    def split(seed):
        ds = load_dataset("mnist", directory, validation_size=5, seed=seed, verify=False)
        # pixel (0, 0) of training image i is i
        return np.rint(ds.x_train[:, 0] * 255).astype(int), np.rint(ds.x_val[:, 0] * 255), ds

    train, val, ds = split(3)
    assert ds.x_train.shape == (15, 784) and ds.x_val.shape == (5, 784)
    assert ds.y_train.shape == (15,) and ds.y_val.shape == (5,)
    expected_val = np.sort(np.random.default_rng(3).permutation(20)[:5])
    np.testing.assert_array_equal(val, expected_val)
    assert set(train).isdisjoint(val) and sorted({*train, *val}) == list(range(20))
    np.testing.assert_array_equal(ds.y_val, arrays["train-labels"][expected_val])
    np.testing.assert_array_equal(ds.y_train, arrays["train-labels"][train])

    train_again, val_again, _ = split(3)
    np.testing.assert_array_equal(val_again, val)
    np.testing.assert_array_equal(train_again, train)
    assert not np.array_equal(split(4)[1], val)


def test_default_validation_size_is_10000(mnist_dir):
    directory, _ = mnist_dir
    assert DATASETS["mnist"].validation_size == DATASETS["fashion_mnist"].validation_size == 10000
    with pytest.raises(ValueError, match="cannot hold out 10000 of 20"):
        load_dataset("mnist", directory, verify=False)


def test_holdout_indices_match_documented_permutation():
    kept, held = holdout_indices(10, 3, seed=7)
    perm = np.random.default_rng(7).permutation(10)
    np.testing.assert_array_equal(held, np.sort(perm[:3]))
    np.testing.assert_array_equal(kept, np.sort(perm[3:]))
    with pytest.raises(ValueError):
        holdout_indices(10, 11, seed=0)
    with pytest.raises(TypeError):
        holdout_indices(10, 2.5, seed=0)


@pytest.mark.parametrize(
    ("data", "ndim", "match"),
    [
        (idx_bytes(np.zeros((2, 3, 3)), header=bytes([8, 3, 0, 0])), 3, "wrong magic number"),
        (idx_bytes(np.zeros((2, 3, 3)), header=bytes([0, 0, 0x0D, 3])), 3, "dtype code 0x0d"),
        (idx_bytes(np.zeros((2, 3, 3))), 1, "has 3 dimensions"),
        (idx_bytes(np.zeros((2, 3, 3)))[:-1], 3, r"truncated: 33 bytes.*needs 34"),
        (idx_bytes(np.zeros((2, 3, 3))) + b"\0", 3, "trailing bytes"),
        (bytes([0, 0, 8, 3, 0, 0]), 3, "truncated IDX header"),
        (b"\0\0", 1, "too short"),
    ],
)
def test_parse_idx_rejects_malformed(data, ndim, match):
    with pytest.raises(DataError, match=match):
        parse_idx(data, ndim, "somefile")


def test_parse_idx_reads_big_endian_dims():
    array = np.arange(2 * 3 * 300, dtype=np.uint64).astype(np.uint8).reshape(2, 3, 300)
    np.testing.assert_array_equal(parse_idx(idx_bytes(array), 3), array)


def test_truncated_idx_file_names_file_hash_and_source(mnist_dir):
    directory, _ = mnist_dir
    path = directory / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DataError, match="truncated") as info:
        load_dataset("mnist", directory, verify=False)
    message = str(info.value)
    assert str(path) in message
    assert DATASETS["mnist"].checksums["train-images-idx3-ubyte"] in message
    assert MNIST_URL in message


def test_wrong_magic_in_file(mnist_dir):
    directory, arrays = mnist_dir
    path = directory / "t10k-labels-idx1-ubyte"
    path.write_bytes(idx_bytes(arrays["t10k-labels"], header=bytes([0, 0, 8, 3])))
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte: IDX file has 3 dimensions"):
        load_dataset("mnist", directory, validation_size=0, verify=False)


def test_truncated_gz_file(tmp_path):
    directory = write_mnist(tmp_path, mnist_arrays(), gz=True)
    path = directory / "train-labels-idx1-ubyte.gz"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DataError, match="not a valid gzip file") as info:
        load_dataset("fashion_mnist", directory, verify=False)
    assert str(path) in str(info.value) and FASHION_URL in str(info.value)


def test_label_count_mismatch_and_out_of_range(tmp_path):
    arrays = mnist_arrays()
    arrays["train-labels"] = arrays["train-labels"][:19]
    directory = write_mnist(tmp_path / "a", arrays)
    with pytest.raises(DataError, match="has 19 labels but .*train-images-idx3-ubyte has 20"):
        load_dataset("mnist", directory, verify=False)

    arrays = mnist_arrays()
    arrays["t10k-labels"][3] = 10
    directory = write_mnist(tmp_path / "b", arrays)
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte: label 10 at index 3 is outside"):
        load_dataset("mnist", directory, validation_size=0, verify=False)


def test_wrong_image_size(tmp_path):
    arrays = mnist_arrays()
    arrays["t10k-images"] = np.zeros((8, 28, 27), np.uint8)
    directory = write_mnist(tmp_path, arrays)
    with pytest.raises(DataError, match="images are 28x27, expected 28x28"):
        load_dataset("mnist", directory, validation_size=0, verify=False)


# --------------------------------------------------------------------------- checksums


def test_checksum_mismatch_names_path_expected_hash_and_source(mnist_dir):
    directory, _ = mnist_dir
    path = directory / "train-images-idx3-ubyte"
    expected = DATASETS["mnist"].checksums["train-images-idx3-ubyte"]
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(DataError, match="SHA-256 mismatch") as info:
        load_dataset("mnist", directory)  # verify defaults to on: the name has a checksum
    message = str(info.value)
    assert str(path) in message and expected in message and actual in message
    assert MNIST_URL in message and "verify=False" in message


def test_config_can_skip_the_checksums(mnist_dir):
    from sgrld_app.config import load_config
    from sgrld_app.from_config import build_experiment

    directory, arrays = mnist_dir
    keys = [f"data.data_dir={directory}", "data.validation_size=0", "model.widths=[4]"]
    with pytest.raises(DataError, match="data.verify_checksums = false"):
        build_experiment(load_config(None, keys))
    experiment = build_experiment(load_config(None, [*keys, "data.verify_checksums=false"]))
    assert len(experiment.eval_sets["test"][1]) == len(arrays["t10k-labels"])


def test_gz_checksums_apply_to_fashion_mnist(tmp_path):
    directory = write_mnist(tmp_path, mnist_arrays(), gz=True)
    with pytest.raises(
        DataError, match=DATASETS["fashion_mnist"].checksums["train-images-idx3-ubyte.gz"]
    ) as info:
        load_dataset("fashion_mnist", directory, validation_size=0)
    assert FASHION_URL in str(info.value)


def test_checksum_override_and_verify_true(mnist_dir):
    directory, arrays = mnist_dir
    table = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}
    ds = load_dataset("mnist", directory, validation_size=0, checksums=table, verify=True)
    np.testing.assert_array_equal(ds.y_test, arrays["t10k-labels"])

    del table["t10k-labels-idx1-ubyte"]
    with pytest.raises(DataError, match="verify=True but no SHA-256 is known"):
        load_dataset("mnist", directory, validation_size=0, checksums=table, verify=True)
    # with verify=None the file lacking a checksum is simply not checked
    load_dataset("mnist", directory, validation_size=0, checksums=table)

    table["t10k-images-idx3-ubyte"] = "0" * 64
    with pytest.raises(DataError, match="0{64}"):
        load_dataset("mnist", directory, validation_size=0, checksums=table)


# --------------------------------------------------------------------------- missing files


def test_missing_file_names_file_directory_hash_and_url(mnist_dir):
    directory, _ = mnist_dir
    (directory / "train-labels-idx1-ubyte").unlink()
    with pytest.raises(MissingDataError) as info:
        load_dataset("mnist", directory, verify=False)
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, ValueError)
    message = str(info.value)
    assert "train-labels-idx1-ubyte or train-labels-idx1-ubyte.gz not found in" in message
    assert str(directory) in message and MNIST_URL in message
    assert DATASETS["mnist"].checksums["train-labels-idx1-ubyte"] in message


def test_missing_data_dir_lists_searched_directories(tmp_path):
    with pytest.raises(MissingDataError) as info:
        load_dataset("fashion_mnist", tmp_path)
    message = str(info.value)
    assert f"not found in {tmp_path / 'fashion_mnist'} " in message
    assert f"directories searched: {tmp_path / 'fashion_mnist'}, {tmp_path};" in message
    assert FASHION_URL in message and DATA_DIR_ENV in message
    assert DATASETS["fashion_mnist"].checksums["train-images-idx3-ubyte.gz"] in message

    with pytest.raises(MissingDataError, match=r"data_batch_1 not found.*c58f30108f718f92"):
        load_dataset("cifar10", tmp_path)


# --------------------------------------------------------------------------- directories


def test_resolve_data_dir_order(tmp_path, monkeypatch):
    env_dir, arg_dir, home = tmp_path / "env", tmp_path / "arg", tmp_path / "home"
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("HOME", str(home))
    assert resolve_data_dir("mnist") == home / ".cache/sgrld/data/mnist"

    monkeypatch.setenv(DATA_DIR_ENV, str(env_dir))
    assert resolve_data_dir("fashion_mnist") == env_dir / "fashion_mnist"
    assert resolve_data_dir("mnist", arg_dir) == arg_dir / "mnist"

    write_mnist(env_dir, mnist_arrays())  # files directly in the base directory
    assert resolve_data_dir("mnist") == env_dir
    write_mnist(env_dir / "mnist", mnist_arrays(), gz=True)  # the subfolder wins
    assert resolve_data_dir("mnist") == env_dir / "mnist"

    monkeypatch.setenv(DATA_DIR_ENV, "")  # empty counts as unset
    assert resolve_data_dir("mnist") == home / ".cache/sgrld/data/mnist"


def test_load_through_environment_variable(tmp_path, monkeypatch):
    arrays = mnist_arrays()
    write_mnist(tmp_path / "mnist", arrays)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    ds = load_dataset("mnist", validation_size=0, verify=False)
    np.testing.assert_array_equal(ds.y_train, arrays["train-labels"])


def test_unknown_names_and_fileless_dataset():
    with pytest.raises(ValueError, match="unknown data set 'svhn'"):
        load_dataset("svhn")
    with pytest.raises(ValueError, match="reads no data directory"):
        resolve_data_dir("digits")


# --------------------------------------------------------------------------- CIFAR-10


@pytest.mark.parametrize(
    "subdir", ["cifar10/cifar-10-batches-py", "cifar10", "cifar-10-batches-py", ""]
)
def test_cifar_exact_values_in_every_accepted_directory(tmp_path, subdir):
    batches = cifar_arrays()
    write_cifar(tmp_path / subdir, batches)
    assert resolve_data_dir("cifar10", tmp_path) == tmp_path / subdir
    ds = load_dataset(
        "cifar10", tmp_path, validation_size=0, standardize=False, flatten=False, verify=False
    )
    train = np.concatenate([images for images, _ in batches[:5]])
    assert ds.x_train.shape == (60, 32, 32, 3) and ds.x_test.shape == (12, 32, 32, 3)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    np.testing.assert_array_equal(ds.x_train, train.astype(np.float32) / 255)
    np.testing.assert_array_equal(ds.x_test * 255, batches[5][0])
    np.testing.assert_array_equal(ds.y_train, sum((labels for _, labels in batches[:5]), []))
    np.testing.assert_array_equal(ds.y_test, batches[5][1])


def test_cifar_flatten_is_hwc_and_standardize_uses_train_stats(tmp_path):
    batches = cifar_arrays()
    write_cifar(tmp_path, batches)
    ds = load_dataset("cifar10", tmp_path, validation_size=12, seed=2, verify=False)
    assert ds.x_train.shape == (48, 3072) and ds.x_val.shape == (12, 3072)
    assert ds.x_test.shape == (12, 3072)

    train_full = np.concatenate([images for images, _ in batches[:5]]).astype(np.float32) / 255
    kept, held = holdout_indices(60, 12, seed=2)
    train = train_full[kept]
    mean = train.mean(axis=(0, 1, 2), dtype=np.float64).astype(np.float32)
    std = train.std(axis=(0, 1, 2), dtype=np.float64).astype(np.float32)
    test = batches[5][0].astype(np.float32) / 255
    np.testing.assert_allclose(ds.x_test, ((test - mean) / std).reshape(12, -1), rtol=1e-6)
    np.testing.assert_allclose(
        ds.x_val, ((train_full[held] - mean) / std).reshape(12, -1), rtol=1e-6
    )
    per_channel = ds.x_train.reshape(-1, 3)  # HWC order: channel is the fastest axis
    np.testing.assert_allclose(per_channel.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(per_channel.std(axis=0), 1, atol=1e-5)


def test_cifar_truncated_pickle(tmp_path):
    directory = write_cifar(tmp_path, cifar_arrays())
    path = directory / "data_batch_3"
    path.write_bytes(path.read_bytes()[:5000])
    with pytest.raises(DataError, match="cannot unpickle") as info:
        load_dataset("cifar10", directory, verify=False)
    assert str(path) in str(info.value) and "cs.toronto.edu" in str(info.value)


@pytest.mark.parametrize(
    ("batch", "match"),
    [
        ({b"labels": [1]}, "expected a dict with keys b'data' and b'labels'"),
        ([1, 2], "got list"),
        ({b"data": np.zeros((2, 3072), np.float32), b"labels": [0, 1]}, "2-D uint8 array"),
        ({b"data": np.zeros((2, 3000), np.uint8), b"labels": [0, 1]}, "3000 columns"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}, "1 labels in b'labels' for 2"),
    ],
)
def test_parse_cifar_batch_rejects_malformed(batch, match):
    with pytest.raises(DataError, match=match):
        parse_cifar_batch(pickle.dumps(batch), source="batchfile")


def test_cifar_unpickler_refuses_foreign_globals():
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    with pytest.raises(DataError, match="refusing to load global builtins.print"):
        parse_cifar_batch(pickle.dumps({b"data": Evil(), b"labels": []}))


def test_cifar_python2_numpy1_pickle():
    """The official files were pickled by Python 2 with numpy 1.x: str data, numpy.core names."""

    def short_string(data: bytes) -> bytes:  # SHORT_BINSTRING, a Python 2 str
        return b"U" + bytes([len(data)]) + data

    array = (
        b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85"
        + short_string(b"b")
        + b"\x87R(K\x01K\x02K\x03\x86cnumpy\ndtype\n"
        + short_string(b"u1")
        + b"K\x00K\x01\x87R(K\x03"
        + short_string(b"|")
        + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89"
        + short_string(bytes([10, 20, 30, 40, 50, 60]))
        + b"tb"
    )
    blob = (
        b"\x80\x02}("
        + short_string(b"batch_label")
        + short_string(b"training batch 1 of 5")
        + short_string(b"data")
        + array
        + short_string(b"labels")
        + b"](K\x01K\x02eu."
    )
    images, labels = parse_cifar_batch(blob, (1, 1, 3))
    np.testing.assert_array_equal(images, [[[[10, 20, 30]]], [[[40, 50, 60]]]])
    np.testing.assert_array_equal(labels, [1, 2])


def test_cifar_label_out_of_range(tmp_path):
    batches = cifar_arrays()
    batches[5][1][7] = 11
    directory = write_cifar(tmp_path, batches)
    with pytest.raises(DataError, match=r"test_batch: label 11 at index 7"):
        load_dataset("cifar10", directory, validation_size=0, verify=False)


# --------------------------------------------------------------------------- digits


def test_digits_splits_and_values():
    ds = load_dataset("digits", seed=1)
    assert ds.name == "digits" and ds.num_classes == 10
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (1258, 180, 359)
    assert ds.x_train.shape[1] == 64 and ds.x_train.dtype == np.float32
    assert ds.y_train.dtype == np.int32

    reference = load_digits()
    _, test_index = holdout_indices(1797, 359, seed=0)  # documented fixed test split
    np.testing.assert_array_equal(ds.x_test * 16, reference.data[test_index])
    np.testing.assert_array_equal(ds.y_test, reference.target[test_index])
    x_all = np.concatenate([ds.x_train, ds.x_val, ds.x_test])
    y_all = np.concatenate([ds.y_train, ds.y_val, ds.y_test])
    # the three splits together are exactly the 1797 images / 16, in some order
    order = np.lexsort(np.column_stack([x_all * 16, y_all]).T)
    ref_order = np.lexsort(np.column_stack([reference.data, reference.target]).T)
    np.testing.assert_array_equal(x_all[order] * 16, reference.data[ref_order])
    np.testing.assert_array_equal(y_all[order], reference.target[ref_order])

    other = load_dataset("digits", seed=2, flatten=False)
    assert other.x_test.shape == (359, 8, 8, 1)
    np.testing.assert_array_equal(other.x_test.reshape(359, 64), ds.x_test)  # fixed test set
    assert not np.array_equal(other.y_val, ds.y_val)


# --------------------------------------------------------------------------- real data


@pytest.mark.skipif(not REAL_MNIST.is_dir(), reason="real MNIST files not available")
def test_real_mnist_verified():
    ds = load_dataset("mnist", REAL_MNIST, verify=True)
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (50000, 10000, 10000)
    assert ds.x_train.shape[1] == 784
    assert ds.y_train.min() == 0 and ds.y_train.max() == 9
    assert ds.y_test.min() == 0 and ds.y_test.max() == 9
    assert ds.x_test.min() == 0.0 and ds.x_test.max() == 1.0


def test_digits_fall_back_to_scikit_learns_loader_without_the_bundled_file(monkeypatch):
    from sgrld.data import digits

    expected = digits.load_digits_arrays()
    monkeypatch.setattr(digits.importlib.util, "find_spec", lambda name: None)
    for got, want in zip(digits.load_digits_arrays(), expected, strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
