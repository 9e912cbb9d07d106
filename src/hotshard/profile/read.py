"""Read numeric observations for a fit: plain lists, table columns, frequency histograms.

Every malformed input raises ``InputError`` naming the file, the line or column, and the fix.
"""

from __future__ import annotations

import gzip
import os
import sys
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hotshard._files import csv_row_problem, require_file
from hotshard.errors import HeaderLineError, InputError

__all__ = ["FitInput", "HeaderLineError", "read_fit_input"]

# Delimiters a table's header line may use, in the order a tie is broken.
_DELIMITERS = ("\t", ",", ";")


@dataclass(frozen=True)
class FitInput:
    """Values read from a file; ``counts`` is set when the file was a frequency histogram."""

    values: NDArray
    counts: NDArray | None
    source: str


def _read_bytes(path: str) -> bytes:
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        p = require_file(path)
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror}") from exc
        if path.endswith(".gz"):
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError) as exc:
                raise InputError(f"{path} is not a valid gzip file: {exc}") from exc
    if not data.strip():
        raise InputError(f"{path} is empty: it holds no observations")
    return data


def _parse_numbers(tokens: list[bytes] | NDArray, where: str) -> NDArray:
    """Parse tokens as int64 (or float64 if any has a decimal point; the fit checks integrality)."""
    arr = np.asarray(tokens)
    try:
        return arr.astype(np.int64)
    except (ValueError, OverflowError):
        pass
    try:
        return arr.astype(np.float64)
    except ValueError:
        pass
    for i, tok in enumerate(arr):
        try:
            float(tok)
        except ValueError:
            text = tok.decode(errors="replace") if isinstance(tok, bytes) else str(tok)
            raise InputError(f"{where} {i + 1}: {text!r} is not a number") from None
    raise InputError(f"{where}: values are not numbers")  # pragma: no cover


_NEWLINE, _ZERO = ord("\n"), ord("0")
_POW10 = 10 ** np.arange(19, dtype=np.int64)


def _digit_lines(data: bytes) -> NDArray[np.int64] | None:
    """The common case at numpy speed: only digits and newlines (no sign, no blank line, at
    most 18 digits a line). Parses ~1e6 lines in ~20 ms, against ~140 ms for split + astype.
    None when the data is anything else, which the general parser then handles."""
    buf = np.frombuffer(data, dtype=np.uint8)
    if buf.size and buf[-1] != _NEWLINE:
        buf = np.append(buf, np.uint8(_NEWLINE))
    is_digit = (buf >= _ZERO) & (buf <= _ZERO + 9)
    ends = np.flatnonzero(buf == _NEWLINE)
    if ends.size == 0 or is_digit.sum() + ends.size != buf.size:
        return None
    starts = np.concatenate([[0], ends[:-1] + 1])
    lengths = ends - starts
    if lengths.min() < 1 or lengths.max() > 18:
        return None
    # each digit's place value is 10 ** (digits after it on its line)
    digit_at = np.flatnonzero(is_digit)
    line_of = np.repeat(np.arange(ends.size), lengths)
    place = ends[line_of] - digit_at - 1
    terms = (buf[digit_at] - _ZERO).astype(np.int64) * _POW10[place]
    return np.add.reduceat(terms, np.concatenate([[0], np.cumsum(lengths)[:-1]]))


def _header_columns(line: bytes) -> list[str] | None:
    """Column names if ``line`` looks like a delimited header: two or more fields, not all
    numbers; else None."""
    import csv

    text = line.decode(errors="replace").strip()
    delim = _delimiter_of(text)
    if delim is None:
        return None
    fields = [f.strip() for f in next(csv.reader([text], delimiter=delim))]
    if len(fields) < 2 or all(_is_number(f.encode()) for f in fields if f):
        return None
    return fields


def _delimiter_of(header: str) -> str | None:
    """The delimiter the header line uses most (tab, comma, semicolon), or None."""
    best = max(_DELIMITERS, key=header.count)
    return best if header.count(best) else None


def _read_plain(path: str) -> FitInput:
    data = _read_bytes(path)
    fast = _digit_lines(data)
    if fast is not None:
        return FitInput(fast, None, path)
    lines = data.splitlines()
    first_line = next((ln for ln in lines if ln.strip()), b"")
    columns = _header_columns(first_line)
    if columns is not None:
        names = ", ".join(repr(c) for c in columns)
        raise HeaderLineError(
            f"{path} is a table, not one number per line: its header has columns {names}; "
            "name one of them as the column to read", columns)
    tokens = data.split()
    if len(tokens) > len(lines):
        for i, line in enumerate(lines, 1):
            if len(line.split()) > 1:
                raise InputError(
                    f"{path} line {i} has several fields: expected one number per line "
                    "(for a table, name the column to read; for value<TAB>count lines, read "
                    "it as a histogram)"
                )
    if lines and lines[0].strip() and not _is_number(lines[0].strip()):
        first = lines[0].strip().decode(errors="replace")
        if _delimiter_of(first) is not None:  # numbers only: a table without a header
            raise InputError(
                f"{path} line 1 {first!r} has several fields: expected one number per line "
                "(for a table, give it a header line and name the column to read)"
            )
        raise HeaderLineError(
            f"{path} line 1: {first!r} is not a number: if it is a header, name {first!r} "
            "as the column to read", [first])
    nonblank = [ln.strip() for ln in lines if ln.strip()] if len(tokens) != len(lines) else tokens
    return FitInput(_parse_numbers(nonblank, f"{path} line"), None, path)


def _is_number(tok: bytes) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _sniff_delimiter(path: str, first_line: bytes) -> str:
    if path.endswith((".tsv", ".tsv.gz", ".tab")):
        return "\t"
    return _delimiter_of(first_line.decode(errors="replace")) or ","


def _read_table(path: str, column: str) -> FitInput:
    import pyarrow as pa

    if path.endswith((".parquet", ".pq")):
        table = _read_parquet_column(path, column)
    else:
        data = _read_bytes(path)
        first = data.split(b"\n", 1)[0]
        import pyarrow.csv as pacsv

        try:
            table = pacsv.read_csv(
                pa.BufferReader(data),
                parse_options=pacsv.ParseOptions(delimiter=_sniff_delimiter(path, first)),
                convert_options=pacsv.ConvertOptions(include_columns=[column]),
            )
        except (pa.ArrowInvalid, pa.ArrowKeyError) as exc:
            header = first.decode(errors="replace").strip()
            if column.encode() not in first:
                raise InputError(
                    f"{path} has no column {column!r}; its header is: {header}"
                ) from None
            import io

            problem = csv_row_problem(io.StringIO(data.decode(errors="replace"), newline=""),
                                      delimiter=_sniff_delimiter(path, first))
            raise InputError(
                f"{path} {problem}: fix or drop that row" if problem else
                f"{path}: cannot parse column {column!r}: {_first_line(exc)}"
            ) from None
        return FitInput(_column_values(table.column(column), path, column, header_lines=1),
                        None, path)
    return FitInput(_column_values(table.column(column), path, column), None, path)


def _read_parquet_column(path: str, column: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    require_file(path)
    try:
        schema = pq.read_schema(path)
        if column not in schema.names:
            raise InputError(
                f"{path} has no column {column!r}; its columns are: {', '.join(schema.names)}"
            )
        return pq.read_table(path, columns=[column])
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path} is not a readable Parquet file: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _column_values(col, path: str, column: str, header_lines: int | None = None) -> NDArray:
    """The column as numbers; else name its first bad cell by line (a text table with
    ``header_lines`` lines before the data) or by row (Parquet)."""
    import pyarrow as pa

    def where(index: int) -> str:
        return (f"line {index + 1 + header_lines:,}" if header_lines is not None
                else f"row {index + 1:,}")

    if col.null_count:
        first = col.is_null().to_pylist().index(True)
        raise InputError(f"{path}: column {column!r} has {col.null_count} empty cell"
                         f"{'s' if col.null_count > 1 else ''}, the first at {where(first)}")
    if len(col) == 0:
        raise InputError(f"{path}: column {column!r} has no rows")
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        values = col.to_pylist()
        index = next((i for i, v in enumerate(values) if not _is_number(str(v).encode())), 0)
        raise InputError(
            f"{path}: column {column!r} holds non-numeric values such as {values[index]!r} "
            f"at {where(index)}"
        )
    return col.to_numpy()


def _read_histogram(path: str) -> FitInput:
    data = _read_bytes(path)
    lines = [ln for ln in data.splitlines() if ln.strip()]
    found = _delimiter_of(lines[0].decode(errors="replace"))
    delim = found.encode() if found else None
    rows = [ln.split(delim) for ln in lines]
    start = 0
    if not _is_number(rows[0][0].strip()):
        start = 1  # header line
    if start >= len(rows):
        raise InputError(f"{path} has a header but no histogram rows")
    for i in range(start, len(rows)):
        if len(rows[i]) != 2:
            raise InputError(
                f"{path} line {i + 1}: expected 'value<TAB>count', got {len(rows[i])} fields"
            )
    values = _parse_numbers([r[0].strip() for r in rows[start:]], f"{path} value on row")
    counts = _parse_numbers([r[1].strip() for r in rows[start:]], f"{path} count on row")
    return FitInput(values, counts, path)


def read_fit_input(
    path: str | os.PathLike[str], *, column: str | None = None, histogram: bool = False
) -> FitInput:
    """Read observations from ``path`` (``-`` for standard input).

    Parameters
    ----------
    path : str
        A file with one number per line; or a CSV/TSV/Parquet table when ``column`` is given;
        or ``value<TAB>count`` lines (header allowed) when ``histogram`` is true. ``.gz`` is
        decompressed.
    column : str, optional
        Column of a table holding the observations.
    histogram : bool
        Read a frequency histogram: each line a value and how many times it was observed.
    """
    path = os.fspath(path)
    if column is not None and histogram:
        raise InputError("column and histogram are exclusive: a histogram has two columns")
    if histogram:
        return _read_histogram(path)
    if column is not None:
        return _read_table(path, column)
    if path.endswith((".parquet", ".pq")):
        raise InputError(f"{path} is a Parquet table: name the column to read")
    return _read_plain(path)
