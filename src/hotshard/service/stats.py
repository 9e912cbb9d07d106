"""What the gateway's /stats reports: latency percentiles and each shard worker's CPU.

Latencies go into fixed log-spaced buckets rather than a list, so memory is constant however
many requests a run serves, and histograms from several slices (or processes) merge by adding
counts. CPU comes from ``/proc/<pid>/stat``: each shard is its own process, so its CPU share is
what the kernel charged that process, the number an operator's dashboard would show.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hotshard.errors import InputError

__all__ = ["BUCKET_WIDTH", "MAX_SECONDS", "MIN_SECONDS", "PROMETHEUS_BOUNDS", "BucketHistogram",
           "CpuMeter", "LatencyHistogram", "WindowedLatency", "process_cpu_seconds"]

MIN_SECONDS = 1e-6
MAX_SECONDS = 100.0
BUCKET_WIDTH = 0.02  # relative: each bucket's upper edge is 1.02 times its lower edge
_LOG_STEP = math.log1p(BUCKET_WIDTH)
_N_BUCKETS = math.ceil(math.log(MAX_SECONDS / MIN_SECONDS) / _LOG_STEP)
# _EDGES[i] is bucket i's lower edge, _EDGES[i + 1] its upper edge; _EDGES[-1] >= MAX_SECONDS.
_EDGES = tuple(MIN_SECONDS * (1.0 + BUCKET_WIDTH) ** i for i in range(_N_BUCKETS + 1))


def _check_seconds(seconds: float) -> float:
    """``seconds`` as a float, refused unless finite and >= 0."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise InputError(f"seconds must be a number, got {seconds!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise InputError(f"seconds must be a finite latency >= 0, got {seconds}")
    return float(seconds)


def _bucket_of(seconds: float) -> int:
    """Index ``i`` with ``_EDGES[i] <= seconds < _EDGES[i + 1]`` (0 for anything below 1 µs)."""
    if seconds < _EDGES[1]:
        return 0
    i = min(int(math.log(seconds / MIN_SECONDS) / _LOG_STEP), _N_BUCKETS - 1)
    # The logarithm can land one bucket off at an edge; the edges themselves decide.
    while i > 0 and seconds < _EDGES[i]:
        i -= 1
    while i < _N_BUCKETS - 1 and seconds >= _EDGES[i + 1]:
        i += 1
    return i


class LatencyHistogram:
    """A mergeable histogram of latencies in seconds, in log-spaced buckets 2% wide.

    Buckets span 1 µs to 100 s with upper edge = 1.02 x lower edge (931 buckets). A latency
    below 1 µs is counted in the first bucket; one of 100 s or more is counted in an overflow
    bucket, reported in ``to_dict`` and by ``percentile``, never dropped.

    Notes
    -----
    ``percentile(q)`` uses the nearest-rank definition (numpy's ``method="inverted_cdf"``): the
    smallest recorded latency ``v`` with at least ``q`` percent of the latencies <= ``v``. It
    returns the upper edge of ``v``'s bucket, capped at the largest latency recorded, so the
    answer ``p`` satisfies ``v <= p <= 1.02 v``: never an underestimate, and at most 2% above.
    Below 1 µs the bound is absolute instead (``p <= 1.02 µs``). A percentile that falls in the
    overflow bucket is reported as the largest latency recorded, exactly.

    Every histogram has the same buckets, so ``merge`` is an exact sum: merging histograms
    gives the same answers as recording every latency into one.
    """

    def __init__(self) -> None:
        self._counts = [0] * _N_BUCKETS
        self._overflow = 0
        self._count = 0
        self._max = 0.0

    @property
    def count(self) -> int:
        """Latencies recorded, overflow included."""
        return self._count

    @property
    def overflow(self) -> int:
        """Latencies of ``MAX_SECONDS`` or more."""
        return self._overflow

    @property
    def max_s(self) -> float | None:
        """The largest latency recorded, exactly; None when empty."""
        return self._max if self._count else None

    def record(self, seconds: float) -> None:
        """Count one latency.

        Raises
        ------
        InputError
            If ``seconds`` is negative, NaN or infinite.
        """
        seconds = _check_seconds(seconds)
        self._add(seconds)

    def percentile(self, q: float) -> float | None:
        """The ``q``-th percentile in seconds, within 2% above the exact value (see Notes).

        Parameters
        ----------
        q : float
            Percent, 0 to 100 inclusive (0 is the minimum, 100 the maximum).

        Returns
        -------
        float or None
            None when nothing has been recorded.

        Raises
        ------
        InputError
            If ``q`` is outside [0, 100].
        """
        if isinstance(q, bool) or not isinstance(q, int | float) or not 0 <= q <= 100:
            raise InputError(f"q must be a percent in [0, 100], got {q!r}")
        if not self._count:
            return None
        # Same arithmetic as numpy's inverted_cdf, so ties at a rank boundary agree with it.
        rank = min(max(math.ceil(self._count * (q / 100.0)), 1), self._count)
        seen = 0
        for i, n in enumerate(self._counts):
            seen += n
            if seen >= rank:
                return min(_EDGES[i + 1], self._max)
        return self._max  # in the overflow bucket: the exact maximum bounds it

    def merge(self, other: LatencyHistogram) -> None:
        """Add ``other``'s counts into this histogram (``other`` is unchanged).

        Raises
        ------
        InputError
            If ``other`` is not a ``LatencyHistogram``.
        """
        if not isinstance(other, LatencyHistogram):
            raise InputError(f"other must be a LatencyHistogram, got {type(other).__name__}")
        if not other._count:
            return
        self._counts = [a + b for a, b in zip(self._counts, other._counts, strict=True)]
        self._overflow += other._overflow
        self._count += other._count
        self._max = max(self._max, other._max)

    def reset(self) -> None:
        """Forget everything recorded."""
        self._counts = [0] * _N_BUCKETS
        self._overflow = 0
        self._count = 0
        self._max = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Count, p50/p99/max in milliseconds (None when empty) and the overflow count."""
        def ms(seconds: float | None) -> float | None:
            return None if seconds is None else seconds * 1e3

        return {"count": self._count, "p50_ms": ms(self.percentile(50)),
                "p99_ms": ms(self.percentile(99)), "max_ms": ms(self.max_s),
                "overflow": self._overflow}

    def _add(self, seconds: float) -> None:
        """Count one latency already checked."""
        if seconds >= MAX_SECONDS:
            self._overflow += 1
        else:
            self._counts[_bucket_of(seconds)] += 1
        self._count += 1
        if seconds > self._max:
            self._max = seconds


# Upper bounds (seconds) of /metrics' latency histogram: 1, 1.5, 2, 3, 5 and 7 times each power
# of ten from 100 µs to 70 s, so neighbouring bounds are at most 1.67x apart and
# ``histogram_quantile``'s linear interpolation inside a bucket errs by less than that bucket.
PROMETHEUS_BOUNDS = tuple(round(m * 10.0 ** e, 6) for e in range(-4, 2)
                          for m in (1, 1.5, 2, 3, 5, 7))


class BucketHistogram:
    """Cumulative latency counts at fixed upper bounds, since the service started: what a
    Prometheus histogram exposes (``_bucket{le}``, ``_sum``, ``_count``), so
    ``histogram_quantile`` over any window works on it as on any production service.

    Unlike ``WindowedLatency`` it never forgets: Prometheus takes the window's difference.
    """

    def __init__(self, bounds: tuple[float, ...] = PROMETHEUS_BOUNDS) -> None:
        if not bounds or any(b <= a for a, b in zip(bounds, bounds[1:], strict=False)):
            raise InputError(f"bounds must increase, got {bounds!r}")
        self.bounds = tuple(float(b) for b in bounds)
        self._counts = [0] * (len(self.bounds) + 1)  # the last one: above every bound (+Inf)
        self._sum = 0.0

    def record(self, seconds: float) -> None:
        """Count one latency (seconds, finite and >= 0)."""
        import bisect

        seconds = _check_seconds(seconds)
        self._counts[bisect.bisect_left(self.bounds, seconds)] += 1  # le: seconds <= bound
        self._sum += seconds

    def cumulative(self) -> tuple[list[tuple[float, int]], int, float]:
        """([(upper bound, latencies <= it)...], count, sum of seconds); the count is the
        +Inf bucket's."""
        out, seen = [], 0
        for bound, n in zip(self.bounds, self._counts, strict=False):
            seen += n
            out.append((bound, seen))
        return out, seen + self._counts[-1], self._sum


class WindowedLatency:
    """Latencies of the last ``window_s`` seconds, as a ring of ``slices`` histograms.

    Parameters
    ----------
    window_s : float
        Length of the window /stats reports over (> 0).
    slices : int
        How finely the window slides (>= 1): the oldest slice, ``window_s / slices`` seconds
        long, drops out whole, so a snapshot covers between ``window_s - window_s / slices``
        and ``window_s`` seconds of history. More slices, smoother sliding, more memory.
    clock : callable
        Monotonic seconds; injected so tests move time instead of sleeping.

    Raises
    ------
    InputError
        If ``window_s`` is not > 0 or ``slices`` is not an integer >= 1.
    """

    def __init__(self, window_s: float = 10.0, slices: int = 10,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(window_s, bool) or not isinstance(window_s, int | float) \
                or not math.isfinite(window_s) or window_s <= 0:
            raise InputError(f"window_s must be > 0 seconds, got {window_s!r}")
        if isinstance(slices, bool) or not isinstance(slices, int) or slices < 1:
            raise InputError(f"slices must be an integer >= 1, got {slices!r}")
        self._window_s = float(window_s)
        self._slice_s = self._window_s / slices
        self._clock = clock
        self._slices = [LatencyHistogram() for _ in range(slices)]
        self._epochs: list[int | None] = [None] * slices  # which slice of time each one holds

    @property
    def window_s(self) -> float:
        """Length of the window, in seconds."""
        return self._window_s

    def record(self, seconds: float) -> None:
        """Count one latency in the slice of now.

        Raises
        ------
        InputError
            If ``seconds`` is negative, NaN or infinite.
        """
        seconds = _check_seconds(seconds)
        epoch = math.floor(self._clock() / self._slice_s)
        slot = epoch % len(self._slices)
        if self._epochs[slot] != epoch:  # this slot still holds a slice that left the window
            self._slices[slot].reset()
            self._epochs[slot] = epoch
        self._slices[slot]._add(seconds)

    def snapshot(self) -> LatencyHistogram:
        """A new histogram of the latencies recorded in the window ending now."""
        now = math.floor(self._clock() / self._slice_s)
        oldest = now - len(self._slices)
        merged = LatencyHistogram()
        for epoch, histogram in zip(self._epochs, self._slices, strict=True):
            if epoch is not None and oldest < epoch <= now:
                merged.merge(histogram)
        return merged


def process_cpu_seconds(pid: int, *, proc: str | os.PathLike[str] = "/proc") -> float | None:
    """User + system CPU seconds the kernel has charged process ``pid``.

    Parameters
    ----------
    pid : int
        The process (>= 1).
    proc : path
        Where procfs is mounted; tests point it at a directory of fake ``<pid>/stat`` files.

    Returns
    -------
    float or None
        None if the process is gone, or there is no procfs (not Linux).

    Raises
    ------
    InputError
        If ``pid`` is not an integer >= 1.

    Notes
    -----
    Fields 14 (utime) and 15 (stime) of ``/proc/<pid>/stat``, in clock ticks, divided by
    ``sysconf(SC_CLK_TCK)`` (proc(5)). The fields are counted after the last ``)``, because
    field 2, the command name in parentheses, may itself contain spaces and parentheses.
    Children's CPU (fields 16, 17) is not included: a shard worker's CPU is its own.
    """
    if isinstance(pid, bool) or not isinstance(pid, int) or pid < 1:
        raise InputError(f"pid must be an integer >= 1, got {pid!r}")
    try:
        text = (Path(proc) / str(pid) / "stat").read_text()
        ticks_per_s = os.sysconf("SC_CLK_TCK")
    except (OSError, AttributeError, ValueError):  # gone, no procfs, or no sysconf
        return None
    # After the last ')': field 3 (state) is index 0, so field k is index k - 3.
    fields = text[text.rindex(")") + 1:].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


class CpuMeter:
    """Each process's CPU percent between successive samples (100.0 = one full core).

    Parameters
    ----------
    clock : callable
        Monotonic seconds.
    reader : callable
        ``reader(pid) -> CPU seconds or None``; ``process_cpu_seconds`` by default. Both are
        injected so tests are deterministic.

    Notes
    -----
    The percent is ``100 * (cpu_now - cpu_before) / (t_now - t_before)`` over the interval since
    the previous sample of the same pid. The first sample of a pid returns None (it only sets
    the baseline), as does a sample when the process is gone (its baseline is forgotten), when
    its CPU went backwards (a new process reusing the pid: the baseline restarts) or when no
    time has passed (the older baseline is kept).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 reader: Callable[[int], float | None] = process_cpu_seconds) -> None:
        self._clock = clock
        self._reader = reader
        self._last: dict[int, tuple[float, float]] = {}

    def sample(self, pid: int) -> float | None:
        """CPU percent of ``pid`` since its previous sample; None on the first (see Notes)."""
        cpu = self._reader(pid)
        now = self._clock()
        if cpu is None:
            self._last.pop(pid, None)
            return None
        before = self._last.get(pid)
        if before is None or cpu < before[1]:
            self._last[pid] = (now, cpu)
            return None
        elapsed = now - before[0]
        if elapsed <= 0:
            return None
        self._last[pid] = (now, cpu)
        return 100.0 * (cpu - before[1]) / elapsed

    def forget(self, pid: int) -> None:
        """Drop ``pid``'s baseline (its worker stopped); unknown pids are ignored."""
        self._last.pop(pid, None)
