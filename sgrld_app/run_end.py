"""How a run ends: its ``summary.json``'s last word and the line a stopped command prints.

:class:`Summary` writes ``summary.json`` once the run is going: the run's own last word
(``"completed"``, ``"diverged"``, ``"interrupted"``), or ``"failed"`` after an error (a write that
failed), or ``"interrupted"`` from the signal watcher when the process must end before the epoch
in flight does (:mod:`sgrld.interrupts`); :class:`RunEnd` makes those last two for
:func:`sgrld_app.runner.run`. :func:`kept` says, from what is on disk, what a stopped command kept
of the run and what ``--resume`` would do.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sgrld import interrupts
from sgrld.samples import atomic, results
from sgrld_app import checkpoint, records
from sgrld_app.epoch_writer import EpochWriter


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
    checkpoint (:func:`sgrld_app.checkpoint.newest`, by file name), or start from epoch 0.

    Example:
        >>> import tempfile
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
        >>> import tempfile
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


@dataclass
class RunEnd:
    """The last word on a run of :func:`sgrld_app.runner.run` that ends early: its
    ``summary.json`` and the line the ``sgrld`` command prints.

    Attributes:
        summary: the run's summary file (``None``: no results folder).
        epochs: the run's epoch writer (its records and compile time so far).
        schedule, steps, meta: as in :func:`sgrld_app.records.summary` (``schedule`` a
            :class:`sgrld_app.experiment.RunPlan`).
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
        """The signal watcher's last word (:func:`sgrld.interrupts.last_word`), from its
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
