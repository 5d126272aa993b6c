"""Exceptions raised by the data-set loaders."""

from __future__ import annotations

__all__ = ["DataError", "MissingDataError"]


class DataError(ValueError):
    """A data file is missing, corrupt, truncated or not in the expected format.

    The message always names the offending file and, where one is known, the expected
    SHA-256 and where to obtain a good copy.
    """


class MissingDataError(DataError, FileNotFoundError):
    """A required data file does not exist in the resolved data directory."""
