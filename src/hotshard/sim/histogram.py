"""A mergeable latency histogram: log-linear buckets of 1/256 of a power of two, in numpy.

A day-long simulation cannot keep every request's latency (2.6e8 at production's rate), so
each window's latencies are counted into buckets and percentiles are read from the counts,
as HdrHistogram does. The layout is HdrHistogram's log-linear one (each power of two cut
into equal sub-buckets) with 256 sub-buckets an octave: a bucket spans at most 2^-8 = 0.39%
of its lower edge, and a percentile is reported at its bucket's midpoint, so it lies within
0.2% (relative) of the exact order statistic (the max and mean are kept exactly). The
``hdrhistogram`` package (the driver's, an optional extra) records one value per Python call;
here a window of a million values is bucketed in a few vectorized passes (``np.frexp`` gives
exponent and mantissa at once) and one ``np.bincount``. Histograms of shards, windows or
runs add up exactly (``merge``): same counts whatever the order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["BUCKETS", "RELATIVE_ERROR", "LatencyHistogram", "bucket_of"]

SUB = 256                 # sub-buckets per power of two
MIN_EXP = -20             # values below 2^(MIN_EXP - 1) ms (~0.5 ns) count as 0
MAX_EXP = 40              # values from 2^(MAX_EXP - 1) ms (~17 years) share the top bucket
BUCKETS = 1 + (MAX_EXP - MIN_EXP) * SUB
RELATIVE_ERROR = 1.0 / (2 * SUB)   # a reported percentile's largest error, relative (0.2%)


def bucket_of(values: ArrayLike) -> NDArray[np.int64]:
    """The bucket of each value (ms, >= 0): 0 for (near) zero, else 1 + octave x SUB + the
    mantissa's sub-bucket."""
    v = np.asarray(values, dtype=np.float64)
    mantissa, exponent = np.frexp(v)              # v = mantissa * 2^exponent, mantissa in [0.5, 1)
    index = (exponent.astype(np.int64) - MIN_EXP) * SUB
    index += ((mantissa - 0.5) * (2 * SUB)).astype(np.int64)
    index += 1
    np.clip(index, 0, BUCKETS - 1, out=index)
    index[~(v >= 2.0 ** (MIN_EXP - 1))] = 0       # zero (and NaN, which no run records)
    return index


def _midpoints() -> NDArray[np.float64]:
    """The value each bucket reports: 0 for the zero bucket, else the bucket's midpoint."""
    k = np.arange(BUCKETS - 1)
    octave, sub = np.divmod(k, SUB)
    low = np.ldexp(0.5 + sub / (2 * SUB), octave + MIN_EXP)
    return np.concatenate([[0.0], low * (1 + 1 / (2 * SUB + 2 * sub))])


_MID = _midpoints()


@dataclass(frozen=True, eq=False)
class LatencyHistogram:
    """Counts of latencies (ms) per bucket, with their exact count, sum, min and max.

    Mutable only through ``record`` and ``merge`` while a run builds it; a finished
    ``SimResult`` hands out its histograms read-only.
    """

    counts: NDArray[np.int64]
    total: list  # [count, sum, min, max]: exact, beside the buckets

    @classmethod
    def empty(cls) -> LatencyHistogram:
        return cls(np.zeros(BUCKETS, dtype=np.int64), [0, 0.0, np.inf, -np.inf])

    @classmethod
    def of(cls, values: ArrayLike) -> LatencyHistogram:
        """A histogram of ``values`` (ms)."""
        h = cls.empty()
        h.record(values)
        return h

    def record(self, values: ArrayLike, buckets: NDArray[np.int64] | None = None) -> None:
        """Count ``values`` (ms, >= 0) in; ``buckets``: their ``bucket_of``, when the caller
        has it already."""
        v = np.asarray(values, dtype=np.float64)
        if v.size == 0:
            return
        if buckets is None:
            buckets = bucket_of(v)
        np.add(self.counts, np.bincount(buckets, minlength=BUCKETS), out=self.counts)
        t = self.total
        t[0] += int(v.size)
        t[1] += float(v.sum())
        t[2] = min(t[2], float(v.min()))
        t[3] = max(t[3], float(v.max()))

    def merge(self, other: LatencyHistogram) -> None:
        """Add ``other``'s counts in (exact: histograms of parts add up to the whole's)."""
        np.add(self.counts, other.counts, out=self.counts)
        t, o = self.total, other.total
        t[0] += o[0]
        t[1] += o[1]
        t[2] = min(t[2], o[2])
        t[3] = max(t[3], o[3])

    def frozen(self) -> LatencyHistogram:
        """A read-only copy."""
        counts = self.counts.copy()
        counts.setflags(write=False)
        return LatencyHistogram(counts, list(self.total))

    @property
    def count(self) -> int:
        return int(self.total[0])

    @property
    def mean(self) -> float:
        return self.total[1] / self.total[0] if self.total[0] else float("nan")

    @property
    def min(self) -> float:
        return float(self.total[2]) if self.total[0] else float("nan")

    @property
    def max(self) -> float:
        return float(self.total[3]) if self.total[0] else float("nan")

    def percentile(self, q: ArrayLike) -> NDArray[np.float64] | float:
        """Percentile(s) ``q`` (0-100) as ``np.percentile`` (linear) would give them on the
        recorded values, each order statistic read as its bucket's midpoint (within
        ``RELATIVE_ERROR``) and clamped to the exact min and max."""
        qs = np.asarray(q, dtype=np.float64)
        n = self.count
        if n == 0:
            return np.full(qs.shape, np.nan) if qs.ndim else float("nan")
        rank = qs / 100.0 * (n - 1)
        lo = np.floor(rank)
        cum = np.cumsum(self.counts)
        below = _MID[np.searchsorted(cum, lo, side="right")]
        above = _MID[np.searchsorted(cum, np.minimum(lo + 1, n - 1), side="right")]
        value = below + (rank - lo) * (above - below)
        value = np.clip(value, self.min, self.max)
        return value if qs.ndim else float(value)

    def __eq__(self, other) -> bool:
        if not isinstance(other, LatencyHistogram):
            return NotImplemented
        return bool(np.array_equal(self.counts, other.counts)) and self.total == other.total

    __hash__ = None  # type: ignore[assignment]
