"""Resume and reading back (issue 38, item 4): warnings as one plain line, ``run --resume OUT --set
KEY=VALUE`` against OUT's own configuration (keys documented as changeable accepted), a truncated
sample file's error naming the file, ``sgrld --version``, and a refused ``demo`` leaving no folder.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import sgrld
from sgrld.samples.results import ResultsError, load_samples
from sgrld_app import cli
from tests.helpers import digits_toml

TINY = digits_toml(epochs=2, burn_in=1, thin=4, save_samples=True, checkpoint_seconds=0)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("run")
    (tmp / "tiny.toml").write_text(TINY)
    assert cli.main(["run", str(tmp / "tiny.toml"), "--out", str(tmp / "out")]) == 0
    return tmp / "out"


def test_a_warning_is_one_plain_line(monkeypatch, capsys):
    def warns(args):
        warnings.warn(
            "checkpoint epoch_0002.npz is corrupt; using epoch_0001.npz", UserWarning, stacklevel=1
        )
        return 0

    monkeypatch.setitem(cli.COMMANDS, "export", warns)
    assert cli.main(["export", "somewhere"]) == 0
    err = capsys.readouterr().err
    assert err == "sgrld: warning: checkpoint epoch_0002.npz is corrupt; using epoch_0001.npz\n"


def test_resume_with_set_compares_against_the_runs_own_configuration(run_folder, capsys):
    out = str(run_folder)
    assert cli.main(["run", "--resume", out, "--set", "run.checkpoint_seconds=5"]) == 0
    assert cli.main(["run", "--resume", out, "--set", "run.thin=2"]) == 2
    err = capsys.readouterr().err
    assert "run.thin" in err and "data.name" not in err and "model.widths" not in err, err


def test_a_truncated_sample_file_is_named(run_folder, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run_folder, copy)
    file = sorted((copy / "samples").glob("epoch_*.npz"))[-1]
    file.write_bytes(file.read_bytes()[:100])
    with pytest.raises(ResultsError, match=str(file)):
        load_samples(copy)


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"sgrld {sgrld.__version__}"


def test_a_refused_demo_leaves_no_folder(tmp_path, capsys):
    out = tmp_path / "results" / "demo"
    assert cli.main(["demo", "--epochs", "2", "--out", str(out)]) == 2
    assert "keep no sample" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()
