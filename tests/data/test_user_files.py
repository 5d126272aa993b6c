"""``sgrld.data.load_file``: one's own NPZ, CSV and Parquet files, their splits, their checksum and
every bad file refused with one line naming it (issue 51, item 3)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sgrld.data import DataError, MissingDataError, load_dataset, load_file


def _table(n: int = 50, classes: bool = True) -> pd.DataFrame:
    """A table of ``n`` rows: two features and a class label (or a real target)."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=n), rng.normal(size=n) * 3 + 1
    y = (a > 0).astype(np.int64) if classes else 2.0 * a - b + 5.0
    return pd.DataFrame({"a": a, "b": b, "y": y})


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".npz"])
@pytest.mark.parametrize("classes", [True, False])
def test_each_format_gives_the_same_data_set(tmp_path: Path, suffix: str, classes: bool):
    frame = _table(classes=classes)
    path = tmp_path / f"d{suffix}"
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".parquet":
        frame.to_parquet(path)
    else:
        np.savez(path, x=frame[["a", "b"]].to_numpy(), y=frame["y"].to_numpy())
    ds = load_file(path)
    assert ds.name == f"d{suffix}" and ds.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (35, 5, 10)  # 20 % test, 10 % val
    assert ds.x_train.dtype == np.float32 and ds.x_train.shape[1] == 2
    np.testing.assert_allclose(ds.x_train.mean(axis=0), 0, atol=1e-6)  # standardised on train
    np.testing.assert_allclose(ds.x_train.std(axis=0), 1, rtol=1e-5)
    if classes:
        assert ds.num_classes == 2 and ds.y_train.dtype == np.int32
        assert (ds.target_mean, ds.target_std) == (0.0, 1.0)
    else:
        assert ds.num_classes == 0 and ds.y_train.dtype == np.float32
        y = np.concatenate([ds.y_train, ds.y_val, ds.y_test]) * ds.target_std + ds.target_mean
        np.testing.assert_allclose(np.sort(y), np.sort(frame["y"]), rtol=1e-5)


def test_splits_sizes_seed_columns_and_task(tmp_path: Path):
    path = tmp_path / "d.csv"
    _table(classes=False).to_csv(path, index=False)
    ds = load_file(path, validation_size=0, test_size=0, standardize=False)
    np.testing.assert_array_equal(ds.x_train[:, 0], _table()["a"].to_numpy(np.float32))
    one, other = (load_file(path, seed=s, standardize=False) for s in (1, 2))
    np.testing.assert_array_equal(one.x_test, other.x_test)  # the test rows do not move with seed
    assert not np.array_equal(one.x_val, other.x_val)
    ds = load_file(path, inputs=["b"], target="a")
    assert ds.x_train.shape[1] == 1 and ds.num_classes == 0
    integral = tmp_path / "i.npz"
    np.savez(integral, x=np.ones((20, 3)), y=np.arange(20.0) % 3)
    assert load_file(integral).num_classes == 0  # float targets: regression unless stated
    assert load_file(integral, task="classification").num_classes == 3


def test_npz_keeps_image_shapes_and_joins_several_keys(tmp_path: Path):
    path = tmp_path / "img.npz"
    rng = np.random.default_rng(0)
    np.savez(
        path,
        images=rng.normal(size=(20, 4, 4, 2)),
        labels=np.arange(20) % 2,
        u=rng.normal(size=20),
        v=rng.normal(size=(20, 3)),
    )
    ds = load_file(path, inputs="images", target="labels")
    assert ds.x_train.shape[1:] == (4, 4, 2) and ds.num_classes == 2
    assert load_file(path, inputs=["u", "v"], target="labels").x_train.shape[1:] == (4,)


def test_the_registry_loader_is_unchanged_by_the_shared_preprocessing():
    ds = load_dataset("digits")
    assert ds.sha256 == "" and ds.x_train.shape == (1258, 64)


def _refused(path: Path, **options) -> str:
    """The one-line error of ``load_file(path, **options)``, which names the file."""
    with pytest.raises(DataError) as info:
        load_file(path, **options)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    return message


def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    return path


ROWS = "".join(f"{i},{i % 4},{i % 2}\n" for i in range(12))


@pytest.mark.parametrize(
    ("text", "options", "words"),
    [
        ("a,b,y\n" + ROWS, {"target": "label"}, ["no column 'label'", "a, b, y"]),
        ("a,b,y\n" + ROWS, {"inputs": ["a", "c"]}, ["no column 'c'"]),
        ("a,b,y\n" + ROWS, {"inputs": ["a", "y"]}, ["the target 'y' is also an input"]),
        ("a,b,y\n1,,0\n" + ROWS, {}, ["'b' has a NaN", "row 0"]),
        ("a,b,y\n" + ROWS + "3,4\n", {}, ["'y' has a NaN", "row 12", "short row"]),
        ("a,b,y\n" + ROWS + "1,2,3,4\n", {}, ["a ragged row", "line 14"]),
        ("a,b,y\n" + ROWS + "1,2,cat\n", {}, ["column 'y' is not numeric", "row 12: 'cat'"]),
        ("a,b,y\n" + ROWS + "1,x,0\n", {}, ["column 'b' is not numeric", "row 12: 'x'"]),
        ("a,b,y\n1,2,0\n3,4,1\n", {"validation_size": 2}, ["2 rows are too few"]),
        ("a,b,y\n" + ROWS, {"test_size": -1}, ["too few"]),
        ("a,b,y\n" + ROWS + "1,2,0.5\n", {"task": "classification"}, ["not a class label"]),
        ("a,b,y\n" + ROWS + "1,2,-1\n", {}, ["label -1"]),
        ("a,b,y\n1,2,0\n3,4,0\n5,6,0\n", {}, ["a single class"]),
        ("a,b,y\n" + ROWS + "1,1e300,0\n", {}, ["too large for float32"]),
        ("", {}, ["not readable as a CSV file"]),
    ],
)
def test_a_bad_table_is_one_line_naming_the_file(tmp_path: Path, text, options, words):
    message = _refused(_csv(tmp_path, text), **options)
    for word in words:
        assert word in message, message


def test_a_bad_npz_is_one_line_naming_the_file(tmp_path: Path):
    path = tmp_path / "bad.npz"
    np.savez(path, x=np.ones((10, 2)), y=np.arange(10) % 2)
    assert "no key 'labels' (its keys: x, y)" in _refused(path, target="labels")
    np.savez(path, x=np.array([[1.0, 2.0], [3.0]], dtype=object), y=np.arange(2))
    assert "'x' is not an array of numbers" in _refused(path)
    np.savez(path, x=np.array(["a", "b"]), y=np.arange(2))
    assert "<U1 values" in _refused(path)
    np.savez(path, x=np.ones((10, 2)), y=np.arange(9) % 2)
    assert "one row per example" in _refused(path)
    x = np.ones((10, 2))
    x[3, 1] = np.inf
    np.savez(path, x=x, y=np.arange(10) % 2)
    assert "'x' has inf at row 3" in _refused(path)
    path.write_bytes(b"not a zip")
    assert "not a readable NPZ file" in _refused(path)


def test_a_missing_or_unknown_file_is_refused(tmp_path: Path):
    with pytest.raises(MissingDataError, match="no such file"):
        load_file(tmp_path / "nothing.csv")
    assert "unknown file format '.txt'" in _refused(tmp_path / "d.txt")
    (tmp_path / "bad.parquet").write_bytes(b"garbage")
    assert "not readable as a Parquet file" in _refused(tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="task must be one of"):
        load_file(tmp_path / "d.csv", task="ranking")


def test_a_missing_parquet_engine_names_the_extra(tmp_path: Path, monkeypatch):
    path = tmp_path / "d.parquet"
    _table().to_parquet(path)

    def no_engine(*args, **kwargs):
        raise ImportError("Unable to find a usable engine", name="pyarrow")

    monkeypatch.setattr(pd, "read_parquet", no_engine)
    assert "needs pyarrow (pip install 'sgrld[files]')" in _refused(path)
