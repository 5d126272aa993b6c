"""Shared pieces of the property-based (``hypothesis``) tests of the file parsers.

Every parser is fed a damaged copy of a small valid file that the test writes itself
(:func:`damaged`) and inputs built to break it in a specific way (oversized header dimensions,
wrong dtypes). :func:`fuzz` runs one property ``FAST`` times in the normal run and ``SLOW`` times
under ``-m slow``, with a fixed seed per budget (the same inputs on every machine, different ones
in the two runs) and without an example database in the repository; it checks that the property
really ran that many times.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

FAST = 300
"""Examples per parser in the normal test run."""

SLOW = 1000
"""Examples per parser under ``-m slow``, drawn with another seed, so they add to ``FAST``."""

BUDGETS = [FAST, pytest.param(SLOW, marks=pytest.mark.slow, id="slow")]
"""Parametrise a fuzz test with ``@pytest.mark.parametrize("budget", BUDGETS)``."""


def truncated(valid: bytes) -> st.SearchStrategy[bytes]:
    """``valid`` cut short at any length."""
    return st.integers(0, len(valid) - 1).map(lambda k: valid[:k])


def bit_flipped(valid: bytes) -> st.SearchStrategy[bytes]:
    """``valid`` with one to eight bits flipped."""

    def flip(bits: list[int]) -> bytes:
        data = bytearray(valid)
        for bit in bits:
            data[bit // 8] ^= 1 << (bit % 8)
        return bytes(data)

    return st.lists(st.integers(0, 8 * len(valid) - 1), min_size=1, max_size=8).map(flip)


def byte_edited(valid: bytes) -> st.SearchStrategy[bytes]:
    """``valid`` with one to four bytes replaced, inserted or deleted."""
    edit = st.tuples(
        st.sampled_from(["replace", "insert", "delete"]), st.floats(0, 1), st.integers(0, 255)
    )

    def apply(edits: list[tuple[str, float, int]]) -> bytes:
        data = bytearray(valid)
        for op, where, byte in edits:
            i = min(int(where * len(data)), max(len(data) - 1, 0))
            if op == "insert":
                data.insert(i, byte)
            elif data and op == "delete":
                del data[i]
            elif data:
                data[i] = byte
        return bytes(data)

    return st.lists(edit, min_size=1, max_size=4).map(apply)


def damaged(valid: bytes, *others: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """``valid`` itself, truncated, bit-flipped or byte-edited; random bytes; or ``others``."""
    return st.one_of(
        st.just(valid),
        truncated(valid),
        bit_flipped(valid),
        byte_edited(valid),
        st.binary(max_size=2 * len(valid)),
        *others,
    )


def fuzz(budget: int, strategy: st.SearchStrategy[Any]) -> Callable[[Callable], None]:
    """Run the decorated property on ``budget`` generated examples, now, and count them.

    Example (inside a test):
        >>> @fuzz(5, st.binary())
        ... def _(data):
        ...     assert isinstance(data, bytes)
    """

    def run(prop: Callable) -> None:
        calls = []

        @seed(budget)
        @settings(
            max_examples=budget,
            database=None,
            deadline=2000,  # ms: a parser that takes this long on a few kB is hanging
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(strategy)
        def check(example: Any) -> None:
            calls.append(None)
            prop(example)

        check()
        assert len(calls) >= budget, f"only {len(calls)} of {budget} examples ran"

    return run
