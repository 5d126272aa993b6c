"""The LIBSVM binary sets of the registry (australian, a9a), read from tiny files the tests write:
labels to 0/1, the test hold-out, standardisation, checksums and the data directory."""

from __future__ import annotations

import numpy as np
import pytest

from sgrld.data import DATASETS, DataError, MissingDataError, load_dataset, resolve_data_dir
from sgrld.data.files import sha256_hex
from sgrld.data.libsvm import binary_labels

TEXT = b"".join(
    f"{'+1' if i % 3 else '-1'} 1:{i}.5 3:{i % 4} 14:{(-1) ** i}\n".encode() for i in range(10)
)
"""Ten australian-shaped rows (14 features, 2 and 4..13 absent)."""


def australian_dir(tmp_path, text: bytes = TEXT):
    folder = tmp_path / "libsvm_australian"
    folder.mkdir()
    (folder / "australian").write_bytes(text)
    return {"australian": sha256_hex(text)}


def test_registry_entries():
    assert DATASETS["australian"].num_features == 14 and DATASETS["a9a"].num_features == 123
    assert DATASETS["australian"].files == ("australian",)
    assert DATASETS["a9a"].files == ("a9a", "a9a.t")
    assert DATASETS["australian"].num_classes == DATASETS["a9a"].num_classes == 2


def test_australian_all_rows_standardised_labels_01(tmp_path):
    sums = australian_dir(tmp_path)
    ds = load_dataset("australian", tmp_path, test_size=0, checksums=sums, verify=True)
    assert ds.x_train.shape == (10, 14) and ds.x_test.shape == (0, 14) and len(ds.x_val) == 0
    assert ds.y_train.dtype == np.int32
    np.testing.assert_array_equal(ds.y_train, [0, 1, 1, 0, 1, 1, 0, 1, 1, 0])
    used = ds.x_train[:, [0, 2, 13]]
    np.testing.assert_allclose(used.mean(0), 0, atol=1e-6)
    np.testing.assert_allclose(used.std(0), 1, atol=1e-6)
    np.testing.assert_array_equal(ds.x_train[:, 1], 0)  # a constant column is only centred


def test_australian_holds_out_a_fixed_test_set(tmp_path):
    sums = australian_dir(tmp_path)
    a = load_dataset("australian", tmp_path, test_size=3, checksums=sums, seed=1)
    b = load_dataset("australian", tmp_path, test_size=3, checksums=sums, seed=2)
    assert len(a.x_train) == 7 and len(a.x_test) == 3
    np.testing.assert_array_equal(a.x_test, b.x_test)  # the validation seed does not move it
    with pytest.raises(ValueError, match="cannot hold out 11 of 10"):
        load_dataset("australian", tmp_path, test_size=11, checksums=sums)


def test_checksum_is_checked_by_default(tmp_path):
    australian_dir(tmp_path)  # its bytes are not the published file's
    with pytest.raises(DataError, match="SHA-256 mismatch"):
        load_dataset("australian", tmp_path)
    assert len(load_dataset("australian", tmp_path, verify=False, test_size=0).x_train) == 10


def test_a9a_reads_its_test_file_unstandardised(tmp_path):
    folder = tmp_path / "libsvm"  # the shared folder of LIBSVM sets
    folder.mkdir()
    (folder / "a9a").write_bytes(b"-1 3:1 123:1 \n+1 1:1 \n")
    (folder / "a9a.t").write_bytes(b"+1 2:1 \n")
    assert resolve_data_dir("a9a", tmp_path) == folder
    ds = load_dataset("a9a", tmp_path, verify=False)
    assert ds.x_train.shape == (2, 123) and ds.x_test.shape == (1, 123)
    assert set(np.unique(ds.x_train)) == {0.0, 1.0}
    np.testing.assert_array_equal(ds.y_train, [0, 1])
    with pytest.raises(ValueError, match="test_size is for a data set without"):
        load_dataset("a9a", tmp_path, verify=False, test_size=0)


def test_missing_file_names_where_to_get_it(tmp_path):
    with pytest.raises(MissingDataError, match="libsvmtools"):
        load_dataset("a9a", tmp_path)


@pytest.mark.parametrize(
    ("labels", "message"),
    [([1.0, 2.0], "label 2 of example 1 is not a binary label"), ([-1.0, 0.0], "mix -1 and 0")],
)
def test_non_binary_labels_are_refused(labels, message):
    with pytest.raises(DataError, match=message):
        binary_labels(np.array(labels), "f")
    np.testing.assert_array_equal(binary_labels(np.array([0.0, 1.0]), "f"), [0, 1])
