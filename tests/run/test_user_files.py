"""``sgrld run`` on one's own data file (``data.path``: NPZ, CSV, Parquet) and model
(``model.factory``): each format of a regression and a classification set run, killed (SIGKILL)
and resumed bit for bit, exported and swept, one diagnosed; a Linen and an Equinox factory run and
diagnosed; every bad file (of each format) or factory one line naming it, with nothing written
(issue 51, item 3)."""

from __future__ import annotations

import hashlib
import itertools
import json
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import sgrld
from sgrld_app import checkpoint, cli
from tests.helpers import cpu_env
from tests.run.test_checkpoint import TIMING, _kill_when

ROWS = 60
"""Rows of each file: 12 test, 6 validation, 42 training (2 steps of 16 an epoch)."""
TINY = [
    "model.widths=[8]",
    "prior.kind=gaussian",
    "data.batch_size=16",
    "sampler.learning_rate=0.05",
    "run.epochs=3",
    "run.burn_in=2",
    "run.thin=2",
    "run.chains=2",
    "run.save_samples=true",
    "run.checkpoint_seconds=0",
]
FORMATS = list(itertools.product((".npz", ".csv", ".parquet"), (True, False)))


def _table(classes: bool) -> pd.DataFrame:
    """Three features and a class label 0/1 or a real target."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, 3))
    y = (x[:, 0] > 0).astype(np.int64) if classes else x @ [1.0, -2.0, 0.5] + 3.0
    return pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "y": y})


def _write(folder: Path, suffix: str, classes: bool, changed: bool = False) -> Path:
    """The file of :func:`_table` (``changed``: its first row's target changed) in a format."""
    path = folder / f"{'classes' if classes else 'targets'}{suffix}"
    frame = _table(classes)
    if changed:
        frame.loc[0, "y"] = 1 - frame.loc[0, "y"]
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".parquet":
        frame.to_parquet(path)
    else:
        np.savez(path, x=frame[["a", "b", "c"]].to_numpy(), y=frame["y"].to_numpy())
    return path


def _argv(command: str, path: Path, out: Path, *settings: str) -> list[str]:
    sets = [f"data.path={json.dumps(str(path))}", *TINY, *settings]
    return [command, *(arg for s in sets for arg in ("--set", s)), "--out", str(out)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``run(suffix, classes) -> (file, results folder)``, each run once in this module."""
    root, done = tmp_path_factory.mktemp("user_files"), {}

    def run(suffix: str, classes: bool) -> tuple[Path, Path]:
        if (suffix, classes) not in done:
            path = _write(root, suffix, classes)
            out = root / f"run-{path.name}"
            assert cli.main(_argv("run", path, out)) == 0
            done[suffix, classes] = path, out
        return done[suffix, classes]

    return run


def _records(out: Path) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


@pytest.mark.long
@pytest.mark.parametrize(("suffix", "classes"), FORMATS)
def test_each_format_of_each_task_runs_with_its_checksum_recorded(runs, suffix, classes):
    path, out = runs(suffix, classes)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert summary["meta"]["data_file"] == {"path": str(path.resolve()), "sha256": digest}
    last = _records(out)[-1]
    assert ("test_accuracy" in last) == classes and ("test_rmse" in last) != classes
    assert sgrld.load_samples(out).params["net"]["Dense_0"]["kernel"].shape[1:] == (2, 3, 8)


def _refuses_a_changed_file(argv: list[str], path: Path, classes: bool, capsys) -> None:
    """``sgrld *argv`` (a resume of the run or sweep in ``argv[-1]``) on ``path`` changed since
    (one target changed) is one line naming it, stdout empty (no "Resuming … -> OUT"), and
    touches nothing; ``path`` is then restored."""
    out, original = Path(argv[-1]), path.read_bytes()
    _write(path.parent, path.suffix, classes, changed=True)
    try:
        before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
        capsys.readouterr()
        assert cli.main(argv) == 2
        printed = capsys.readouterr()
        assert printed.out == "", printed.out
        err = printed.err.strip()
        assert err.startswith(f"sgrld: error: {path.resolve()}: changed since the run in {out}")
        assert "\n" not in err and {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    finally:
        path.write_bytes(original)


def _same_run(got: Path, want: Path) -> None:
    """The runs in ``got`` and ``want`` have the same records and the same samples, bit for bit."""
    assert _records(got) == _records(want)
    a, b = sgrld.load_samples(got), sgrld.load_samples(want)
    assert a.names == b.names
    for x, y in zip(jax.tree.leaves(a[:4]), jax.tree.leaves(b[:4]), strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.long
@pytest.mark.parametrize(("suffix", "classes"), FORMATS)
def test_each_file_run_killed_resumes_bit_for_bit_refuses_a_changed_file_and_exports(
    runs, tmp_path, capsys, suffix, classes
):
    path, ref = runs(suffix, classes)
    out, log = tmp_path / "out", tmp_path / "log.txt"
    # each checkpoint's write pauses 2 s before its rename: the run is killed in the pause after
    # epoch 1's or, on a starved poller, epoch 2's (a window of 4 s before it would end)
    env = {**cpu_env(), checkpoint.PAUSE_ENV: "2"}
    with log.open("w") as f:
        cmd = [sys.executable, "-m", "sgrld", *_argv("run", path, out)]
        proc = subprocess.Popen(cmd, stdout=f, stderr=f, env=env)
    ready = checkpoint.path_of(out, 1).exists
    assert _kill_when(proc, ready) == -signal.SIGKILL, log.read_text()
    assert json.loads((out / "summary.json").read_text())["status"] == "running"

    _refuses_a_changed_file(["run", "--resume", str(out)], path, classes, capsys)
    assert cli.main(["run", "--resume", str(out)]) == 0
    _same_run(out, ref)

    assert cli.main(["export", str(out)]) == 0
    with xr.open_datatree(out / "inference_data.nc", engine="h5netcdf") as tree:
        sizes = tree.posterior.sizes
        observed = None if classes else tree.observed_data["y"].to_numpy()
    assert (sizes["chain"], sizes["draw"]) == (2, 2)
    if observed is not None:  # the training rows' targets, rebuilt from the file, in its units
        rows = _table(False)["y"].to_numpy()
        assert len(observed) == 42
        assert np.abs(observed[:, None] - rows).min(axis=1).max() < 1e-5 * rows.std()


@pytest.mark.long
def test_a_regression_file_run_is_diagnosed_from_its_file(runs, capsys):
    _, out = runs(".csv", False)
    capsys.readouterr()
    assert cli.main(["diagnose", str(out)]) == 0
    assert "kernel Stein discrepancy (IMQ)" in capsys.readouterr().out  # the file read again


@pytest.mark.long
@pytest.mark.parametrize(("suffix", "classes"), FORMATS)
def test_each_file_is_swept_and_its_resume_refuses_a_changed_file(
    tmp_path: Path, capsys, suffix, classes
):
    path = _write(tmp_path, suffix, classes)
    argv = _argv("sweep", path, tmp_path / "sweep", "run.chains=1")
    assert cli.main([*argv, "--grid", "sampler.learning_rate=[0.02, 0.05]"]) == 0
    sweep = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert len(sweep["rows"]) == 2 and path.name in capsys.readouterr().out
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert summary["meta"]["data_file"] == {"path": str(path.resolve()), "sha256": digest}
    grid = ["--grid", "sampler.learning_rate=[0.02, 0.05]"]  # a resume reads the file again
    _refuses_a_changed_file(
        ["sweep", *grid, "--resume", str(tmp_path / "sweep")], path, classes, capsys
    )


FACTORIES = """
from flax import linen

def linen_mlp(num_outputs):
    return linen.Sequential([linen.Dense(8), linen.tanh, linen.Dense(num_outputs)])

def equinox_mlp(key, num_outputs, input_shape):
    import equinox as eqx  # an optional extra, sgrld[equinox]: only this factory needs it

    return eqx.nn.MLP(input_shape[0], num_outputs, 8, 1, key=key)

def three():
    return 3

def four_outputs(num_outputs):
    return linen.Dense(4)
"""


@pytest.fixture
def factories(tmp_path: Path, monkeypatch) -> str:
    """A module of factories in the working directory, by a name no other test uses."""
    name = f"my_models_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(FACTORIES))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the working directory is put first
    yield name
    sys.modules.pop(name, None)


@pytest.mark.long
@pytest.mark.parametrize(("function", "leaf"), [("linen_mlp", "layers_0"), ("equinox_mlp", None)])
def test_a_factory_built_network_runs_and_is_diagnosed(
    tmp_path: Path, factories, capsys, function, leaf
):
    if function == "equinox_mlp":
        pytest.importorskip("equinox")  # installed in CI by sgrld[dev]
    path = _write(tmp_path, ".csv", True)
    argv = _argv("run", path, tmp_path / "out", f'model.factory="{factories}:{function}"')
    assert cli.main(argv) == 0
    net = sgrld.load_samples(tmp_path / "out").params["net"]
    assert (leaf in net) if leaf else len(jax.tree.leaves(net)) == 4  # Equinox: 2 weights, 2 biases
    capsys.readouterr()
    assert cli.main(["diagnose", str(tmp_path / "out")]) == 0  # the KSD rebuilds the model's tree
    assert "kernel Stein discrepancy (IMQ)" in capsys.readouterr().out


def _refused(argv: list[str], out: Path, capsys) -> str:
    """The one line ``sgrld`` printed for ``argv`` (exit code 2), after checking that nothing
    was written and that stdout is empty (the header, "Running … -> OUT" or "Sweeping … -> OUT",
    comes once the data and the model are built and checked)."""
    capsys.readouterr()
    code = cli.main(argv)
    printed = capsys.readouterr()
    err = printed.err.strip()
    assert code == 2, err
    assert err.startswith("sgrld: error: ") and "\n" not in err and "Traceback" not in err
    assert printed.out == "", printed.out
    assert not out.exists()
    return err


GOOD = "a,b,y\n" + "".join(f"{i},{i % 4},{i % 2}\n" for i in range(30))


@pytest.mark.parametrize(
    ("text", "settings", "words"),
    [
        (None, [], ["nothing.csv: no such file"]),
        (GOOD, ["data.target=label"], ["bad.csv: no column 'label'"]),
        (GOOD + "1,,0\n", [], ["bad.csv: 'b' has a NaN", "row 30"]),
        (GOOD + "1,2,0,7\n", [], ["bad.csv: a ragged row", "line 32"]),
        (GOOD + "1,2,cat\n", [], ["bad.csv: column 'y' is not numeric", "row 30: 'cat'"]),
        (GOOD, ["data.validation_size=24"], ["bad.csv: 30 rows are too few", "validation"]),
        (GOOD, ["model.factory=nosuchmodule_51:f"], ["no module named 'nosuchmodule_51'"]),
        (GOOD, ["model.factory={name}:missing"], [".py has no 'missing'"]),
        (GOOD, ["model.factory={name}:three"], ["returned a builtins.int, not a Flax"]),
        (GOOD, ["model.factory={name}:four_outputs"], ["to (2, 4), not (2, 2)"]),
        (GOOD, ["model.kind=regression_mlp"], ["data.path = ", "is a classification data set"]),
    ],
)
def test_a_bad_file_or_factory_is_one_line_and_nothing_is_written(
    tmp_path: Path, factories, capsys, text, settings, words
):
    path = tmp_path / ("bad.csv" if text is not None else "nothing.csv")
    if text is not None:
        path.write_text(text)
    settings = [s.format(name=factories) for s in settings]
    err = _refused(_argv("run", path, tmp_path / "out", *settings), tmp_path / "out", capsys)
    for word in words:
        assert word in err, err


def _npz(path: Path, problem: str) -> None:
    """An NPZ file of 30 rows with ``problem``."""
    x, y = np.arange(60.0).reshape(30, 2), np.arange(30) % 2
    if problem == "nan":
        x[7, 1] = np.nan
    if problem == "ragged":
        x = np.array([[1.0, 2.0], [3.0]] * 15, dtype=object)
    if problem == "text":
        y = np.array(["cat", "dog"] * 15)
    keys = {"x": x, ("label" if problem == "missing" else "y"): y}
    np.savez(path, **keys)


def _parquet(path: Path, problem: str) -> None:
    """A Parquet file of 30 rows with ``problem``."""
    frame = pd.DataFrame({"a": np.arange(30.0), "b": np.arange(30) % 4, "y": np.arange(30) % 2})
    if problem == "nan":
        frame["b"] = frame["b"].astype(float).where(frame.index != 7)
    if problem == "text":
        frame["y"] = frame["y"].map({0: "cat", 1: "dog"})
    frame.rename(columns={"y": "label"} if problem == "missing" else {}).to_parquet(path)


@pytest.mark.parametrize(
    ("suffix", "problem", "words"),
    [
        (".npz", "missing", ["bad.npz: no key 'y' (its keys: x, label)"]),
        (".npz", "nan", ["bad.npz: 'x' has a NaN", "row 7"]),
        (".npz", "ragged", ["bad.npz: key 'x' is not an array of numbers", "ragged rows?"]),
        (".npz", "text", ["bad.npz: key 'y' is not an array of numbers: <U3 values"]),
        (".parquet", "missing", ["bad.parquet: no column 'y' (its columns: a, b, label)"]),
        (".parquet", "nan", ["bad.parquet: 'b' has a NaN", "row 7"]),
        (".parquet", "text", ["bad.parquet: column 'y' is not numeric", "row 0: 'cat'"]),
    ],
)
def test_a_bad_npz_or_parquet_file_is_one_line_and_nothing_is_written(
    tmp_path: Path, capsys, suffix, problem, words
):
    path = tmp_path / f"bad{suffix}"
    (_npz if suffix == ".npz" else _parquet)(path, problem)
    target = ["data.target=y"] if suffix == ".parquet" else []
    err = _refused(_argv("run", path, tmp_path / "out", *target), tmp_path / "out", capsys)
    for word in words:
        assert word in err, err


@pytest.mark.parametrize(
    ("text", "settings", "words"),
    [
        (GOOD + "1,,0\n", [], "bad.csv: 'b' has a NaN"),
        (GOOD, ["data.target=label"], "bad.csv: no column 'label'"),
        (GOOD, ["model.factory=nosuchmodule_51:f"], "no module named 'nosuchmodule_51'"),
        (GOOD, ["data.batch_size=64"], "data.batch_size = 64 is larger than the training set"),
    ],
)
@pytest.mark.parametrize("grid", ["sampler.learning_rate=[0.02, 0.05]", "sampler.temperature=[1]"])
def test_a_sweep_of_a_bad_file_or_factory_is_one_line_too(
    tmp_path, capsys, text, settings, words, grid
):
    """Also where each setting's rate is searched (``learning_rate = "auto"``): the search
    comes after the checks."""
    bad, out = tmp_path / "bad.csv", tmp_path / "out"
    bad.write_text(text)
    rate = ['sampler.learning_rate="auto"'] if "temperature" in grid else []
    argv = _argv("sweep", bad, out, *settings, *rate, "run.chains=1")
    assert words in _refused([*argv, "--grid", grid], out, capsys)


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (['data.path="d.csv"', "data.name=digits"], "data.name: a key of the registry's data sets"),
        (['data.path="d.csv"', "data.split=1"], "data.split: a key of the registry's data sets"),
        (['data.path="d.csv"', "data.task=ranking"], "data.task: unknown value 'ranking'"),
        (['data.path="d.csv"', "data.inputs=[]"], "data.inputs: names no input"),
        (["data.target=y"], "data.target: a key of a data file (data.path), not of 'mnist'"),
        (['model.factory="my_models"'], "model.factory: 'my_models' is not of the form"),
    ],
)
def test_keys_of_a_data_file_or_a_factory_are_checked_with_the_configuration(
    tmp_path: Path, capsys, settings, words
):
    argv = ["run", *(arg for s in settings for arg in ("--set", s)), "--out", str(tmp_path / "o")]
    assert words in _refused(argv, tmp_path / "o", capsys)


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_resume_on_a_changed_file_is_one_line_and_prints_nothing(tmp_path, capsys, command):
    path, out = _write(tmp_path, ".csv", True), tmp_path / "out"
    fast = ["model.widths=[2]", "run.chains=1", "run.epochs=1", "run.burn_in=0", "run.thin=1"]
    grid = ["--grid", "sampler.learning_rate=[0.05]"] if command == "sweep" else []
    assert cli.main([*_argv(command, path, out, *fast, "run.save_samples=false"), *grid]) == 0
    _refuses_a_changed_file([command, *grid, "--resume", str(out)], path, True, capsys)
