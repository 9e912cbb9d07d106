"""Input files: one check, one message, wherever a path enters."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from hotshard.errors import HotshardError, InputError

__all__ = ["csv_row_problem", "is_number", "open_text", "require_file"]


def require_file(path: str | os.PathLike[str], *, what: str = "file",
                 error: type[HotshardError] = InputError) -> Path:
    """The path as a ``Path`` if it names a readable file; else ``error`` saying what is wrong."""
    p = Path(path)
    if not p.exists():
        raise error(f"no such {what}: {path}")
    if p.is_dir():
        raise error(f"{path} is a directory, not a {what}")
    return p


def is_number(text: str) -> bool:
    """Whether a field of a text file reads as a number (so a first row that is not is a
    header)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def open_text(path: str | os.PathLike[str]):
    """A text handle on ``path`` for the csv module (``.gz`` decompressed, bad bytes
    replaced): for error paths that must say which line is wrong."""
    import gzip

    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", newline="", encoding="utf-8", errors="replace")
    return open(path, newline="", encoding="utf-8", errors="replace")  # noqa: SIM115


def csv_row_problem(lines: Iterable[str], *, delimiter: str | None = None) -> str | None:
    """The first row of a delimited table that does not parse as a row of its header's width,
    in words with its line number ("line 3 has 3 fields where the header has 2 (key, n)",
    "line 7: unexpected end of data" for an unclosed quote); None when every row parses.

    Engines report a malformed CSV by their own parse state (a sniffer that gave up reads it as
    one column; a parser names the row's text but not its line): this pass, on the error path
    only, finds the line and the cause a person needs to fix it. ``delimiter`` defaults to the
    header's most frequent of tab, comma and semicolon.
    """
    import csv
    import itertools

    it = iter(lines)
    first = next(it, None)
    if first is None:
        return None
    if delimiter is None:
        delimiter = max(("\t", ",", ";"), key=first.count) if any(
            d in first for d in "\t,;") else ","
    reader = csv.reader(itertools.chain([first], it), delimiter=delimiter, strict=True)
    try:
        header = next(reader)
        for row in reader:
            if row and len(row) != len(header):
                names = ", ".join(header) if len(header) <= 8 else \
                    ", ".join(header[:8]) + ", ..."
                return (f"line {reader.line_num} has {len(row)} field"
                        f"{'s' if len(row) != 1 else ''} where the header has "
                        f"{len(header)} ({names})")
    except csv.Error as exc:
        cause = str(exc)
        if "end of data" in cause or "EOF" in cause:
            cause = "a quote opened on or before this line is never closed"
        return f"line {reader.line_num}: {cause}"
    return None
