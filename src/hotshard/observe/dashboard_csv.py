"""A dashboard panel's CSV (Grafana's panel inspector, Data tab, Download CSV) as observations.

The file is a table: a time column (``Time``; Unix milliseconds or seconds, RFC 3339, or
``YYYY-MM-DD HH:MM:SS``, read as UTC) and one column per series, named as the panel names it
(``{instance="a", shard="3"}``, ``shard 3``, a legend). An optional first line ``sep=,`` (the
"for Excel" download) is skipped. A value may carry the unit the panel formats it with when
"Formatted data" was on (``45.3%``, ``12 ms``, ``1.2 s``); an empty cell is no sample.

``shard_pattern`` (a regular expression; its group ``shard`` or first group) takes the shard
out of each column's name; columns it does not match are left out, and a file where it matches
none is refused, naming the columns. What each metric becomes, per shard over the rows in
``[start, end]``:

- ``cpu``: the mean of the shard's samples, a busy fraction of one core (a percent when the
  values say ``%`` or the unit says so);
- ``requests``: the panel's per-second rates integrated over time, each sample times the time
  to the next row (the last row gets the median step), rounded to whole requests;
- ``p99``: the largest of the shard's interval p99s: a p99 over the window cannot be derived
  from interval p99s, so the worst interval's is taken, and the notes say so.
"""

from __future__ import annotations

import csv
import math
import os
import re
import statistics
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hotshard.errors import InputError
from hotshard.observations import Observations, ShardObservation
from hotshard.observe._common import Notes, build, iso

__all__ = ["DEFAULT_SHARD_PATTERN", "METRICS", "UNITS", "read_dashboard_csv"]

METRICS = ("cpu", "requests", "p99")
UNITS = ("fraction", "percent", "s", "ms", "us")
DEFAULT_SHARD_PATTERN = r'shard="?(?P<shard>[^",}\s]+)'
_VALUE = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(%|ms|s|µs|us|ns)?\s*$")
_UNIT_OF_SUFFIX = {"%": "percent", "ms": "ms", "s": "s", "µs": "us", "us": "us", "ns": "ns"}
_TO = {"cpu": {"fraction": 1.0, "percent": 0.01},
       "p99": {"s": 1e3, "ms": 1.0, "us": 1e-3, "ns": 1e-6}}


# Unix seconds beyond the year 9999 are not a dashboard's time
_LAST_TIME_S = 253_402_300_799.0
# the largest value a panel's sample may hold (a CPU share, a rate, a latency in any unit)
_MAX_VALUE = 1e15
# samples held at most (12 bytes each): a CSV beyond it is a month of 1 s rows x 1,000 shards
MAX_SAMPLES = 50_000_000


def _time(text: str, path: Path, line: int) -> float:
    raw = text.strip()
    try:
        number = float(raw)
    except ValueError:
        number = None
    if number is not None:
        seconds = number / 1000.0 if number > 1e11 else number  # Unix ms (Grafana's raw) or s
        if not (math.isfinite(seconds) and 0 <= seconds <= _LAST_TIME_S):
            raise InputError(f"{path}:{line}: the time {raw[:40]!r} is not a time (Unix ms or "
                             "s after 1970, RFC 3339, YYYY-MM-DD HH:MM:SS)")
        return seconds
    try:
        stamp = datetime.fromisoformat(raw.replace("z", "Z"))
    except ValueError:
        raise InputError(f"{path}:{line}: the time {raw[:40]!r} is not a time (Unix ms or s, "
                         "RFC 3339, YYYY-MM-DD HH:MM:SS)") from None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


def _value(text: str, path: Path, line: int, column: str) -> tuple[float, str | None] | None:
    if not text.strip():
        return None
    m = _VALUE.match(text.replace(",", ""))
    if not m:
        raise InputError(f"{path}:{line}: column {column[:80]!r}: cannot read {text[:40]!r} as "
                         "a number (download the CSV with 'Formatted data' off, or with units "
                         "such as % or ms only)")
    value = float(m.group(1))
    if not (math.isfinite(value) and abs(value) <= _MAX_VALUE):
        raise InputError(f"{path}:{line}: column {column[:80]!r}: {text[:40]!r} is beyond any "
                         f"panel's value (at most {_MAX_VALUE:g})")
    return value, _UNIT_OF_SUFFIX.get(m.group(2) or "")


class _Samples:
    """One shard's samples of one file, compact (row index, value; the units written)."""

    __slots__ = ("rows", "values", "units")

    def __init__(self) -> None:
        self.rows = array("i")
        self.values = array("d")
        self.units: set[str] = set()

    def add(self, row: int, value: float, unit: str | None) -> None:
        self.rows.append(row)
        self.values.append(value)
        if unit:
            self.units.add(unit)


def _rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The CSV's non-empty rows with their line numbers, read as they come (a large export
    is never held whole); Excel's ``sep=`` hint skipped."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            first = True
            for i, row in enumerate(csv.reader(handle)):
                if not row or not any(c.strip() for c in row):
                    continue
                if first and ",".join(row).strip().lower().startswith("sep="):
                    first = False
                    continue
                first = False
                yield i + 1, row
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None


def _series(path: Path, pattern: re.Pattern[str], start: float | None, end: float | None,
            notes: Notes) -> tuple[array, dict[str, _Samples], str]:
    """(row times, {shard: samples}, time column name) of one file, read row by row."""
    rows = _rows(path)
    first = next(rows, None)
    if first is None:
        raise InputError(f"{path}: not a dashboard CSV: expected a header (a time column "
                         "and one column per series) and rows")
    header = [c.strip() for c in first[1]]
    if len(header) < 2:
        raise InputError(f"{path}: not a dashboard CSV: one column only (expected a time "
                         "column and one per series)")
    time_col = next((i for i, c in enumerate(header) if c.lower() in ("time", "timestamp")), 0)
    by_shard: dict[int, str] = {}
    for i, name in enumerate(header):
        if i == time_col:
            continue
        m = pattern.search(name)
        if m:
            by_shard[i] = m.group("shard") if "shard" in m.groupdict() else (
                m.group(1) if m.groups() else m.group(0))
    if not by_shard:
        shown = ", ".join(repr(c[:60]) for i, c in enumerate(header[:20]) if i != time_col)
        raise InputError(f"{path}: no column's name has a shard for the pattern "
                         f"{pattern.pattern!r} (columns: {shown}); give ${{shard_pattern}} "
                         "with a group that takes the shard out of the name")
    left = [header[i] for i in range(len(header)) if i != time_col and i not in by_shard]
    if left:
        notes.add(f"{path.name}: {len(left)} column(s) without a shard for the pattern left "
                  f"out (e.g. {left[0][:60]!r})")
    times = array("d")
    values: dict[str, _Samples] = {}
    columns = list(by_shard.items())
    held = 0
    seen_row = False
    for line, row in rows:
        seen_row = True
        t = _time(row[time_col] if time_col < len(row) else "", path, line)
        if (start is not None and t < start) or (end is not None and t > end):
            continue
        if times and t <= times[-1]:
            raise InputError(f"{path}: the rows' times do not increase: not one time series "
                             "per column (export with 'Series joined by time')")
        k = len(times)
        times.append(t)
        width = len(row)
        for i, shard in columns:
            if i >= width:
                continue
            text = row[i]
            try:   # the common case, a plain number, without the regex (10x faster)
                value, unit = float(text), None
                plain = math.isfinite(value) and abs(value) <= _MAX_VALUE and "_" not in text
            except ValueError:
                plain = False
            if not plain:   # units, separators, blanks, errors: the regex and its messages
                got = _value(text, path, line, header[i])
                if got is None:
                    continue
                value, unit = got
            samples = values.get(shard)
            if samples is None:
                samples = values[shard] = _Samples()
            samples.add(k, value, unit)
            held += 1
        if held > MAX_SAMPLES:
            raise InputError(f"{path}: more than {MAX_SAMPLES:,} samples: export a shorter "
                             "window or a coarser interval")
    if not seen_row:
        raise InputError(f"{path}: not a dashboard CSV: expected a header (a time column "
                         "and one column per series) and rows")
    if not times or not values:
        window = "" if start is None and end is None else (
            f" between {iso(start) if start is not None else 'the start'} and "
            f"{iso(end) if end is not None else 'the end'}")
        raise InputError(f"{path}: no samples{window}")
    return times, values, header[time_col]


def _unit(metric: str, unit: str | None, samples: _Samples,
          notes: Notes, name: str) -> str | None:
    """The unit of a metric's values: given, else written with them, else the default."""
    written = set(samples.units)
    if unit is None and len(written) > 1:
        raise InputError(f"{name}: values in several units ({', '.join(sorted(written))})")
    unit = unit or (written.pop() if written else None)
    if metric == "requests":
        if unit not in (None,):
            raise InputError(f"{name}: requests are per-second rates without a unit, got {unit}")
        return None
    if unit is None:
        if metric == "cpu":
            top = max(samples.values)
            unit = "fraction" if top <= 1 else "percent"
            notes.add(f"{name}: cpu read as {unit}s of a core (largest value {top:g}); say "
                      "--unit fraction or --unit percent if that is wrong")
        else:
            unit = "ms"
            notes.add(f"{name}: p99 read in milliseconds; say --unit s if the panel shows "
                      "seconds")
    if unit not in _TO[metric]:
        raise InputError(f"{name}: {metric} cannot be in {unit}")
    return unit


def read_dashboard_csv(files: list[tuple[str, str | os.PathLike[str]]], *,
                       shard_pattern: str = DEFAULT_SHARD_PATTERN, unit: str | None = None,
                       start: float | None = None, end: float | None = None,
                       label: str = "production") -> Observations:
    """Per-shard CPU, requests or p99 from one or more dashboard CSV files.

    Parameters
    ----------
    files : list of (metric, path)
        Each file and what its values are: ``cpu``, ``requests`` (per-second rates) or
        ``p99``. One file per metric.
    shard_pattern : str
        Regular expression taking the shard out of a column's name (group ``shard``, else the
        first group).
    unit : {"fraction", "percent", "s", "ms", "us"} or None
        The values' unit when they carry none (one file) or to override it.
    start, end : float or None
        Keep the rows inside this window (Unix seconds).

    Raises
    ------
    InputError
        A file missing or not such a table, a bad value, no column matching the pattern, a
        metric given twice, a window without rows.
    """
    if not files:
        raise InputError("no file given")
    metrics = [m for m, _ in files]
    for metric in metrics:
        if metric not in METRICS:
            raise InputError(f"unknown metric {metric!r}; choose from {', '.join(METRICS)}")
    if len(set(metrics)) != len(metrics):
        raise InputError("each metric from one file: "
                         + ", ".join(sorted({m for m in metrics if metrics.count(m) > 1}))
                         + " given twice")
    if unit is not None and unit not in UNITS:
        raise InputError(f"unknown unit {unit!r}; choose from {', '.join(UNITS)}")
    if unit is not None and len(files) > 1:
        raise InputError("${unit} applies to one file: give one file, or units in the values")
    try:
        pattern = re.compile(shard_pattern)
    except re.error as exc:
        raise InputError(f"the shard pattern {shard_pattern!r} is not a regular expression: "
                         f"{exc}") from None
    from hotshard._files import require_file

    notes = Notes()
    per: dict[str, dict[str, Any]] = {}
    spans: list[tuple[float, float]] = []
    for metric, name in files:
        path = require_file(name, what="dashboard CSV")
        times, series, _ = _series(path, pattern, start, end, notes)
        step = statistics.median(b - a for a, b in zip(times, times[1:], strict=False)) \
            if len(times) > 1 else None
        spans.append((times[0], times[-1] + (step or 0.0)))
        for shard, samples in series.items():
            u = _unit(metric, unit, samples, notes, f"{path.name} ({metric})")
            target = per.setdefault(shard, {})
            if metric == "cpu":
                scale = _TO["cpu"][u or "fraction"]
                target["cpu"] = round(statistics.fmean(samples.values) * scale, 6)
            elif metric == "p99":
                scale = _TO["p99"][u or "ms"]
                target["p99_ms"] = round(max(samples.values) * scale, 6)
            else:
                if step is None:
                    raise InputError(f"{path}: one row: requests need two rows to integrate "
                                     "the rates over time")
                total = sum(v * (times[k + 1] - times[k] if k + 1 < len(times) else step)
                            for k, v in zip(samples.rows, samples.values, strict=True))
                if not math.isfinite(total) or total >= 2**63:
                    raise InputError(f"{path}: shard {shard[:40]}'s requests add up past any "
                                     "count: the rates are not per-second rates")
                target["requests"] = max(0, round(total))
        if metric == "requests":
            notes.add(f"{path.name}: requests are the per-second rates integrated over the "
                      "rows' times (each row until the next), rounded")
        if metric == "p99":
            notes.add(f"{path.name}: a shard's p99_ms is its worst interval's p99 (a p99 over "
                      "the window cannot be derived from interval p99s)")
    over = sorted(s for s, v in per.items() if v.get("cpu", 0) > 1)
    if over:
        raise InputError(f"shard {over[0]}: CPU above one core ({per[over[0]]['cpu']:g}); "
                         "give ${unit} percent if the panel shows percents")
    shards = [ShardObservation(id=s, **v) for s, v in per.items()]
    first = min(a for a, _ in spans)
    last = max(b for _, b in spans)
    fields: dict[str, Any] = {"duration_s": round(last - first, 3)}
    counts = [s.requests for s in shards if s.requests is not None]
    if counts and sum(counts) and last > first:
        fields["rate_rps"] = fields["achieved_rps"] = round(sum(counts) / (last - first), 3)
    for missing, why in (("cpu", "cpu"), ("requests", "requests"), ("p99", "p99")):
        if missing not in metrics:
            notes.missing(f"per-shard {why}", f"no {why} file (give {why}=FILE)")
    notes.missing("latency_ms", "a panel of per-shard series has no run-wide percentiles")
    source = {"source": "dashboard-csv", "files": {m: str(p) for m, p in files},
              "shard_pattern": shard_pattern, "start": iso(first), "end": iso(last)}
    return build(label, source=source, notes=notes, shards=shards, fields=fields)
