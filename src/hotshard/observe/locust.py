"""A Locust run's ``--csv PREFIX`` files as observations: the load test's side.

Locust (2.x, ``locust/stats.py``: ``StatsCSV``) writes ``PREFIX_stats.csv``: one row per
request name and an ``Aggregated`` row, columns ``Type, Name, Request Count, Failure Count,
Median Response Time, Average Response Time, Min Response Time, Max Response Time, Average
Content Size, Requests/s, Failures/s`` then one column per reported percentile (``50%``,
``66%``, ``75%``, ``80%``, ``90%``, ``95%``, ``98%``, ``99%``, ``99.9%``, ``99.99%``,
``100%``), in milliseconds; and ``PREFIX_stats_history.csv``: every few seconds the
``Timestamp`` (Unix seconds), ``User Count``, the current ``Requests/s`` and the totals so
far. Read from them: the rate (``Requests/s`` of the Aggregated row: requests over the time
from the first to the last request), latency percentiles, failures, the run's length and the
user pool (from the history, when it is there).

The load model is closed: a Locust user waits for each response before its next request
(whatever its ``wait_time``), so a stall holds requests back. hotshard's open-loop plug-in
(``hotshard.drive.locust``) writes its own observations instead.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from hotshard.errors import InputError
from hotshard.observations import Observations
from hotshard.observe._common import Notes, build, finite

__all__ = ["REQUIRED", "read_locust_csv"]

REQUIRED = ("Type", "Name", "Request Count", "Failure Count", "Average Response Time",
            "Min Response Time", "Max Response Time", "Requests/s")
_PERCENTILES = {"50%": "p50", "75%": "p75", "90%": "p90", "95%": "p95", "99%": "p99",
                "99.9%": "p999", "99.99%": "p9999", "100%": "max"}


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            return list(reader.fieldnames or []), list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None


def _history_span(path: Path) -> tuple[float | None, float | None, float | None, int] | None:
    """(first and last timestamp, most users, aggregated rows) of a stats history, read row
    by row (a day's history is tens of megabytes: never held whole); None when it is not one.
    """
    first = last = users_max = None
    rows = 0
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            names = reader.fieldnames or []
            if "Timestamp" not in names or "User Count" not in names:
                return None
            for row in reader:
                if row.get("Name") != "Aggregated":
                    continue
                stamp, users = finite(row.get("Timestamp")), finite(row.get("User Count"))
                if stamp is not None:
                    rows += 1
                    first = stamp if first is None else min(first, stamp)
                    last = stamp if last is None else max(last, stamp)
                if users is not None:
                    users_max = users if users_max is None else max(users_max, users)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    return first, last, users_max, rows


def _stats_path(prefix: str | os.PathLike[str]) -> Path:
    p = Path(prefix)
    for candidate in (p, Path(f"{prefix}_stats.csv")):
        if candidate.is_file():
            if candidate.name.endswith("_stats_history.csv"):
                return Path(str(candidate).removesuffix("_stats_history.csv") + "_stats.csv")
            return candidate
    raise InputError(f"no Locust stats at {prefix}: expected {prefix}_stats.csv (what "
                     f"`locust --csv {prefix}` writes)")


def read_locust_csv(prefix: str | os.PathLike[str], *, label: str = "load test"
                    ) -> Observations:
    """Rate, latency percentiles, failures and the user pool of a Locust run.

    Parameters
    ----------
    prefix : path
        What was given to ``locust --csv``: ``PREFIX_stats.csv`` is read, and
        ``PREFIX_stats_history.csv`` when it exists. The stats file's own path works too.

    Raises
    ------
    InputError
        No stats file, a file of another tool or Locust version (a required column missing,
        named), no Aggregated row, no requests.
    """
    stats = _stats_path(prefix)
    base = str(stats).removesuffix("_stats.csv")
    header, rows = _rows(stats)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"{stats}: not Locust's --csv stats (Locust 2's layout): no column "
                         f"{missing[0]!r}" + (f" (and {len(missing) - 1} more)"
                                              if len(missing) > 1 else ""))
    total = next((r for r in rows if r.get("Name") == "Aggregated"), None)
    if total is None:
        raise InputError(f"{stats}: no 'Aggregated' row: not a complete Locust stats file")
    count = finite(total.get("Request Count"))
    if not count:
        raise InputError(f"{stats}: the run made no requests (Aggregated Request Count is "
                         f"{total.get('Request Count')!r})")
    notes = Notes()
    failures = int(finite(total.get("Failure Count")) or 0)
    fields: dict[str, Any] = {"model": "closed",
                              "errors": {"share": failures / count, "attempted": int(count),
                                         "failed": failures}}
    rate = finite(total.get("Requests/s"))
    if rate:
        fields["rate_rps"] = fields["achieved_rps"] = round(rate, 3)
        notes.add("rate_rps is the rate Locust achieved (requests over the time from the "
                  "first to the last request): a closed loop has no target rate")
    latency: dict[str, float] = {}
    for column, name in _PERCENTILES.items():
        value = finite(total.get(column))
        if value is not None:
            latency[name] = value
    # the exact extremes, where the rounded percentiles leave room for them
    quantiles = [v for k, v in latency.items() if k != "max"]
    low, high = finite(total.get("Min Response Time")), finite(total.get("Max Response Time"))
    if low is not None and all(low <= v for v in quantiles):
        latency["min"] = low
    if high is not None and all(high >= v for v in quantiles):
        latency["max"] = high
    mean = finite(total.get("Average Response Time"))
    if mean is not None and latency.get("min", mean) <= mean <= latency.get("max", mean):
        latency["mean"] = mean
    if latency:
        notes.add("Locust's percentiles are of every request, failures included, rounded "
                  "to two significant digits (its response-time buckets)")
    locust: dict[str, Any] = {"stats": str(stats),
                              "names": sum(1 for r in rows if r.get("Name") != "Aggregated")}
    history = Path(base + "_stats_history.csv")
    if history.is_file():
        span = _history_span(history)
        if span is None:
            notes.add(f"{history}: not Locust's stats history (no Timestamp/User Count); "
                      "not read")
        else:
            first, last, users_max, rows_read = span
            if rows_read >= 2 and last is not None and first is not None:
                fields["duration_s"] = float(last - first)
                notes.add("duration_s is the stats history's first to last row (whole "
                          "seconds)")
            if users_max is not None:
                locust["users_max"] = int(users_max)
    else:
        notes.add(f"no {history.name}: run length and user count unknown")
    if "duration_s" not in fields and rate:
        fields["duration_s"] = round(count / rate, 3)
        notes.add("duration_s is requests / rate")
    notes.missing("shards", "Locust's stats are per request name, not per shard")
    source = {"source": "locust", "prefix": base, "locust": locust}
    return build(label, source=source, notes=notes, latency=latency, fields=fields)
