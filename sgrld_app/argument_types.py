"""The types of the ``sgrld`` command's options: text to a checked value, or a usage error (exit 2)
naming the option before anything runs. :mod:`sgrld_app.arguments` and :mod:`sgrld_app.demo` use
them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def integer_at_least(low: int) -> Callable[[str], int]:
    """The ``type`` of an integer option of at least ``low``: anything else is a usage error
    (exit 2) naming the option, before anything runs.

    Example:
        >>> integer_at_least(1)("3"), integer_at_least(0)("0")
        (3, 0)
        >>> integer_at_least(1)("-1")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: must be an integer >= 1, got '-1'
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


positive_int = integer_at_least(1)
"""An integer option of at least 1."""


def device_count(text: str) -> int | str:
    """``--devices N`` as a number (other text is left for the configuration check)."""
    return int(text) if text.isdigit() else text
