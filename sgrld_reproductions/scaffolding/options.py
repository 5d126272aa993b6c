"""The command-line options the reproductions have in common, and the argument types they parse.

:class:`~sgrld_reproductions.scaffolding.driver.Reproduction` adds ``--resume``
(:func:`resume_option`) to a resumable reproduction; a reproduction adds the others it takes in its
own ``options`` (``--epochs``, ``--replicates``, ``--data-dir``, ...), and :func:`data_overrides`
turns the data options into configuration overrides.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence


def resume_option(parser: argparse.ArgumentParser) -> None:
    """Add the switch ``--resume``: continue a stopped command's runs in ``--out``.

    Each run's folder continues from its newest checkpoint (:mod:`sgrld_app.run_folder`); a finished
    run is read back from its last one (after a compile), not run again; a run not yet started
    starts. A run that was started with other settings is an error naming them.

    Example:
      >>> p = argparse.ArgumentParser()
      >>> resume_option(p)
      >>> p.parse_args(["--resume"]).resume, p.parse_args([]).resume
      (True, False)
    """
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the runs of a stopped command with the same options in --out, each from "
        "the newest checkpoint in its folder (a finished run is read back, not rerun); runs "
        "without folders are run again",
    )


def subset_option(
    parser: argparse.ArgumentParser, flag: str, metavar: str, what: str, names: Sequence[str]
) -> None:
    """Add ``flag NAME ...``: run only these of ``names`` (default: all, i.e. None).

    Example:
      >>> p = argparse.ArgumentParser()
      >>> subset_option(p, "--only", "ROW", "rows", ["a", "b"])
      >>> p.parse_args(["--only", "b"]).only, p.parse_args([]).only
      (['b'], None)
    """
    parser.add_argument(
        flag,
        nargs="+",
        default=None,
        metavar=metavar,
        help=f"run only these {what}: {', '.join(names)}",
    )


def choices_option(
    parser: argparse.ArgumentParser,
    flag: str,
    choices: Sequence[str],
    help: str,
    metavar: str | None = None,
    nargs: str = "+",
) -> None:
    """Add ``flag NAME ...``: some of ``choices``, all of them by default (with ``nargs="*"``,
    also none).

    Example:
      >>> p = argparse.ArgumentParser()
      >>> choices_option(p, "--parts", ("blr", "cnn"), "parts to run", metavar="PART")
      >>> p.parse_args(["--parts", "cnn"]).parts, p.parse_args([]).parts
      (['cnn'], ['blr', 'cnn'])
    """
    parser.add_argument(
        flag, nargs=nargs, choices=choices, default=list(choices), metavar=metavar, help=help
    )


def positive_int(text: str) -> int:
    """An argument that is an integer >= 1, also written like ``2e6``.

    Example:
      >>> positive_int("2e6"), positive_int("16")
      (2000000, 16)
    """
    value = int(float(text)) if "e" in text.lower() else int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def positive_number(text: str, value: str, name: str) -> float:
    """``value``, the number in the argument ``text``, as a finite float > 0; an argparse error
    naming it ``name`` otherwise.

    Example:
      >>> positive_number("sgld=0.03", "0.03", "LR")
      0.03
      >>> positive_number("sgld=-1", "-1", "LR")
      Traceback (most recent call last):
      ...
      argparse.ArgumentTypeError: 'sgld=-1': LR must be finite and > 0
    """
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {name} must be a number") from None
    if not (math.isfinite(number) and number > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: {name} must be finite and > 0")
    return number


def epochs_option(parser: argparse.ArgumentParser, paper: int, quick: int) -> None:
    """Add ``--epochs N`` (an integer >= 1; None when not given): epochs per run, ``paper`` by
    default and ``quick`` with ``--quick``, as the help says.

    Example:
      >>> p = argparse.ArgumentParser()
      >>> epochs_option(p, paper=400, quick=4)
      >>> p.parse_args(["--epochs", "12"]).epochs, p.parse_args([]).epochs
      (12, None)
    """
    parser.add_argument(
        "--epochs",
        type=positive_int,
        help=f"epochs per run (default: {paper} as the paper, {quick} with --quick)",
    )


def replicates_option(parser: argparse.ArgumentParser, help: str) -> None:
    """Add ``--replicates R`` (an integer >= 1, default 1): independent runs per cell, ``help``
    saying how they are seeded and summarised.

    Example:
      >>> p = argparse.ArgumentParser()
      >>> replicates_option(p, "runs per cell")
      >>> p.parse_args(["--replicates", "3"]).replicates, p.parse_args([]).replicates
      (3, 1)
    """
    parser.add_argument("--replicates", type=positive_int, default=1, help=help)


def data_dir_option(parser: argparse.ArgumentParser, folder: str) -> None:
    """Add ``--data-dir``: ``folder`` (what it holds), by default ``$SGRLD_DATA_DIR``, else
    ``~/.cache/sgrld/data`` (:func:`sgrld.data.load_dataset`'s search).

    Example:
      >>> p = argparse.ArgumentParser()
      >>> data_dir_option(p, "folder with the four MNIST IDX files")
      >>> p.parse_args(["--data-dir", "data"]).data_dir, p.parse_args([]).data_dir
      ('data', None)
    """
    parser.add_argument(
        "--data-dir", help=f"{folder} (default: $SGRLD_DATA_DIR, else ~/.cache/sgrld/data)"
    )


def no_verify_option(parser: argparse.ArgumentParser, help: str) -> None:
    """Add the switch ``--no-verify-checksums``: do not check the data files' checksums (for
    files of one's own), ``help`` saying which files and checksums.

    Example:
      >>> p = argparse.ArgumentParser()
      >>> no_verify_option(p, "skip the SHA-256 check of the IDX files")
      >>> p.parse_args(["--no-verify-checksums"]).no_verify_checksums
      True
    """
    parser.add_argument("--no-verify-checksums", action="store_true", help=help)


def data_overrides(
    data_dir: str | None, train_size: int | None = None, verify: bool = True
) -> list[str]:
    """The ``data.*`` configuration overrides (:func:`sgrld_app.api.load_config`) of the options
    ``--train-size``, ``--data-dir`` and ``--no-verify-checksums``; none for their defaults.

    Example:
      >>> data_overrides("/data", 500, verify=False)
      ['data.train_size=500', "data.data_dir='/data'", 'data.verify_checksums=false']
      >>> data_overrides(None)
      []
    """
    overrides = [] if train_size is None else [f"data.train_size={train_size}"]
    if data_dir is not None:
        overrides.append(f"data.data_dir={data_dir!r}")
    if not verify:
        overrides.append("data.verify_checksums=false")
    return overrides
