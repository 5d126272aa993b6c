"""Tests of sgrld.data.libsvm: the LIBSVM sparse text format, valid and malformed."""

from __future__ import annotations

import numpy as np
import pytest

from sgrld.data import DataError, MissingDataError
from sgrld.data.libsvm import load_libsvm, parse_libsvm


def test_parses_sparse_rows_with_absent_features_zero():
    x, y = parse_libsvm(b"+1 1:0.5 3:-2e1\n-1 2:1.25\n0 \n", num_features=3)
    np.testing.assert_array_equal(x, [[0.5, 0, -20], [0, 1.25, 0], [0, 0, 0]])
    np.testing.assert_array_equal(y, [1, -1, 0])
    assert x.dtype == np.float32 and y.dtype == np.float32


def test_crlf_blank_lines_tabs_and_unordered_indices():
    x, y = parse_libsvm(b"1\t2:3 1:4\r\n\r\n\n0 1:1\r\n", num_features=2)
    np.testing.assert_array_equal(x, [[4, 3], [1, 0]])
    np.testing.assert_array_equal(y, [1, 0])


def test_load_reads_a_file(tmp_path):
    path = tmp_path / "tiny"
    path.write_bytes(b"-1 1:1.000000 2:22.080000 \n+1 2:0.5")
    x, y = load_libsvm(path, 2)
    np.testing.assert_allclose(x, [[1, 22.08], [0, 0.5]])
    np.testing.assert_array_equal(y, [-1, 1])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"", "no examples"),
        (b"\n  \n", "no examples"),
        (b"1 1:1\n1 2\n", "line 2: token '2' is not of the form index:value"),
        (b"1 a:1\n", "line 1: feature index 'a' is not a positive integer"),
        (b"1 -1:1\n", "feature index '-1' is not a positive integer"),
        (b"1 0:1\n", "feature index 0 is outside [1, 3]"),
        (b"1 4:1\n", "feature index 4 is outside [1, 3]"),
        (b"1 1:x\n", "value 'x' is not a number"),
        (b"1 1:nan\n", "value 'nan' is not finite"),
        (b"1 1:-inf\n", "value '-inf' is not finite"),
        (b"one 1:1\n", "label 'one' is not a number"),
        (b"1 1:1\ninf 1:1\n", "line 2: label 'inf' is not finite"),
        (b"1 2:1 2:3\n", "feature index 2 appears twice"),
        (b"1 1:\xff\n", "not a text file"),
    ],
)
def test_malformed_input_names_file_and_line(text, message):
    with pytest.raises(DataError, match="^bad.txt") as err:
        parse_libsvm(text, num_features=3, source="bad.txt")
    assert message in str(err.value)


def test_missing_file_and_bad_num_features(tmp_path):
    with pytest.raises(MissingDataError, match="absent"):
        load_libsvm(tmp_path / "absent", 3)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="num_features"):
            parse_libsvm(b"1 1:1\n", num_features=bad)
