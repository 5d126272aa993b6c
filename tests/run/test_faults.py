"""Operating-system errors while writing (issue 38, items 2 and 6): a full disk (``ENOSPC``), no
permission (``EACCES``), a path under a file, at each write site of ``sgrld run``, ``sweep``,
``export`` and ``diagnose``'s figure, give one line (the file, the error, what was kept, how to go
on), exit code 4 and no traceback; ``sgrld run --resume`` after making room gives the files of an
uninterrupted run. Before, each was a raw ``OSError`` traceback.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

import matplotlib.figure
import numpy as np
import pytest

from sgrld.samples import atomic
from sgrld_app import cli
from tests.helpers import digits_toml

TINY = digits_toml(
    epochs=3,
    burn_in=1,
    thin=4,
    chains=2,
    save_samples=True,
    checkpoint_every=1,
    checkpoint_seconds=0,
)
TIMING = ("epoch_s", "sample_s", "eval_s", "epoch_cpu_s")


def _inject(monkeypatch, part: str, code: int, nth: int = 1) -> None:
    """Make the ``nth`` write of a path containing ``part`` fail with ``code``, as the atomic
    writer reports it."""
    seen = []

    def failing(real):
        def write(path, *args):
            if part in str(path):
                seen.append(path)
                if len(seen) == nth:
                    raise atomic.WriteError(code, os.strerror(code), str(path))
            return real(path, *args)

        return write

    monkeypatch.setattr(atomic, "replacing", failing(atomic.replacing))
    monkeypatch.setattr(atomic, "appending", failing(atomic.appending))


def _sgrld(capsys, *argv: str) -> tuple[int, str]:
    """``sgrld *argv`` in this process: its exit code and its standard error (it must not
    raise: an exception would be a traceback)."""
    code = cli.main(list(argv))
    return code, capsys.readouterr().err


def _metrics(out: Path) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


def _samples(out: Path) -> dict[str, dict[str, np.ndarray]]:
    return {p.name: dict(np.load(p)) for p in sorted((out / "samples").glob("*.npz"))}


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("config") / "tiny.toml"
    path.write_text(TINY)
    return path


@pytest.fixture(scope="module")
def reference(config: Path, tmp_path_factory) -> Path:
    """An uninterrupted run of :data:`TINY`."""
    out = tmp_path_factory.mktemp("reference") / "out"
    assert cli.main(["run", str(config), "--out", str(out)]) == 0
    return out


def _assert_one_line(err: str, *parts: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sgrld: error: "), err
    assert "Traceback" not in err
    for part in parts:
        assert part in lines[0], (part, err)


@pytest.mark.parametrize(
    ("part", "code", "nth", "resumable"),
    [
        ("config.toml", errno.ENOSPC, 1, False),  # at the start
        ("summary.json", errno.EACCES, 1, True),
        ("samples/epoch_0002.npz", errno.ENOSPC, 1, True),  # mid-run
        ("checkpoints/epoch_0002.npz", errno.ENOSPC, 1, True),
        ("metrics.jsonl", errno.ENOSPC, 2, True),  # appending epoch 2's line
    ],
)
def test_run_os_error_is_one_line_and_resume_completes_it(
    monkeypatch, capsys, config, reference, tmp_path, part, code, nth, resumable
):
    out = tmp_path / "out"
    _inject(monkeypatch, part, code, nth)
    status, err = _sgrld(capsys, "run", str(config), "--out", str(out))
    assert status == cli.EXIT_OS_ERROR == 4, err
    _assert_one_line(err, f"could not write {out}", part, os.strerror(code))
    if code == errno.ENOSPC:
        assert "make room" in err
    monkeypatch.undo()
    if not resumable:
        assert "nothing was written" in err
        return
    assert f"sgrld run --resume {out}" in err
    assert _sgrld(capsys, "run", "--resume", str(out))[0] == 0
    assert _metrics(out) == _metrics(reference)
    got, want = _samples(out), _samples(reference)
    assert got.keys() == want.keys()
    for name in want:
        for key in want[name]:
            np.testing.assert_array_equal(got[name][key], want[name][key], err_msg=name + key)


def test_sweep_disk_full_is_one_line(monkeypatch, capsys, config, tmp_path):
    out = tmp_path / "sweep"
    _inject(monkeypatch, "checkpoints/", errno.ENOSPC)
    grid = "sampler.learning_rate=[0.05,0.1]"
    status, err = _sgrld(capsys, "sweep", str(config), "--grid", grid, "--out", str(out))
    assert status == 4
    _assert_one_line(err, "could not write", "checkpoints", f"sgrld sweep --resume {out}")


def test_export_to_unwritable_targets_is_one_line(monkeypatch, capsys, reference, tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    status, err = _sgrld(capsys, "export", str(reference), "--to", str(a_file / "x.nc"))
    assert status == 4
    _assert_one_line(err, str(a_file), "the export was not written")

    def full(*args, dir=None, **kwargs):  # noqa: A002 - tempfile's name
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dir))

    monkeypatch.setattr(tempfile, "TemporaryDirectory", full)
    status, err = _sgrld(capsys, "export", str(reference), "--to", str(tmp_path / "x.nc"))
    assert status == 4
    _assert_one_line(err, str(tmp_path), "No space left", "make room")


def test_diagnose_figure_on_a_full_disk_is_one_line(monkeypatch, capsys, reference):
    def full(self, path, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full)
    status, err = _sgrld(capsys, "diagnose", str(reference), "--no-ksd")
    assert status == 4
    _assert_one_line(err, "diagnose.png", "No space left")


def test_the_atomic_writer_names_the_file_of_a_full_disk(monkeypatch, tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(atomic.WriteError) as caught:
        atomic.write_text(path, "new")
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.json"]
