"""Reading observations: formats, and one clear error per kind of bad input."""

import gzip

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hotshard.errors import InputError
from hotshard.profile.read import HeaderLineError, read_fit_input


def test_plain_lines(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("3\n1\n\n  7 \r\n")
    assert read_fit_input(f).values.tolist() == [3, 1, 7]


def test_gzip(tmp_path):
    f = tmp_path / "x.txt.gz"
    f.write_bytes(gzip.compress(b"1\n2\n2\n"))
    assert read_fit_input(f).values.tolist() == [1, 2, 2]


def test_csv_column_and_tsv(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("key,count\na,5\nb,9\n")
    assert read_fit_input(f, column="count").values.tolist() == [5, 9]
    g = tmp_path / "t.tsv"
    g.write_text("key\tcount\na\t5\nb\t9\n")
    assert read_fit_input(g, column="count").values.tolist() == [5, 9]


def test_parquet_column(tmp_path):
    f = tmp_path / "t.parquet"
    pq.write_table(pa.table({"key": ["a", "b"], "n": [4, 6]}), f)
    assert read_fit_input(f, column="n").values.tolist() == [4, 6]


def test_histogram_with_header(tmp_path):
    f = tmp_path / "h.hist"
    f.write_text("degree\tfrequency\n0\t10\n1\t5\n4\t2\n")
    data = read_fit_input(f, histogram=True)
    assert data.values.tolist() == [0, 1, 4]
    assert data.counts.tolist() == [10, 5, 2]


@pytest.mark.parametrize(
    ("content", "kwargs", "message"),
    [
        ("", {}, "is empty"),
        ("1\n2\nabc\n", {}, "line 3: 'abc' is not a number"),
        ("count\n1\n2\n", {}, "'count' is not a number: if it is a header, name 'count' as "
                               "the column to read"),
        ("1,2\n3,4\n", {}, "line 1 '1,2' has several fields: expected one number per line"),
        ("1 2\n3\n", {}, "line 1 has several fields"),
        ("a,b\n1,2\n", {"column": "c"}, "no column 'c'; its header is: a,b"),
        ("a,b\nx,2\ny,3\n", {"column": "a"}, "non-numeric values such as 'x'"),
        ("a,b\n1,2\n,3\n", {"column": "a"}, "1 empty cell, the first at line 3"),
        ("v\tc\n1\t2\t3\n", {"histogram": True}, "expected 'value<TAB>count'"),
        ("v\tc\n", {"histogram": True}, "header but no histogram rows"),
        ("1\tx\n", {"histogram": True}, "count on row 1: 'x' is not a number"),
    ],
)
def test_bad_files(tmp_path, content, kwargs, message):
    f = tmp_path / ("in.csv" if "column" in kwargs else "in.txt")
    f.write_text(content)
    with pytest.raises(InputError, match=message):
        read_fit_input(f, **kwargs)


@pytest.mark.parametrize(
    ("content", "columns"),
    [
        ("a,b\n1,2\n3,4\n", ["a", "b"]),
        ("a\tb\n1\t2\n", ["a", "b"]),
        ("a;b;c\n1;2;3\n", ["a", "b", "c"]),
        ('"user id",requests\nu1,5\n', ["user id", "requests"]),
        ("count\n1\n", ["count"]),
    ],
)
def test_a_table_read_as_numbers_lists_its_header_columns(tmp_path, content, columns):
    f = tmp_path / "t.csv"
    f.write_text(content)
    with pytest.raises(HeaderLineError) as info:
        read_fit_input(f)
    assert info.value.columns == columns
    message = str(info.value)
    assert "column to read" in message and "--" not in message  # no CLI flag in the library
    if len(columns) > 1:
        assert "its header has columns " + ", ".join(repr(c) for c in columns) in message
        assert repr(content.split("\n")[0]) not in message  # never the whole line as a name


def test_semicolon_table_column(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("key;count\na;5\nb;9\n")
    assert read_fit_input(f, column="count").values.tolist() == [5, 9]


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_fit_input(tmp_path / "nope.txt")
    with pytest.raises(InputError, match="is a directory"):
        read_fit_input(tmp_path)


def test_truncated_parquet(tmp_path):
    f = tmp_path / "t.parquet"
    pq.write_table(pa.table({"n": np.arange(1000)}), f)
    f.write_bytes(f.read_bytes()[:200])
    with pytest.raises(InputError, match="not a readable Parquet file"):
        read_fit_input(f, column="n")


def test_parquet_needs_a_column(tmp_path):
    f = tmp_path / "t.parquet"
    pq.write_table(pa.table({"n": [1, 2]}), f)
    with pytest.raises(InputError, match="is a Parquet table: name the column to read"):
        read_fit_input(f)


@pytest.mark.parametrize("content", [
    b"1\n22\n333\n", b"7", b"0\n10\n", b"123456789012345678\n",  # the digits-only fast path
    b"1\r\n2\r\n", b" 3\n4 \n", b"1\n\n2\n", b"1234567890123456789\n", b"2.0\n3\n",  # general
])
def test_every_plain_layout_reads_the_same_numbers(tmp_path, content):
    f = tmp_path / "n.txt"
    f.write_bytes(content)
    want = [int(tok) if tok.isdigit() else int(float(tok)) for tok in content.split()]
    assert read_fit_input(f).values.tolist() == want


def test_fast_path_matches_the_general_parser_on_many_numbers(tmp_path):
    values = np.random.default_rng(5).integers(0, 10**17, 100_000)
    f = tmp_path / "big.txt"
    f.write_text("\n".join(map(str, values)) + "\n")
    assert np.array_equal(read_fit_input(f).values, values)


def test_histograms_take_the_same_delimiters_as_tables(tmp_path):
    f = tmp_path / "semi.hist"
    f.write_text("value;count\n1;10\n2;4\n")
    data = read_fit_input(f, histogram=True)
    assert data.values.tolist() == [1, 2] and data.counts.tolist() == [10, 4]
