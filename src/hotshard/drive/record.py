"""Latency recording in HdrHistograms: mergeable across processes, never a list of samples.

Histograms per run (microseconds, 1 µs to 1 hour, 3 significant digits): latency from the
*intended* send time (what a user waiting on the schedule saw: no coordinated omission),
service time from the actual send, and dispatch lag (actual send minus intended: how far the
driver itself fell behind). Latency and service time are of *successes* only: a refused
connection fails in microseconds, and mixing those instants in would make a dead target look
fast. Failures are counted by kind, with their own histogram of time to failure (a timeout
shows there as the timeout). Per shard (from ``X-Shard``, the node a Redis command went to, or
the partitioner) the requests, the failures by kind and the successes' latency. A value above
the range is recorded at the top of the range and counted in ``overflow``, never dropped.
Interval histograms (one per second, of successes) feed ``--hlog``, the standard HdrHistogram
interval log.

The time axis (the observations' ``windows``): per window of ``window_s`` (1 s) by *intended*
send time (the load the schedule offered then), per shard and for the run, the requests, the
failures and the successes' latency in a compact log histogram (``WINDOW_OCTAVE_BINS`` buckets
an octave: a percentile within 4.5%, in a sparse dict of the buckets used). Mergeable like the
rest, so a run over several processes or Locust workers has one series.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

__all__ = ["HIGHEST_US", "MAX_DISTINCT_SHARDS", "MAX_SHARD_NAME", "OTHER_SHARD", "Recorder",
           "mean_value", "percentiles_ms", "value_at_percentile", "values_at_percentiles"]

LOWEST_US = 1
HIGHEST_US = 3_600_000_000
DIGITS = 3
MAX_TRACKED_KEYS = 1_000_000  # distinct keys are counted up to this (then: at least this)
# A target names shards in X-Shard; one that names a new shard on every answer must not grow
# the driver's memory without bound: past this many distinct names (or a name that is not a
# short printable token) the rest are counted together as OTHER_SHARD
MAX_DISTINCT_SHARDS = 4096
MAX_SHARD_NAME = 64
OTHER_SHARD = "(other)"
_SHARD_NAME = re.compile(r"^[\x21-\x7e]{1,64}$")
WINDOW_OCTAVE_BINS = 8
INTERVAL_S = 1.0  # interval histograms and time-axis windows: one a second
RUN = ""  # the run's own row in a window's tallies (shard ids are never empty)
PERCENTILES = {"min": None, "p50": 50.0, "p75": 75.0, "p90": 90.0, "p95": 95.0, "p99": 99.0,
               "p999": 99.9, "p9999": 99.99, "max": None}


def _histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)


def percentiles_ms(hist: HdrHistogram) -> dict[str, float] | None:
    """Observations-style latency summary in ms (None when nothing was recorded)."""
    if hist.get_total_count() == 0:
        return None
    out = {}
    quantiles = {name: q for name, q in PERCENTILES.items() if q is not None}
    at = dict(zip(quantiles, values_at_percentiles(hist, list(quantiles.values())),
                  strict=True))
    for name in PERCENTILES:
        if name == "min":
            value = hist.get_min_value()
        elif name == "max":
            value = hist.get_max_value()
        else:
            value = at[name]
        out[name] = round(value / 1000.0, 3)
    out["mean"] = round(min(max(mean_value(hist) / 1000.0, out["min"]), out["max"]), 3)
    return out


def _counts(hist: HdrHistogram) -> np.ndarray:
    """The histogram's bucket counts, as numpy sees its ctypes array (no copy)."""
    used = min(hist.counts_len, hist.encoder.payload.counts_len)
    return np.ctypeslib.as_array(hist.counts)[:used]


def values_at_percentiles(hist: HdrHistogram, percentiles: list[float]) -> list[int]:
    """``[hist.get_value_at_percentile(q) for q in percentiles]`` to the bit, from one
    cumulative sum of the counts.

    The library's own walks the bucket indices from zero up to each percentile's, in Python:
    ~2.5 ms a percentile near the top of a histogram of seconds, for every shard of every
    drive's summary.
    """
    cumulative = np.cumsum(_counts(hist), dtype=np.int64)
    out = []
    for q in percentiles:
        index = int(np.searchsorted(cumulative, hist.get_target_count_at_percentile(q)))
        if index >= cumulative.size:  # never reached: the library's loop ends with 0
            out.append(0)
            continue
        value = hist.get_value_from_index(index)
        out.append(hist.get_highest_equivalent_value(value) if q
                   else hist.get_lowest_equivalent_value(value))
    return out


def value_at_percentile(hist: HdrHistogram, percentile: float) -> int:
    """``hist.get_value_at_percentile(percentile)`` to the bit (see ``values_at_percentiles``)."""
    return values_at_percentiles(hist, [percentile])[0]


def mean_value(hist: HdrHistogram) -> float:
    """``hist.get_mean_value()`` to the bit: each bucket holding counts at the middle of its
    range, summed exactly.

    The library's own walks every bucket index of the histogram, in Python: ~50-70 ms a
    histogram, a second of CPU at the end of every drive for its dozen histograms.
    """
    if not hist.total_count:
        return 0.0
    counts = _counts(hist)
    index = np.flatnonzero(counts)
    # the library takes the middle of each bucket's range (the median equivalent of its
    # highest value, a value of the same range); a bucket's value is its range's lowest
    lowest, size = _lowest_and_range(hist, _values_of(hist, index))
    middles = lowest + (size >> 1)
    # Python integers, as the library sums: counts x values can pass 2^63
    total = sum(map(int.__mul__, counts[index].tolist(), middles.tolist()))
    return float(total) / hist.total_count


# The library's bucket arithmetic (get_value_from_index, and the lowest value and size of a
# value's equivalent range), on arrays: values below 2^53, so every step is exact in int64 and
# a bit length is frexp's exponent.

def _values_of(hist: HdrHistogram, index: np.ndarray) -> np.ndarray:
    bucket = (index >> hist.sub_bucket_half_count_magnitude) - 1
    sub = (index & (hist.sub_bucket_half_count - 1)) + hist.sub_bucket_half_count
    first = bucket < 0
    sub = np.where(first, sub - hist.sub_bucket_half_count, sub)
    bucket = np.where(first, 0, bucket)
    return sub << (bucket + hist.unit_magnitude)


def _lowest_and_range(hist: HdrHistogram, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lowest equivalent value, size of the equivalent range) of each value."""
    bit_length = np.frexp((values | hist.sub_bucket_mask).astype(np.float64))[1]
    bucket = bit_length - hist.unit_magnitude - (hist.sub_bucket_half_count_magnitude + 1)
    sub = values >> (bucket + hist.unit_magnitude)
    lowest = sub << (bucket + hist.unit_magnitude)
    bucket = bucket + (sub >= hist.sub_bucket_count)
    return lowest, np.left_shift(1, hist.unit_magnitude + bucket, dtype=np.int64)


@dataclass
class ShardTally:
    requests: int = 0                  # sent to this shard, failed or not
    errors: int = 0
    latency: HdrHistogram = field(default_factory=_histogram)  # successes only
    error_kinds: Counter[str] = field(default_factory=Counter)


class Recorder:
    """What one driver process measured; ``encode``/``merge`` combine processes exactly."""

    def __init__(self, *, interval_s: float = INTERVAL_S) -> None:
        self.latency = _histogram()
        self.service = _histogram()
        self.lag = _histogram()
        self.error_latency = _histogram()  # intended time to failure
        self.shards: dict[str, ShardTally] = {}
        self.errors: Counter[str] = Counter()
        self.ok = 0
        self.dropped = 0          # arrivals not sent: --max-inflight was reached
        self.unattributed = 0     # failures whose shard nobody named (no X-Shard, no -p)
        self.overflow = 0         # values above HIGHEST_US, recorded at the top
        self.reads = 0
        self.writes = 0
        self.payload_bytes = 0
        self.keys: set[str] = set()
        self.last_sent = 0.0      # latest actual send, seconds from start
        self.stopped_at: float | None = None  # when an interrupted run stopped sending
        self.interval_s = interval_s
        self._interval = _histogram()
        self._interval_index = 0
        self.intervals: list[tuple[int, str]] = []  # (index, encoded) of finished intervals
        self.window_s = interval_s
        # window index -> shard (RUN for all) -> [requests, failures, {log bucket: successes}]
        self.windows: dict[int, dict[str, list]] = {}

    def _window(self, intended: float, shard: str | None, error: bool,
                latency_s: float) -> None:
        rows = self.windows.setdefault(int(max(intended, 0.0) // self.window_s), {})
        bucket = int(math.log2(max(latency_s * 1e6, 1.0)) * WINDOW_OCTAVE_BINS)
        for name in (RUN, shard) if shard is not None else (RUN,):
            row = rows.get(name)
            if row is None:
                row = rows[name] = [0, 0, {}]
            row[0] += 1
            if error:
                row[1] += 1
            else:
                row[2][bucket] = row[2].get(bucket, 0) + 1

    def _value(self, hist: HdrHistogram, seconds: float) -> None:
        us = max(LOWEST_US, int(seconds * 1e6))
        if us > HIGHEST_US:
            self.overflow += 1
            us = HIGHEST_US
        hist.record_value(us)

    def record(self, *, intended: float, sent: float, done: float, shard: str | None,
               error: str | None, is_read: bool, key: str, payload: int = 0) -> None:
        """One request. Times are seconds on the driver's monotonic clock (from run start)."""
        if shard is not None and shard not in self.shards and (
                not _SHARD_NAME.match(shard) or len(self.shards) >= MAX_DISTINCT_SHARDS):
            shard = OTHER_SHARD   # bounded: a hostile target's names go to one row
        self.rotate(done)
        self.last_sent = max(self.last_sent, sent)
        if error:
            self._value(self.error_latency, done - intended)
        else:
            self._value(self.latency, done - intended)
            self._value(self._interval, done - intended)
            self._value(self.service, done - sent)
        self._value(self.lag, max(0.0, sent - intended))
        self._window(intended, shard, bool(error), done - intended)
        if is_read:
            self.reads += 1
        else:
            self.writes += 1
            self.payload_bytes += payload
        if len(self.keys) < MAX_TRACKED_KEYS:
            self.keys.add(key)
        if shard is not None:
            tally = self.shards.get(shard)
            if tally is None:
                tally = self.shards[shard] = ShardTally()
            tally.requests += 1
            if error:
                tally.errors += 1
                tally.error_kinds[error] += 1
            else:
                self._value(tally.latency, done - intended)
        if error:
            self.errors[error] += 1
            if shard is None:
                self.unattributed += 1
        else:
            self.ok += 1

    def drop(self, intended: float) -> None:
        """An arrival that was not sent because too many were in flight (counted, as k6)."""
        self.rotate(intended)
        self.dropped += 1

    def rotate(self, now: float) -> None:
        """Close the interval histograms that ended before ``now``."""
        index = int(now // self.interval_s)
        if index > self._interval_index:
            if self._interval.get_total_count():
                self.intervals.append((self._interval_index, self._encoded(self._interval)))
            self._interval = _histogram()
            self._interval_index = index

    @staticmethod
    def _encoded(hist: HdrHistogram) -> str:
        raw = hist.encode()
        return raw.decode() if isinstance(raw, bytes) else raw

    def finish(self) -> None:
        if self._interval.get_total_count():
            self.intervals.append((self._interval_index, self._encoded(self._interval)))
            self._interval = _histogram()

    @property
    def completed(self) -> int:
        """Requests that came back, as a success or a failure."""
        return self.ok + self.failed

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    # -- across processes ----------------------------------------------------------------------
    def encode(self) -> dict[str, Any]:
        """A picklable, JSON-able snapshot (histograms in HdrHistogram's compressed form)."""
        self.finish()
        return {"latency": self._encoded(self.latency), "service": self._encoded(self.service),
                "lag": self._encoded(self.lag),
                "error_latency": self._encoded(self.error_latency),
                "shards": {s: [t.requests, t.errors, self._encoded(t.latency),
                               dict(t.error_kinds)]
                           for s, t in self.shards.items()},
                "errors": dict(self.errors), "ok": self.ok, "dropped": self.dropped,
                "unattributed": self.unattributed,
                "overflow": self.overflow, "reads": self.reads, "writes": self.writes,
                "payload_bytes": self.payload_bytes, "keys": sorted(self.keys),
                "last_sent": self.last_sent, "stopped_at": self.stopped_at,
                "intervals": self.intervals, "interval_s": self.interval_s,
                "window_s": self.window_s,
                "windows": {str(w): {s: [r[0], r[1], {str(b): c for b, c in r[2].items()}]
                                     for s, r in rows.items()}
                            for w, rows in self.windows.items()}}

    def merge(self, encoded: dict[str, Any]) -> None:
        """Add another process's ``encode()`` into this recorder."""
        for name in ("latency", "service", "lag", "error_latency"):
            getattr(self, name).decode_and_add(encoded[name])
        for shard, (requests, errors, hist, kinds) in encoded["shards"].items():
            tally = self.shards.setdefault(shard, ShardTally())
            tally.requests += requests
            tally.errors += errors
            tally.latency.decode_and_add(hist)
            tally.error_kinds.update(kinds)
        self.errors.update(encoded["errors"])
        for name in ("ok", "dropped", "overflow", "reads", "writes", "payload_bytes",
                     "unattributed"):
            setattr(self, name, getattr(self, name) + encoded.get(name, 0))
        self.keys.update(encoded["keys"])
        self.last_sent = max(self.last_sent, encoded["last_sent"])
        stops = [t for t in (self.stopped_at, encoded.get("stopped_at")) if t is not None]
        self.stopped_at = max(stops) if stops else None
        self.intervals.extend((int(i), h) for i, h in encoded["intervals"])
        for w, rows in encoded.get("windows", {}).items():
            mine = self.windows.setdefault(int(w), {})
            for shard, (requests, errors, buckets) in rows.items():
                row = mine.setdefault(shard, [0, 0, {}])
                row[0] += requests
                row[1] += errors
                for b, c in buckets.items():
                    row[2][int(b)] = row[2].get(int(b), 0) + c

    def merged_intervals(self) -> list[tuple[int, HdrHistogram]]:
        """One histogram per interval index, every process's added together, in order."""
        by_index: dict[int, HdrHistogram] = {}
        for index, encoded in self.intervals:
            by_index.setdefault(index, _histogram()).decode_and_add(encoded)
        return sorted(by_index.items())

    def write_hlog(self, path: str, start_epoch: float) -> None:
        """The HdrHistogram interval log (latency from intended time, in ms units)."""
        import datetime

        from hdrh.log import HistogramLogWriter

        from hotshard._atomic import atomic_write

        with atomic_write(path) as f:
            writer = HistogramLogWriter(f)
            writer.output_comment("hotshard drive: latency from intended send time, us")
            writer.output_log_format_version()
            # written here: hdrh's output_start_time mistakes ms for s and calls a missing method
            when = datetime.datetime.fromtimestamp(start_epoch, datetime.UTC).isoformat(" ")
            f.write(f"#[StartTime: {start_epoch:.3f} (seconds since epoch), {when}]\n")
            f.write(f"#[BaseTime: {start_epoch:.3f} (seconds since epoch)]\n")
            writer.output_legend()
            for index, hist in self.merged_intervals():
                start = index * self.interval_s
                writer.output_interval_histogram(hist, start, start + self.interval_s)
