"""Stopping on SIGINT (Ctrl-C) or SIGTERM: a run at a safe point, the ``sgrld`` command at any
moment.

While :func:`stop_on_signals` is active, the first SIGINT or SIGTERM only records its name in
:class:`Stop`; the run looks at it at safe points (after compiling, after each epoch's files and
checkpoint are written) and stops there, so no ``KeyboardInterrupt`` is raised inside a JAX/XLA
call or half-way through writing a file. A second signal raises ``KeyboardInterrupt`` at once, for
a user who will not wait for the epoch to end. The previous handlers are restored on leaving;
outside the main thread (where Python cannot install handlers) nothing is installed.

The ``sgrld`` command itself (``python -m sgrld`` and the ``sgrld`` script) installs a
:class:`Guard` before it imports JAX (``sgrld/__init__.py`` calls :func:`guard_command`). Python
runs a signal handler only between bytecodes of the main thread, so a signal that arrives while
the main thread is importing, compiling (XLA) or inside any long call would wait for that call to
end; the guard's watcher thread instead wakes on the signal itself (:func:`signal.set_wakeup_fd`)
and, if the main thread has not ended the command within :data:`GRACE_S` seconds (no time at all
before the command writes anything; at once on a second signal), prints one line saying what was
kept and ends the process with exit code :data:`EXIT_INTERRUPTED` (``os._exit``: no traceback,
no waiting for XLA). The files are written atomically (:mod:`sgrld.samples.atomic`) and a run
resumes from its newest checkpoint, so stopping there loses at most the epochs since it (all of
them, before the first checkpoint). While a guard is installed, :func:`stop_on_signals` starts
from a signal the guard already saw, and a second signal is left to the watcher.

Before that hard stop, the newest hook of :func:`last_word` (a running experiment's: it sets the
run's ``summary.json`` to ``"interrupted"``, :class:`sgrld_app.run_end.Summary`) runs in a
thread of its own, for at most :data:`LAST_WORD_S` seconds, and what it returns replaces the
command's ``kept()``. It runs while the main thread may be anywhere (inside an XLA compilation, a
write), so it must do only what is safe there: no JAX, no lock the main thread may hold for long;
writing a small file atomically is fine.

Example:
    >>> import os, signal
    >>> with stop_on_signals() as stop:
    ...     os.kill(os.getpid(), signal.SIGTERM)
    ...     stop.signal
    'SIGTERM'
    >>> signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    True
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE_S = 3.0
"""Seconds the main thread of ``sgrld`` gets, once a command writes, to stop cleanly."""
LAST_WORD_S = 2.0
"""Seconds the hook of :func:`last_word` gets before the watcher ends the process without it."""
EXIT_INTERRUPTED = 130
"""The exit code of a command stopped by SIGINT or SIGTERM (``sgrld_app.experiment.EXIT_CODES``)."""


class Guard:
    """The ``sgrld`` command's handler of SIGINT and SIGTERM, and its watcher thread.

    Attributes:
        signal: the name of the first signal received, or ``None``.
        grace: seconds the main thread gets to stop cleanly after the first signal (0: none).
        kept: says what is on disk if the watcher stops the process (one clause).
        last_words: the hooks of :func:`last_word`, the newest last.
    """

    def __init__(self) -> None:
        self.signal: str | None = None
        self.grace = 0.0
        self.kept: Callable[[], str] = lambda: "nothing was written"
        self.code: int | None = None  # the command's exit code, once it returned
        self.last_words: list[Callable[[], str | None]] = []

    def install(self) -> None:
        """Install :meth:`handle` for SIGINT and SIGTERM and start the watcher thread."""
        read, write = os.pipe()
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        for s in SIGNALS:
            signal.signal(s, self.handle)
        watcher = threading.Thread(target=self._watch, args=(read,), name="sgrld-signals")
        watcher.daemon = True
        watcher.start()

    def handle(self, signum: int, frame: object) -> None:
        """The Python-level handler: only record the signal (the watcher acts on it)."""
        self.record(signum)

    def record(self, signum: int) -> None:
        """Remember the first signal's name."""
        if self.signal is None:
            self.signal = signal.Signals(signum).name

    def writing(self, kept: Callable[[], str]) -> None:
        """From now on the command writes: give it :data:`GRACE_S` to stop cleanly; ``kept()``
        says what is on disk if it does not."""
        self.kept, self.grace = kept, GRACE_S

    def finish(self, code: int) -> None:
        """The command returned ``code``: a signal from now on ends the process with it."""
        self.code = code

    def _watch(self, fd: int) -> None:
        deadline = None
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], timeout)[0]:
                self.stop_now()  # the grace is over
            received = [s for s in os.read(fd, 64) if s in SIGNALS]
            if not received:
                continue
            self.record(received[0])
            if deadline is not None or self.grace <= 0 or len(received) > 1:
                self.stop_now()
            deadline = time.monotonic() + self.grace

    def stop_now(self) -> None:
        """End the process: with the command's code if it returned, else with
        :data:`EXIT_INTERRUPTED` after the newest :func:`last_word` hook and one line on standard
        error (what the hook returned, or else ``kept()``)."""
        if self.code is not None:
            os._exit(self.code)
        kept = self._last_word()
        if self.code is not None:
            os._exit(self.code)
        try:
            kept = kept or self.kept()
        except Exception as err:  # noqa: BLE001 - the line must still be printed
            kept = f"what was kept is unknown ({err})"
        with contextlib.suppress(Exception):
            sys.stdout.flush()  # what the command printed so far
        os.write(2, f"sgrld: interrupted by {self.signal}; {kept}\n".encode())
        os._exit(EXIT_INTERRUPTED)

    def _last_word(self) -> str | None:
        """Run the newest :func:`last_word` hook in a daemon thread, waiting for it at most
        :data:`LAST_WORD_S` seconds (a stalled disk must not keep the process alive); what it
        returned, or ``None`` (no hook, it failed, or it took too long)."""
        hooks = list(self.last_words)  # the main thread may remove one meanwhile
        if not hooks:
            return None
        said: list[str | None] = []

        def call() -> None:
            with contextlib.suppress(Exception):  # then the command's kept() is said
                said.append(hooks[-1]())

        thread = threading.Thread(target=call, name="sgrld-last-word", daemon=True)
        thread.start()
        deadline = time.monotonic() + LAST_WORD_S
        while thread.is_alive() and time.monotonic() < deadline:
            if self.code is not None:  # the command returned meanwhile: its own word and code
                os._exit(self.code)
            thread.join(0.02)
        return said[0] if said else None


GUARD: Guard | None = None
"""The guard of the ``sgrld`` command, in a process that is that command."""


def guard_command() -> Guard | None:
    """Install the process-wide :class:`Guard` (once; only in the main thread)."""
    global GUARD
    if GUARD is None and threading.current_thread() is threading.main_thread():
        GUARD = Guard()
        GUARD.install()
    return GUARD


@contextlib.contextmanager
def last_word(say: Callable[[], str | None]) -> Iterator[None]:
    """While the block runs, if the :class:`Guard`'s watcher ends the process, it first calls
    ``say()`` from another thread (see the module docstring for what it may do there) and prints
    what it returns (one clause: what was kept) instead of the command's ``kept()`` (``None``: that
    one). Nothing happens outside the ``sgrld`` command (no guard)."""
    guard = GUARD
    if guard is None:
        yield
        return
    guard.last_words.append(say)
    try:
        yield
    finally:
        guard.last_words.remove(say)


class Stop:
    """What the handlers saw.

    Attributes:
        signal: the name of the first signal received (``"SIGINT"``, ``"SIGTERM"``), or ``None``.
    """

    def __init__(self) -> None:
        self.signal: str | None = None if GUARD is None else GUARD.signal

    def handle(self, signum: int, frame: object) -> None:
        """The signal handler: remember the first signal; raise on the second (without a
        :class:`Guard`, whose watcher stops the process instead)."""
        if GUARD is not None:
            GUARD.record(signum)
        elif self.signal is not None:
            raise KeyboardInterrupt
        self.signal = self.signal or signal.Signals(signum).name


@contextlib.contextmanager
def stop_on_signals(
    signals: Sequence[signal.Signals] = SIGNALS,
) -> Iterator[Stop]:
    """Install :meth:`Stop.handle` for ``signals`` for the duration of the block."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {s: signal.signal(s, stop.handle) for s in signals}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
