"""A results folder's life: refused or cleared before a new run, cut back to a checkpoint to resume.

A folder holds one run. Before a run starts, :func:`start` refuses a folder that already holds
one (``existing="refuse"``, what ``sgrld run`` does without ``--resume`` or ``--overwrite``) or
removes the old run's files first (``"overwrite"``; ``summary.json`` first, so an old "completed"
never stands beside a new run's partial files), so no old ``samples/epoch_*.npz`` can mix with the
new run's. To resume, it cuts the folder back to the checkpoint: ``metrics.jsonl`` is rewritten
from the checkpoint's records and sample files of later epochs are removed, so the continued run
appends exactly what an uninterrupted one would have. Either way ``summary.json`` then says
``"running"`` until the run ends (how it ends, early ones included: :mod:`sgrld_app.run_end`).

A command that runs many folders (``sgrld reproduce NAME --resume``) asks, folder by folder, what
to continue: :func:`existing_of` for runs made from a configuration (:mod:`sgrld_app.from_config`),
:func:`resume_point` for runs made by code, whose settings are their ``meta``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from sgrld.chains import devices
from sgrld.samples import atomic, results
from sgrld_app import checkpoint

Existing = Literal["refuse", "overwrite"]
RUN_FILES = ("summary.json", "metrics.jsonl", "curves.png", "samples", checkpoint.FOLDER)
"""What a run writes into its folder (``summary.json`` first: it is removed first)."""
CONFIG_FILES = ("config.toml", "config.json")
"""What :func:`sgrld_app.launch.run_config` adds: the resolved configuration."""


def check_writable(out: Path) -> None:
    """Check that ``out`` (created for the check, then removed again) can hold a file, before the
    run loads anything.

    Raises:
        sgrld.samples.results.ResultsError: ``out`` is a file.
        sgrld.samples.atomic.WriteError: ``out`` lies under a file, or cannot be created or
            written (permissions, a read-only or virtual file system such as ``/proc``).
    """
    if out.exists() and not out.is_dir():
        raise results.ResultsError(f"the results folder {out} is a file")
    created = [p for p in (out, *out.parents) if not p.exists()]  # the deepest first
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:  # the command's OS-error line and exit code, naming the folder
        reason = f"cannot write the results folder: {err.strerror or type(err).__name__}"
        raise atomic.WriteError(err.errno, reason, str(out)) from None
    finally:  # a command refused later leaves no folder behind
        for folder in created:
            with contextlib.suppress(OSError):
                folder.rmdir()


def refuse_kept(out: Path, command: str) -> None:
    """Refuse to start ``sgrld run`` or ``sgrld sweep`` (``command``) in ``out`` if it holds any
    file of a run, saying what can be done: ``--resume`` only when there is something to resume
    (``config.json`` or a checkpoint, what :func:`sgrld_app.launch.check_resumable` reads;
    with a configuration file named when ``out`` has no ``config.toml``, as ``--resume`` without
    one reads it), and by the command that made the run (a sweep's ``summary.json`` says so);
    else remove the folder or choose another ``--out``. ``--overwrite`` replaces it either way.
    Only the process that writes checks (the others of a multi-process run write nothing).

    Raises:
        sgrld.samples.results.ResultsError: ``out`` holds a run, naming what it holds.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> refuse_kept(out, "run")  # an empty folder: nothing to refuse
        >>> (out / "checkpoints").mkdir()
        >>> refuse_kept(out, "run")
        Traceback (most recent call last):
        ...
        sgrld.samples.results.ResultsError: ... already holds files of a run (checkpoints) but no
        run to resume (no config.json, no checkpoint): remove the folder or choose another --out
        (or replace them with --overwrite)
    """
    if not devices.is_writer():
        return
    found = [name for name in RUN_FILES + CONFIG_FILES if os.path.lexists(out / name)]
    if found:
        raise results.ResultsError(refusal(out, found, command))


def refusal(out: Path, found: Sequence[str], command: str = "run") -> str:
    """Why ``out``, holding the run files ``found``, is refused, and what can be done
    (:func:`refuse_kept`)."""
    holds = f"{out} already holds files of a run ({', '.join(found)})"
    if not (out / "config.json").is_file() and not any(
        (out / checkpoint.FOLDER).glob("epoch_*.npz")
    ):
        return (
            f"{holds} but no run to resume (no config.json, no checkpoint): remove the folder or "
            "choose another --out (or replace them with --overwrite)"
        )
    made_by = _made_by(out) or command
    config = "" if (out / "config.toml").is_file() else " CONFIG.toml"
    return (
        f"{holds}: continue it with `sgrld {made_by}{config} --resume {out}`, or replace it with "
        "--overwrite"
    )


def _made_by(out: Path) -> str | None:
    """``"sweep"`` or ``"run"``: the command that made the run in ``out``, as its ``summary.json``
    says (``None``: no readable one)."""
    try:
        meta = json.loads((out / "summary.json").read_text(encoding="utf-8")).get("meta", {})
    except (OSError, ValueError, AttributeError):
        return None
    return "sweep" if isinstance(meta, dict) and "sweep" in meta else "run"


def clear(out: Path, existing: Existing, names: Sequence[str] = RUN_FILES) -> None:
    """Refuse ``out`` if it holds any of ``names`` (``"refuse"``), or remove them (``"overwrite"``).

    Raises:
        sgrld.samples.results.ResultsError: ``"refuse"`` and ``out`` holds a run, naming what it
        holds.
    """
    found = [name for name in names if (out / name).exists()]
    if found and existing == "refuse":
        raise results.ResultsError(refusal(out, found))
    for name in found:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def cut_back(out: Path, records: Sequence[Mapping[str, Any]], epoch: int) -> None:
    """Make ``out`` what it was when ``epoch`` epochs had completed with ``records``."""
    for folder in (out, out / "samples", out / checkpoint.FOLDER):
        if folder.is_dir():
            atomic.remove_temporary(folder)
    atomic.write_text(out / "metrics.jsonl", "".join(results.record_line(r) for r in records))
    for path in (out / "samples").glob("epoch_*.npz"):
        if int(path.stem.removeprefix("epoch_")) > epoch:
            path.unlink()


def start(
    out: Path,
    existing: Existing,
    resumed: checkpoint.Saved | None,
    meta: Mapping[str, Any],
) -> None:
    """Prepare ``out`` for a run (see the module docstring) and mark it ``"running"``."""
    out.mkdir(parents=True, exist_ok=True)
    if resumed is None:
        clear(out, existing)
        cut_back(out, [], 0)
    else:
        cut_back(out, resumed.info["records"], resumed.epoch)
    epochs = 0 if resumed is None else resumed.epoch
    results.write_json(
        out / "summary.json",
        {
            "status": "running",
            "message": f"running from epoch {epochs}; this file is replaced when the run ends",
            "epochs_completed": epochs,
            "meta": dict(meta),
        },
    )


def existing_of(folder: Path, resume: bool) -> Literal["resume", "overwrite"]:
    """How :func:`sgrld_app.launch.run_config` treats ``folder`` when a command is asked to
    ``resume`` its runs: a run there (its ``config.json``) is continued from its newest checkpoint
    (after checking its configuration); a folder without one, or ``resume=False``, starts afresh.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> existing_of(folder, resume=True)
        'overwrite'
        >>> _ = (folder / "config.json").write_text("{}")
        >>> existing_of(folder, resume=True), existing_of(folder, resume=False)
        ('resume', 'overwrite')
    """
    return "resume" if resume and (folder / "config.json").is_file() else "overwrite"


def resume_point(out: Path, meta: Mapping[str, Any]) -> checkpoint.Saved | None:
    """The newest checkpoint of the run in ``out``, to continue it with
    ``sgrld_app.runner.run(..., resume=...)``, after checking that the run was started with ``meta``
    (the :class:`sgrld_app.experiment.Experiment`'s; the runner checks the schedule itself).

    Returns:
        ``None`` if ``out`` holds no checkpoint: the run starts afresh.

    Raises:
        sgrld_app.checkpoint.CheckpointError: the run in ``out`` has other settings (naming
            them), or none of its checkpoints verifies.
    """
    saved = checkpoint.latest(out)
    if saved is None:
        return None
    now = json.loads(json.dumps(meta))  # as the checkpoint stores it (tuples come back lists)
    differ = checkpoint.differences(saved.info["meta"], now)
    if differ:
        raise checkpoint.CheckpointError(
            f"cannot continue the run in {out}: it was started with other settings "
            f"({'; '.join(differ)}); resume with those settings, or remove {out} to start that "
            "run afresh"
        )
    return saved
