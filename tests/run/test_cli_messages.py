"""What ``sgrld`` says, and refuses, when a path is not what the command expects: ``export``
does not destroy a file it did not write, ``diagnose`` / ``export`` of a missing folder say it is
missing, ``--help`` gives the defaults the docs give, and ``run`` / ``sweep`` into a used folder
suggest ``--resume`` only when there is something to resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sgrld
from sgrld.samples.results import ResultsError
from sgrld_app import cli
from sgrld_app.config import load_config, write_config
from sgrld_app.launch import run_config
from tests.helpers import digits_toml

TINY = [
    "data.name=digits",
    "data.batch_size=64",
    "model.widths=[8]",
    "prior.kind=gaussian",
    "sampler.learning_rate=0.1",
    "run.epochs=1",
    "run.burn_in=0",
    "run.thin=5",
    "run.chains=2",
    "run.save_samples=true",
]


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """A finished tiny run with saved samples."""
    out = tmp_path_factory.mktemp("run") / "out"
    assert run_config(load_config(None, TINY), out=out).status == "completed"
    return out


def _one_line_error(capsys, *words: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith("sgrld: error: ") and err.count("\n") == 1, err
    for word in words:
        assert word in err, (word, err)
    return err


@pytest.mark.parametrize("fmt", ["netcdf", "zarr"])
def test_export_refuses_a_file_it_did_not_write(run_folder, tmp_path, fmt, capsys):
    target = tmp_path / "afile"
    target.write_text("my notes")
    assert cli.main(["export", str(run_folder), "--format", fmt, "--to", str(target)]) == 2
    _one_line_error(capsys, str(target), "already exists", "--overwrite", "--to")
    assert target.read_text() == "my notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # no temporary left
    argv = ["export", str(run_folder), "--format", fmt, "--to", str(target), "--overwrite"]
    assert cli.main(argv) == 0
    assert target.is_dir() == (fmt == "zarr")
    assert sgrld.samples.arviz_export.earlier_export(target)
    theirs = tmp_path / "theirs"
    theirs.write_text("theirs")
    with pytest.raises(ResultsError, match="already exists"):  # the function refuses too
        sgrld.samples.arviz_export.export(run_folder, fmt, to=theirs)
    assert theirs.read_text() == "theirs"


def test_export_replaces_an_earlier_export_without_asking(run_folder, tmp_path, capsys):
    for fmt, name in [("netcdf", "a.nc"), ("zarr", "a.zarr")]:
        argv = ["export", str(run_folder), "--format", fmt, "--to", str(tmp_path / name)]
        assert cli.main(argv) == 0
        assert cli.main(argv) == 0  # again: the export's own file
    assert cli.main(["export", str(run_folder), "--format", "zarr"]) == 0  # the default target
    assert cli.main(["export", str(run_folder), "--format", "zarr"]) == 0
    assert "error" not in capsys.readouterr().err


def test_export_refuses_a_zarr_store_it_did_not_write_and_never_replaces_a_folder(
    run_folder, tmp_path, capsys
):
    zarr = pytest.importorskip("zarr")
    store = tmp_path / "theirs.zarr"
    zarr.open_group(str(store), mode="w").attrs["owner"] = "someone else"
    argv = ["export", str(run_folder), "--format", "zarr", "--to", str(store)]
    assert cli.main(argv) == 2
    _one_line_error(capsys, str(store), "not an earlier sgrld export", "--overwrite")
    assert dict(zarr.open_group(str(store), mode="r").attrs) == {"owner": "someone else"}
    assert cli.main([*argv, "--overwrite"]) == 0
    assert sgrld.samples.arviz_export.earlier_export(store)

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep")
    for fmt in ("netcdf", "zarr"):
        argv = ["export", str(run_folder), "--format", fmt, "--to", str(folder), "--overwrite"]
        assert cli.main(argv) == 2
        _one_line_error(capsys, str(folder), "not a Zarr store", "another --to")
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("command", ["diagnose", "export"])
def test_a_missing_results_folder_is_named_as_missing(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main([command, "nothere"]) == 2
    err = _one_line_error(capsys, "the results folder nothere does not exist")
    assert "no samples" not in err
    assert not Path("nothere").exists()  # export created nothing
    Path("afile").write_text("")
    assert cli.main([command, "afile"]) == 2
    _one_line_error(capsys, "afile is a file, not a folder")


@pytest.mark.parametrize(
    "command, words",
    [
        ("export", ["--format", "(default: netcdf)", "--overwrite", "OUT/inference_data.nc"]),
        ("diagnose", ["--params", "(>= 1; default: 8)", "--seed", "(default: 0)"]),
    ],
)
def test_help_gives_the_defaults(command, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([command, "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for word in words:
        assert word in text, word


@pytest.fixture
def config_file(tmp_path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(digits_toml(epochs=1, burn_in=0, thin=5))
    return path


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_folder_with_nothing_to_resume_is_not_offered_to_resume(
    command, config_file, tmp_path, capsys
):
    """An empty ``checkpoints/`` is no run that ``--resume`` could continue: the refusal says
    what to do instead, and ``--resume`` agrees that there is nothing to resume."""
    out = tmp_path / "D"
    (out / "checkpoints").mkdir(parents=True)
    grid = ["--grid", "sampler.learning_rate=[0.05,0.1]"] if command == "sweep" else []
    assert cli.main([command, str(config_file), *grid, "--out", str(out)]) == 2
    err = _one_line_error(capsys, str(out), "checkpoints", "no run to resume", "--overwrite")
    assert "remove the folder or choose another --out" in err and "--resume" not in err
    assert cli.main([command, str(config_file), *grid, "--resume", str(out)]) == 2
    _one_line_error(capsys, f"--resume {out}: no run to resume there")
    assert sorted(p.name for p in out.iterdir()) == ["checkpoints"]


def test_a_folder_with_a_run_is_offered_to_resume_by_the_command_that_made_it(
    config_file, tmp_path, capsys
):
    out = tmp_path / "D"
    write_config(load_config(config_file, [f"out.folder={json.dumps(str(out))}"]), out)
    (out / "checkpoints").mkdir()
    assert cli.main(["run", str(config_file), "--out", str(out)]) == 2
    _one_line_error(capsys, f"continue it with `sgrld run --resume {out}`", "--overwrite")
    meta = {"meta": {"sweep": {"grid": {"sampler.learning_rate": [0.1, 0.2]}, "replicates": 1}}}
    (out / "summary.json").write_text(json.dumps(meta))
    assert cli.main(["run", str(config_file), "--out", str(out)]) == 2
    _one_line_error(capsys, f"continue it with `sgrld sweep --resume {out}`")
    (out / "config.toml").unlink()  # --resume without a file reads OUT/config.toml
    assert cli.main(["run", str(config_file), "--out", str(out)]) == 2
    _one_line_error(capsys, f"`sgrld sweep CONFIG.toml --resume {out}`")
