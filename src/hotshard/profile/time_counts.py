"""The time sections' counts as SQL: one definition, run by DuckDB and by Spark alike.

``arrivals`` and ``timelines`` are counts of requests in windows, and a count in a window is
an aggregation: no engine has to hold, sort or ship the stream for it. So both are defined
here once, as SQL over a relation ``hs_events(k, t)`` (the key, and the time in seconds as a
finite double), in the dialect DuckDB and Spark SQL share (``floor``, ``CAST``, ``GROUP BY``,
exact ``DECIMAL(38, 0)`` sums). The engine creates ``hs_events`` over its input and runs the
statements; only aggregates come out, a few thousand numbers whatever the trace's length, and
the engines agree to the count because every window is the same IEEE expression of the same
double.

Windows, and why they nest. The arrival section counts in windows from 10 ms to an hour. Each
request's 10 ms *fine* window of the epoch, ``floor(t / 0.01)``, counted from the first
request's, is computed once (by DuckDB in the same scan as the per-second rate); every wider window
is an integer division of it (``floor(w / m)``, exact for integers below 2^53), so the windows
of every width nest exactly (a cascade's parent holds exactly its children) and an engine
groups its 10 ms counts, not the events, for every width past the first. The timelines'
windows are ``WINDOWS`` equal parts of the span's 10 ms windows, each of ``DETAIL_BINS``
sub-windows: the span being ``n`` fine windows long (its last request's fine window), fine
window ``w`` is in sub-window ``floor(w * WINDOWS * DETAIL_BINS / n)`` (integers; exact; the
last request's clipped into the last), its window the sub-window's tenth.
So every request's sub-window follows from its fine window, and the sub-windows' totals from
the 10 ms counts.

The index of dispersion and the cascade's fit need only sums of counts and of squared counts
over windows (``arrivals``' module notes): computed exactly as integers, so two engines give
the same alphas to the bit.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from hotshard.profile.arrivals import (
    ALPHA_MAX,
    IDC_SCALES,
    MAX_BINS,
    ArrivalModel,
    alpha_from_sums,
    cascade_levels,
)
from hotshard.profile.timelines import DETAIL_BINS, WINDOWS, Timelines, timelines_from_fine

__all__ = ["FINE_S", "DuckRunner", "SqlRunner", "fine_span", "fine_window", "measure_arrivals",
           "measure_timelines", "time_sections", "time_span"]

FINE_S = 0.01                 # the finest window (the cascade's last level)
EVENTS = "hs_events"          # the relation every statement reads: (k, t)
_WIDE = "DECIMAL(38, 0)"      # exact sums of squared counts in both engines


class SqlRunner(Protocol):
    """What an engine offers the statements here."""

    def materialize(self, name: str, query: str) -> None:
        """Make ``name`` a table (or a cached view) holding ``query``'s rows."""

    def rows(self, query: str) -> list[tuple]:
        """``query``'s rows, as tuples of Python numbers."""


def time_span(run: SqlRunner) -> tuple[float, float, int] | None:
    """(first time, last time, requests) of ``hs_events``; None when it holds no request."""
    low, high, n = run.rows(f"SELECT min(t), max(t), count(*) FROM {EVENTS}")[0]
    if not n:
        return None
    return float(low), float(high), int(n)


def _units(width_s: float) -> int:
    """A window's width in fine windows (every width here is a whole number of them)."""
    return int(round(width_s / FINE_S))


def fine_window(time_sql: str) -> str:
    """SQL for the 10 ms window of the epoch a time (seconds) falls in: the grid every
    window here is cut from."""
    return f"CAST(floor({time_sql} / {_q(FINE_S)}) AS BIGINT)"


def fine_span(start: float, end: float) -> tuple[int, int]:
    """(the first request's 10 ms window of the epoch, the span's length in 10 ms windows,
    at least 1): the grid every window and sub-window here is counted on."""
    first = math.floor(start / FINE_S)
    return first, max(math.floor(end / FINE_S) - first, 1)


def time_sections(run: SqlRunner, start: float, end: float, tick: float | None,
                  head_table: str | None = None, n_head: int = 0,
                  fine_table: str | None = None, head_counts: NDArray[np.int64] | None = None
                  ) -> tuple[ArrivalModel | None, Timelines | None]:
    """(arrivals, timelines) of ``hs_events`` over [start, end] (``time_span``), with the
    timestamps' ``tick`` (``time_units.timestamp_tick``): below it neither a dispersion is
    measured nor a cascade level fitted. ``head_table`` (columns ``k``, the key as
    ``hs_events`` holds it, and ``i``, its place in the head) gives the timelines: one scan
    counts every request's 10 ms window, a second the head keys' requests (a join on a
    table of a few hundred keys); the rest works on the counts. ``fine_table``: the 10 ms
    counts already made by an engine's own scan (columns ``w``, ``fine_window`` of the time;
    ``keyed``, whether the row has a key; ``c``), so the first scan is not made again;
    ``head_counts``: the head keys' requests by sub-window (``n_head`` x sub-windows),
    already counted by the engine (``_time_kernels.count_windows``), so the second is not
    either."""
    if not end > start:
        return None, None
    # windows count from the first request's 10 ms window of the epoch grid
    first, n_fine = fine_span(start, end)
    w = f"({fine_window('t')} - {first})"
    if fine_table is None:
        run.materialize("hs_w1", f"SELECT {w} AS w, count(*) AS c FROM {EVENTS} GROUP BY 1")
    else:
        run.materialize("hs_w1", f"SELECT w - {first} AS w, sum(c) AS c FROM {fine_table} "
                                 "WHERE keyed GROUP BY 1")
    arrivals = _arrivals(run, start, end, tick, n_fine)
    if n_head < 1 or (head_table is None and head_counts is None):
        return arrivals, None
    # a sub-window is a run of whole 10 ms windows: sub-window floor(w * bins / n_fine), the
    # span being n_fine windows long (so a span of whole minutes cuts on minutes, as the
    # arrivals' bins do), the last request's clipped into the last (exact: the product
    # stays far below 2^53)
    bins = WINDOWS * DETAIL_BINS

    def sub(fine: str) -> str:
        return f"CAST(floor(CAST({fine} AS DOUBLE) * {bins} / {n_fine}) AS BIGINT)"

    totals = np.zeros(bins, dtype=np.int64)
    for b, c in run.rows(f"SELECT {sub('w')} AS b, sum(c) FROM hs_w1 GROUP BY 1"):
        totals[min(int(b), bins - 1)] += int(c)
    if head_counts is not None:
        fine = np.asarray(head_counts, dtype=np.int64).reshape(n_head, bins)
    else:
        fine = np.zeros((n_head, bins), dtype=np.int64)
        for i, b, c in run.rows(f"SELECT h.i, {sub(w)} AS b, count(*) FROM {EVENTS} AS e "
                                f"JOIN {head_table} AS h ON e.k = h.k GROUP BY 1, 2"):
            fine[int(i), min(int(b), bins - 1)] += int(c)
    return arrivals, timelines_from_fine(start, end - start, fine, totals, WINDOWS)


def _arrivals(run: SqlRunner, start: float, end: float, tick: float | None,
              n_fine: int) -> ArrivalModel:
    """The arrival section from the 10 ms counts in ``hs_w1``, the span ``n_fine`` 10 ms
    windows long (``fine_span``)."""
    span = end - start
    resolution = 60.0 * max(1, math.ceil(span / (60.0 * MAX_BINS)))
    n_bins = max(1, math.ceil((span + 1e-9) / resolution))

    def below_tick(width: float) -> bool:
        return tick is not None and width * (1 + 1e-9) < tick

    levels = cascade_levels(resolution)
    widths = {_units(resolution)}
    widths.update(_units(w) for w in IDC_SCALES if not below_tick(w))
    widths.update(_units(child) for _, child in levels if not below_tick(child))
    # every wider window from the widest built one that divides it
    built = [1]
    for m in sorted(widths - {1}):
        base = max(b for b in built if m % b == 0)
        run.materialize(f"hs_w{m}", f"SELECT CAST(floor(w / {m // base}) AS BIGINT) AS w, "
                                    f"sum(c) AS c FROM hs_w{base} GROUP BY 1")
        built.append(m)
    counts = np.zeros(n_bins, dtype=np.int64)
    for w, c in run.rows(f"SELECT w, sum(c) FROM hs_w{_units(resolution)} GROUP BY 1"):
        counts[min(int(w), n_bins - 1)] += int(c)
    measured = {}
    for width in IDC_SCALES:
        if below_tick(width):
            continue
        m = _units(width)
        n_windows = n_fine // m
        if n_windows < 10:
            continue
        s, q = run.rows(f"SELECT sum(c), sum(CAST(c AS {_WIDE}) * c) FROM hs_w{m} "
                        f"WHERE w < {n_windows}")[0]
        s, q = int(s or 0), int(q or 0)
        if s > 0:
            # Var/Mean of n_windows counts (the empty ones too): (n Q - S^2) / (n S), exactly
            measured[f"{width:g}"] = (n_windows * q - s * s) / (n_windows * s)
    cascade = []
    for parent, child in levels:
        k = int(round(parent / child))
        if below_tick(child):
            cascade.append((parent, child, ALPHA_MAX))  # below the tick: nothing to fit
            continue
        n2, n1, q = run.rows(
            f"SELECT sum(CAST(n AS {_WIDE}) * n), sum(n), sum(q) FROM (SELECT "
            f"CAST(floor(w / {k}) AS BIGINT) AS p, sum(c) AS n, sum(CAST(c AS {_WIDE}) * c) "
            f"AS q FROM hs_w{_units(child)} GROUP BY 1) AS parents WHERE n > 1")[0]
        n2, n1, q = int(n2 or 0), int(n1 or 0), int(q or 0)
        # each parent's spread around its mean, sum_i (c_i - n/k)^2 = q - n^2 / k, summed
        cascade.append((parent, child, alpha_from_sums(n2, n1, q - n2 / k, k)))
    return ArrivalModel(resolution, counts, measured, tuple(cascade), tick)


def _q(value: float) -> str:
    """A double as a SQL literal both engines read as exactly that double: in exponent form
    (a plain ``0.01`` is a DECIMAL to both, converted by each its own way), 17 digits."""
    return format(float(value), ".17e")



class DuckRunner:
    """``SqlRunner`` on a DuckDB connection (the DuckDB engine's, or one over arrays)."""

    def __init__(self, con):
        self.con = con

    def materialize(self, name: str, query: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {query}")

    def rows(self, query: str) -> list[tuple]:
        return self.con.execute(query).fetchall()


def measure_arrivals(times: NDArray[np.float64], tick: float | None = None
                     ) -> ArrivalModel | None:
    """The ``arrivals`` section of request times in seconds (any order; non-finite ones are
    dropped), by the same statements an engine runs on a file; None for fewer than two
    distinct instants: no rate to speak of."""
    import duckdb
    import pyarrow as pa

    t = np.asarray(times, dtype=np.float64)
    t = t[np.isfinite(t)]
    if t.size < 2 or float(t.max()) <= float(t.min()):
        return None
    con = duckdb.connect()
    try:
        con.register("hs_times", pa.table({"t": t}))
        con.execute(f"CREATE TEMP VIEW {EVENTS} AS SELECT 0 AS k, t FROM hs_times")
        return time_sections(DuckRunner(con), float(t.min()), float(t.max()), tick)[0]
    finally:
        con.close()


def measure_timelines(keys: NDArray, times: NDArray[np.float64], head_keys: NDArray
                      ) -> Timelines | None:
    """The ``timelines`` section of a stream of integer ``keys`` at ``times`` (seconds), for
    ``head_keys`` in head order: what an engine finds in a file of these rows, by the same
    statements. None without a span (fewer than two distinct finite times)."""
    import duckdb
    import pyarrow as pa

    t = np.asarray(times, dtype=np.float64)
    finite = np.isfinite(t)
    if finite.sum() < 2 or float(t[finite].max()) <= float(t[finite].min()):
        return None
    con = duckdb.connect()
    try:
        con.register("hs_rows", pa.table({"k": np.asarray(keys, dtype=np.int64)[finite],
                                          "t": t[finite]}))
        con.register("hs_heads", pa.table({"k": np.asarray(head_keys, dtype=np.int64),
                                           "i": np.arange(len(head_keys), dtype=np.int64)}))
        con.execute(f"CREATE TEMP VIEW {EVENTS} AS SELECT k, t FROM hs_rows")
        return time_sections(DuckRunner(con), float(t[finite].min()), float(t[finite].max()),
                             None, "hs_heads", len(head_keys))[1]
    finally:
        con.close()
