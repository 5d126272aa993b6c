"""Stopping a run on SIGINT (Ctrl-C) or SIGTERM at a safe point instead of wherever it is.

While :func:`stop_on_signals` is active, the first SIGINT or SIGTERM only records its name in
:class:`Stop`; the run looks at it at safe points (after compiling, after each epoch's files and
checkpoint are written) and stops there, so no ``KeyboardInterrupt`` is raised inside a JAX/XLA
call or half-way through writing a file. A second signal raises ``KeyboardInterrupt`` at once, for
a user who will not wait for the epoch to end. The previous handlers are restored on leaving;
outside the main thread (where Python cannot install handlers) nothing is installed.

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
import signal
import threading
from collections.abc import Iterator, Sequence


class Stop:
    """What the handlers saw.

    Attributes:
        signal: the name of the first signal received (``"SIGINT"``, ``"SIGTERM"``), or ``None``.
    """

    def __init__(self) -> None:
        self.signal: str | None = None

    def handle(self, signum: int, frame: object) -> None:
        """The signal handler: remember the first signal; raise on the second."""
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name


@contextlib.contextmanager
def stop_on_signals(
    signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
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
