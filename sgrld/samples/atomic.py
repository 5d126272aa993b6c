"""Atomic file writes: a file is either its old content or its whole new content, never a part.

The new content goes to a temporary file in the same folder (``.NAME.XXXXXXXX.tmp``), which is
flushed, ``fsync``-ed and renamed over ``NAME`` (``os.replace``, atomic on POSIX within one file
system); the folder is then ``fsync``-ed so the rename itself survives a power cut. A process
killed before the rename leaves the old file and a stray ``.tmp`` file (:func:`remove_temporary`).

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> write_text(path, "one\\n")
    >>> path.read_text(), sorted(p.name for p in path.parent.iterdir())
    ('one\\n', ['a.txt'])
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

TEMP_SUFFIX = ".tmp"


class WriteError(OSError):
    """An OS error (a full disk, a read-only file system, no permission, a missing folder) while
    writing the file ``filename``, whose old content, if any, is kept."""


@contextlib.contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """Raise an ``OSError`` of the block as a :class:`WriteError` naming ``path``.

    Example:
        >>> import errno
        >>> try:
        ...     with naming("out/a.txt"):
        ...         raise OSError(errno.ENOSPC, "No space left on device", "out/.a.txt.1.tmp")
        ... except WriteError as err:
        ...     err.errno == errno.ENOSPC, err.filename
        (True, 'out/a.txt')
    """
    try:
        yield
    except WriteError:
        raise
    except OSError as err:
        raise WriteError(err.errno, err.strerror or str(err), str(path)) from err


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write; on leaving the block without an error it replaces ``path``.

    On an error the temporary file is removed and ``path`` keeps its old content; an ``OSError``
    is raised as a :class:`WriteError` naming ``path``.
    """
    path = Path(path)
    temp = path.parent / f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
    with naming(path):
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    try:
        with naming(path), os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        with naming(path):
            os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _fsync_folder(path.parent)


@contextlib.contextmanager
def appending(path: str | Path) -> Iterator[TextIO]:
    """``path`` opened to append text (not atomic: a line at a time); an ``OSError`` is raised
    as a :class:`WriteError` naming ``path``."""
    with naming(path), Path(path).open("a") as f:
        yield f


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    with replacing(path) as f:
        f.write(data)


def write_text(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    write_bytes(path, text.encode("utf-8"))


def remove_temporary(folder: str | Path) -> list[Path]:
    """Remove the temporary files that a killed write left in ``folder``; return them."""
    stray = sorted(Path(folder).glob(f".*{TEMP_SUFFIX}"))
    for path in stray:
        path.unlink(missing_ok=True)
    return stray
