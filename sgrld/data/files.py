"""Locating, checksum-verifying and reading (possibly gzipped) data files."""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import DataError, MissingDataError
from .registry import DATA_DIR_ENV, DatasetInfo, candidate_dirs, dataset_info, resolve_data_dir

__all__ = ["DataFiles", "algorithm", "checksum", "sha256_hex"]


def sha256_hex(data: bytes) -> str:
    """Return the SHA-256 of ``data`` as a lower-case hex string.

    Example:
        >>> sha256_hex(b"")[:16]
        'e3b0c44298fc1c14'
    """
    return hashlib.sha256(data).hexdigest()


def algorithm(expected: str) -> str:
    """The checksum algorithm of a known hex digest: MD5 for 32 digits (the published checksums
    of the CIFAR-10 files), else SHA-256.

    Example:
        >>> algorithm("d41d8cd98f00b204e9800998ecf8427e"), algorithm(sha256_hex(b""))
        ('MD5', 'SHA-256')
    """
    return "MD5" if len(expected) == 32 else "SHA-256"


def checksum(data: bytes, expected: str) -> str:
    """The lower-case hex digest of ``data`` in the :func:`algorithm` of ``expected``.

    Example:
        >>> checksum(b"", "0" * 32)
        'd41d8cd98f00b204e9800998ecf8427e'
    """
    if algorithm(expected) == "MD5":
        return hashlib.md5(data, usedforsecurity=False).hexdigest()
    return sha256_hex(data)


@dataclass(frozen=True)
class DataFiles:
    """The files of one data set in its resolved directory, with the checksum policy.

    Attributes:
        info: The data set.
        directory: Resolved data directory (see :func:`sgrld.data.resolve_data_dir`).
        searched: All candidate directories, named when a file is missing.
        checksums: Known SHA-256 (or, 32 hex digits, MD5) per exact file name.
        verify: ``True`` requires a known checksum for every file and checks it; ``False``
            checks nothing; ``None`` checks the files whose name has a known checksum.
    """

    info: DatasetInfo
    directory: Path
    searched: tuple[Path, ...]
    checksums: Mapping[str, str]
    verify: bool | None

    @classmethod
    def resolve(
        cls,
        name: str,
        data_dir: str | os.PathLike[str] | None,
        checksums: Mapping[str, str] | None,
        verify: bool | None,
    ) -> DataFiles:
        """Resolve the data directory of ``name``; ``checksums=None`` uses the built-ins."""
        info = dataset_info(name)
        return cls(
            info=info,
            directory=resolve_data_dir(name, data_dir),
            searched=tuple(candidate_dirs(name, data_dir)),
            checksums=info.checksums if checksums is None else checksums,
            verify=verify,
        )

    def hint(self, filename: str) -> str:
        """Describe the expected checksum of ``filename`` (and of its ``.gz``) and its source.

        Example:
            >>> files = DataFiles.resolve("fashion_mnist", "/nonexistent", None, None)
            >>> files.hint("t10k-labels-idx1-ubyte")  # doctest: +ELLIPSIS
            'expected SHA-256 of t10k-labels-idx1-ubyte.gz: 67da17c7...; obtain ...'
        """
        names = (filename, f"{filename}.gz")
        known = [
            f"{algorithm(self.checksums[n])} of {n}: {self.checksums[n]}"
            for n in names
            if n in self.checksums
        ]
        expected = (
            "expected " + "; ".join(known) if known else f"no SHA-256 is known for {filename}"
        )
        return f"{expected}; obtain {self.info.source}"

    def locate(self, filename: str) -> Path:
        """Find ``filename`` in the directory: the raw file first, then ``filename.gz``.

        Args:
            filename: File name without a ``.gz`` suffix.

        Returns:
            The path of the file found.

        Raises:
            MissingDataError: If no variant exists; the message names the file, the
                directories searched, the expected checksum and where to get the data.
        """
        names = (filename, f"{filename}.gz") if self.info.gzip else (filename,)
        for name in names:
            path = self.directory / name
            if path.is_file():
                return path
        tried = ", ".join(str(d) for d in self.searched)
        raise MissingDataError(
            f"{self.info.name}: {' or '.join(names)} not found in {self.directory} "
            f"(directories searched: {tried}; pass data_dir, --data-dir on the command line, or "
            f"set ${DATA_DIR_ENV}); "
            f"{self.hint(filename)}"
        )

    def read(self, filename: str) -> tuple[Path, bytes]:
        """Locate, read and verify a file, and gunzip it if it is stored as ``.gz``.

        The checksum is that of the file as stored (compressed for ``.gz``), looked up by
        its exact name.

        Args:
            filename: File name without a ``.gz`` suffix.

        Returns:
            The path read and its (decompressed) contents.

        Raises:
            MissingDataError: If the file does not exist.
            DataError: On a checksum mismatch, a corrupt or truncated gzip stream, or when
                ``verify=True`` but no checksum is known for the file name.
        """
        path = self.locate(filename)
        data = path.read_bytes()
        expected = self.checksums.get(path.name)
        if self.verify and expected is None:
            raise DataError(
                f"{path}: verify=True but no SHA-256 is known for {path.name!r}; pass "
                f"checksums={{{path.name!r}: '<sha256>'}} or verify=None/False"
            )
        if self.verify is not False and expected is not None:
            actual = checksum(data, expected)
            if actual != expected.lower():
                raise DataError(
                    f"{path}: {algorithm(expected)} mismatch, expected {expected}, got "
                    f"{actual}; the file is corrupt, truncated or from another data set. Obtain "
                    f"{self.info.source} (or skip the check: verify=False, or "
                    "data.verify_checksums = false in a config)"
                )
        if path.suffix != ".gz":
            return path, data
        try:
            return path, gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(
                f"{path}: not a valid gzip file ({err}); {self.hint(filename)}"
            ) from err
