"""A results folder's life: refused or cleared before a new run, cut back to a checkpoint to resume.

A folder holds one run. Before a run starts, :func:`start` refuses a folder that already holds
one (``existing="refuse"``, what ``sgrld run`` does without ``--resume`` or ``--overwrite``) or
removes the old run's files first (``"overwrite"``; ``summary.json`` first, so an old "completed"
never stands beside a new run's partial files), so no old ``samples/epoch_*.npz`` can mix with the
new run's. To resume, it cuts the folder back to the checkpoint: ``metrics.jsonl`` is rewritten
from the checkpoint's records and sample files of later epochs are removed, so the continued run
appends exactly what an uninterrupted one would have. Either way ``summary.json`` then says
``"running"`` until the run ends: :class:`Summary` writes its last word, the run's own
(``"completed"``, ``"diverged"``, ``"interrupted"``), or ``"failed"`` after an error (a write that
failed), or ``"interrupted"`` from the signal watcher when the process must end before the epoch
in flight does (:mod:`sgrld.run.interrupts`); :class:`RunEnd` makes those last two. :func:`kept`
says, from what is on disk, what a stopped command kept of the run and what ``--resume`` would do.

A command that runs many folders (``sgrld reproduce NAME --resume``) asks, folder by folder, what
to continue: :func:`existing_of` for runs made from a configuration (:mod:`sgrld.run.from_config`),
:func:`resume_point` for runs made by code, whose settings are their ``meta``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from sgrld.chains import devices
from sgrld.run import checkpoint, interrupts, records
from sgrld.run.epoch_writer import EpochWriter
from sgrld.samples import atomic, results

Existing = Literal["refuse", "overwrite"]
RUN_FILES = ("summary.json", "metrics.jsonl", "curves.png", "samples", checkpoint.FOLDER)
"""What a run writes into its folder (``summary.json`` first: it is removed first)."""
CONFIG_FILES = ("config.toml", "config.json")
"""What :func:`sgrld.run.from_config.run_config` adds: the resolved configuration."""


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
    (``config.json`` or a checkpoint, what :func:`sgrld.run.from_config.check_resumable` reads;
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


class Summary:
    """``OUT/summary.json`` once a run is going (after :func:`start`), written by one thread at a
    time: the run's own at its end (:meth:`write`), or the last word of whatever ends it early.

    :meth:`last_word` is called from the signal watcher's thread while the main thread may be
    anywhere (inside XLA, or writing this file): it waits at most :data:`LOCK_S` seconds for the
    lock, which the main thread holds only while writing this small file, and keeps it, so nothing
    replaces what it wrote before the process ends.

    Attributes:
        out: the results folder.
        status: the status this object last wrote (``None``: still ``"running"``).
    """

    LOCK_S = 1.0

    def __init__(self, out: Path) -> None:
        self.out = out
        self.status: str | None = None
        self._lock = threading.Lock()

    def write(self, summary: Mapping[str, Any]) -> None:
        """Write ``summary`` (its ``"status"`` a final one) as ``summary.json``.

        Raises:
            sgrld.samples.atomic.WriteError: it could not be written.
        """
        with self._lock:
            results.write_json(self.out / "summary.json", summary)
            self.status = summary["status"]

    def last_word(self, summary: Callable[[], Mapping[str, Any]]) -> str | None:
        """Write ``summary()`` unless the run wrote its own, then hold the lock for good (the
        process is about to end). Returns why ``summary.json`` still says ``"running"``, or
        ``None`` if it says something else."""
        if not self._lock.acquire(timeout=self.LOCK_S):
            return "it was being written as the process ended"
        if self.status is not None:
            return None
        try:
            value = summary()
            results.write_json(self.out / "summary.json", value)
        except OSError as err:
            return f"it could not be updated ({err.strerror or err})"
        self.status = value["status"]
        return None


def resume_clause(out: Path, again: str = "--resume") -> str:
    """What ``again`` (the command that resumes ``out``) would do: continue from the newest
    checkpoint (:func:`sgrld.run.checkpoint.newest`, by file name), or start from epoch 0.

    Example:
        >>> resume_clause(Path(tempfile.mkdtemp()))
        'it has no checkpoint, so there is nothing to resume from: --resume starts it again from
        epoch 0'
    """
    epoch = checkpoint.newest(out)
    if epoch is None:
        return (
            f"it has no checkpoint, so there is nothing to resume from: {again} starts it again "
            "from epoch 0"
        )
    return f"{again} continues it from its newest checkpoint, of epoch {epoch}"


def kept(out: Path, command: str | None = None, why: str | None = None) -> str:
    """What a command stopped early (a signal, an error) kept of the run in ``out``, from what is
    on disk: its ``summary.json``'s status and epochs, and what resuming it does. Safe from any
    thread (it reads one small file and lists the checkpoints).

    Args:
        out: the results folder.
        command: the ``sgrld`` command that resumes it (``"run"``, ``"sweep"``), named in the
            clause; ``None``: ``--resume`` alone.
        why: why ``summary.json`` still says ``"running"``, if it does (``None``: not known).

    Example:
        >>> out = Path(tempfile.mkdtemp())
        >>> stopped = {"status": "interrupted", "epochs_completed": 2}
        >>> results.write_json(out / "summary.json", stopped)
        >>> kept(out, "run")  # doctest: +ELLIPSIS
        'what the run wrote so far is in ... (its summary.json says "interrupted" after 2 epoch(s));
        it has no checkpoint, so there is nothing to resume from: `sgrld run --resume ...` starts
        it again from epoch 0'
    """
    try:
        summary = json.loads((out / "summary.json").read_text())
        status, epochs = summary["status"], summary["epochs_completed"]
    except FileNotFoundError:
        state = "no summary.json yet"
    except (OSError, ValueError, KeyError, TypeError):
        state = "its summary.json unreadable"
    else:
        if status == "running":
            state = f"its summary.json not updated{'' if why is None else ': ' + why}"
        else:
            state = f'its summary.json says "{status}" after {epochs} epoch(s)'
    again = "--resume" if command is None else f"`sgrld {command} --resume {out}`"
    return (
        f"what the {command or 'run'} wrote so far is in {out} ({state}); "
        f"{resume_clause(out, again)}"
    )


def existing_of(folder: Path, resume: bool) -> Literal["resume", "overwrite"]:
    """How :func:`sgrld.run.from_config.run_config` treats ``folder`` when a command is asked to
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
    ``sgrld.run.runner.run(..., resume=...)``, after checking that the run was started with ``meta``
    (the :class:`sgrld.run.runner.Experiment`'s; the runner checks the schedule itself).

    Returns:
        ``None`` if ``out`` holds no checkpoint: the run starts afresh.

    Raises:
        sgrld.run.checkpoint.CheckpointError: the run in ``out`` has other settings (naming
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


@dataclass
class RunEnd:
    """The last word on a run of :func:`sgrld.run.runner.run` that ends early: its
    ``summary.json`` and the line the ``sgrld`` command prints.

    Attributes:
        summary: the run's summary file (``None``: no results folder).
        epochs: the run's epoch writer (its records and compile time so far).
        schedule, steps, meta: as in :func:`sgrld.run.records.summary` (``schedule`` a
            :class:`sgrld.run.runner.RunPlan`).
    """

    summary: Summary | None
    epochs: EpochWriter
    schedule: Any
    steps: int
    meta: Mapping[str, Any]

    def _summary(self, status: str, message: str) -> dict[str, Any]:
        """A summary of the epochs completed so far, with ``status`` and ``message``."""
        now = SimpleNamespace(
            status=status,
            message=message,
            records=list(self.epochs.records),
            compile_s=self.epochs.compile_s,
        )
        return records.summary(now, self.schedule, self.steps, self.meta)

    def by_signal(self) -> str | None:
        """The signal watcher's last word (:func:`sgrld.run.interrupts.last_word`), from its
        thread while the main thread may be inside XLA: mark the summary ``"interrupted"`` with
        the epochs completed so far; say what is kept."""
        if self.summary is None:
            return None
        out, done = self.summary.out, len(self.epochs.records)
        guard = interrupts.GUARD
        name = "a signal" if guard is None or guard.signal is None else guard.signal
        if self.epochs.score is None:
            during = f"while it compiled, before epoch {done + 1}"
        else:
            during = f"after epoch {done}, before the run could stop cleanly"

        def summary() -> dict[str, Any]:
            message = (
                f"interrupted by {name} {during}: the process ended at once, with {done} "
                f"epoch(s) completed; {resume_clause(out)}"
            )
            return self._summary("interrupted", message)

        return kept(out, why=self.summary.last_word(summary))

    @contextlib.contextmanager
    def on_error(self) -> Iterator[None]:
        """An exception (an ``OSError``: a write that failed) leaves the block: mark the summary
        ``"failed"``, naming the error and the epochs completed, if it can be written, and
        re-raise."""
        try:
            yield
        except Exception as err:
            if self.summary is not None and self.summary.status is None:
                if isinstance(err, OSError) and err.filename:  # as the command's line says it
                    doing = "could not write" if isinstance(err, atomic.WriteError) else "failed on"
                    what = f"{doing} {err.filename} ({err.strerror or err})"
                else:
                    what = f"{type(err).__name__}: {err}"
                done = len(self.epochs.records)
                message = f"failed after {done} epoch(s): {what}; {resume_clause(self.summary.out)}"
                with contextlib.suppress(OSError):
                    self.summary.write(self._summary("failed", message))
            raise
