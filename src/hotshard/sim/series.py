"""A run's time axis: per window of simulated time, each shard's requests, CPU and p99, the
window's latency percentiles, and the load offered to each shard.

A whole-run average hides what a shard went through in its worst ten minutes: an event that
sends 40% of the traffic to one channel for ten minutes of a two-hour run is 5% of the run,
and the shard that holds it can sit at 15% CPU on average while it saturates in that window.
So ``simulate`` keeps a series of windows beside its whole-run numbers.

Every request belongs to the window of its arrival (its requests, latency and p99 are that
window's); CPU is the work the shard's workers did inside the window (a backlog served after
the window counts where it was served), as a share of their capacity. The series is the same
however the run is streamed (``system.simulate``'s internal windows cut the run at arrival
blocks, never at these windows): a window's latencies are counted into the same log-linear
buckets as the run's histograms (``histogram``), and a percentile read from the sorted
buckets of a window held whole is bit for bit the one read from the merged counts of a
window that straddles two streamed pieces. Memory: the series' arrays (a few numbers per
window and shard: a day of minute windows over 64 shards is 3.7 MB) and, for the one window
still open at a streamed piece's edge, each shard's bucket counts (0.12 MB a shard), never
more however long the run.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hotshard.observations import MAX_WINDOWS, Latency, ShardObservation, TimeWindow
from hotshard.sim.histogram import _MID, BUCKETS, bucket_of

__all__ = ["LATENCY_KEYS", "MAX_WINDOWS", "Saturation", "SeriesRecorder", "ShardLoad",
           "WindowSeries", "saturation", "series_interval"]

# the window's latency summary, in this order (SimResult.percentiles' names)
LATENCY_KEYS = ("p50", "p90", "p99", "p999", "max", "mean")
_QS = np.array([50.0, 90.0, 99.0, 99.9])
# a run is cut into about this many windows when no profile says otherwise
DEFAULT_WINDOWS = 20


def series_interval(duration: float, period: float | None = None) -> float:
    """The width of a run's windows, seconds: ``period`` (a profile's timeline window, as
    laid on the run) when given, else 1/20 of the run rounded to a whole minute (from a
    minute up) or second (from a second up); never so narrow that the run has more than
    ``MAX_WINDOWS`` windows."""
    duration = float(duration)
    if period is not None and period > 0:
        width = float(period)
        whole = round(duration / width)
        if whole >= 1 and abs(duration / width - whole) < 0.01:
            # a profile's windows over a run of (almost exactly) its span: the run's own
            # (a 7,199.9 s span in a 7,200 s run leaves no 0.1 s window at the end)
            width = duration / whole
    else:
        width = duration / DEFAULT_WINDOWS
        if width >= 60:
            width = 60.0 * round(width / 60.0)
        elif width >= 1:
            width = float(round(width))
    return max(width, duration / MAX_WINDOWS)


def detection_interval(duration: float, detection) -> float:
    """Windows fine enough to see a detection's transient: half the hot-key window (at least
    a second, the width ``drive`` records a live run in), never wider than the run's
    default windows."""
    return min(series_interval(duration), max(1.0, detection.window_s / 2))


def window_count(duration: float, width: float) -> int:
    """Windows of ``width`` that cover [0, ``duration``) (the last may be shorter)."""
    return max(1, min(MAX_WINDOWS, int(math.ceil(duration / width - 1e-9))))


@dataclass(frozen=True, eq=False)
class WindowSeries:
    """The run's windows: ``starts``/``ends`` (seconds, K each); per window and shard (K x
    shards) ``requests`` (arrived), ``reaching`` (requests that reached the shard's queues,
    past any cache, a write once for each replica it goes to), ``cpu`` (busy share of the
    shard's capacity, replicas' mean) and ``p99_ms`` (NaN: no request); ``latency_ms`` (K x
    6, ``LATENCY_KEYS``, NaN for an empty window). ``mean_service_s`` and ``capacity``
    (workers x replicas a shard) are the model's."""

    starts: NDArray[np.float64]
    ends: NDArray[np.float64]
    requests: NDArray[np.int64]
    reaching: NDArray[np.int64]
    cpu: NDArray[np.float64]
    p99_ms: NDArray[np.float64]
    latency_ms: NDArray[np.float64]
    mean_service_s: float
    capacity: int

    def __len__(self) -> int:
        return int(self.starts.size)

    @property
    def seconds(self) -> NDArray[np.float64]:
        return self.ends - self.starts

    @property
    def offered(self) -> NDArray[np.float64]:
        """The load offered to each shard in each window: requests reaching its queues x the
        mean service time / (the window x its capacity); above 1 its queue grows."""
        return self.reaching * self.mean_service_s / (self.seconds[:, None] * self.capacity)

    def peak(self) -> tuple[int, int]:
        """(window, shard) of the busiest shard in its busiest window, by CPU (the offered
        load breaks ties, e.g. between saturated shards); the first such on ties."""
        score = self.cpu + 1e-9 * np.minimum(self.offered, 1e6)
        k, s = np.unravel_index(int(np.argmax(score)), score.shape)
        return int(k), int(s)

    def to_time_windows(self) -> tuple[TimeWindow, ...]:
        """The series as ``hotshard.observations`` windows."""
        out = []
        seconds = self.seconds
        for k in range(len(self)):
            lat = self.latency_ms[k]
            latency = (None if np.isnan(lat[0]) else
                       Latency(**{name: float(v) for name, v in zip(LATENCY_KEYS, lat,
                                                                   strict=True)}))
            shards = tuple(
                ShardObservation(id=str(s), cpu=min(1.0, float(self.cpu[k, s])),
                                 requests=int(self.requests[k, s]),
                                 p99_ms=None if np.isnan(self.p99_ms[k, s])
                                 else float(self.p99_ms[k, s]))
                for s in range(self.requests.shape[1]))
            total = int(self.requests[k].sum())
            out.append(TimeWindow(start_s=float(self.starts[k]), end_s=float(self.ends[k]),
                                  requests=total, rate_rps=total / float(seconds[k]),
                                  latency_ms=latency, shards=shards))
        return tuple(out)


def _read_only(a: NDArray) -> NDArray:
    a.setflags(write=False)
    return a


def _ranked(values_at, n: NDArray, q: NDArray, low: NDArray, high: NDArray) -> NDArray:
    """Percentiles ``q`` of groups of ``n`` values each, as ``LatencyHistogram.percentile``
    reads them: ``values_at(rank)`` is each group's bucket at a 0-based rank; the result
    has one row per group. The same arithmetic, so both ways agree to the bit."""
    n = np.asarray(n, dtype=np.int64)[:, None]
    rank = q[None, :] / 100.0 * (n - 1)
    lo = np.floor(rank)
    both = values_at(np.concatenate([lo, np.minimum(lo + 1, n - 1)], axis=1).astype(np.int64))
    below, above = _MID[both[:, :q.size]], _MID[both[:, q.size:]]
    value = below + (rank - lo) * (above - below)
    return np.clip(value, low[:, None], high[:, None])


class SeriesRecorder:
    """Counts a streamed run into its windows (see the module's docstring): ``record`` each
    streamed piece's requests once served, ``work`` each queue's ``Served``, then
    ``result``."""

    def __init__(self, width: float, duration: float, shards: int, capacity: int,
                 mean_service_s: float):
        self.width = float(width)
        self.duration = float(duration)
        self.shards = int(shards)
        self.capacity = int(capacity)
        self.mean_service_s = float(mean_service_s)
        self.k = window_count(self.duration, self.width)
        k, s = self.k, self.shards
        self.requests = np.zeros((k, s), dtype=np.int64)
        self.reaching = np.zeros((k, s), dtype=np.int64)
        self.busy = np.zeros((k, s))
        self.p99 = np.full((k, s), np.nan)
        self.latency = np.full((k, len(LATENCY_KEYS)), np.nan)
        # the window still open at the last piece's edge: its index, each shard's bucket
        # counts in it (made when first needed), and each shard's exact count, min, max, sum
        self._open: int | None = None
        self._open_counts: NDArray[np.int64] | None = None
        self._open_n = np.zeros(s, dtype=np.int64)
        self._open_low = np.full(s, np.inf)
        self._open_high = np.full(s, -np.inf)
        self._open_sum = np.zeros(s)

    def window_of(self, t: NDArray[np.float64]) -> NDArray[np.int64]:
        """The window of each instant (seconds >= 0; the run's end in the last)."""
        return np.minimum((np.asarray(t) / self.width).astype(np.int64), self.k - 1)

    # -- a streamed piece ---------------------------------------------------------------------
    def record(self, arrival: NDArray[np.float64], latency: NDArray[np.float64],
               counts: NDArray[np.int64], buckets: NDArray[np.int64] | None = None) -> None:
        """A piece's requests in shard order (``counts`` a shard, arrival order within each)
        with their latencies (ms) and, when known, their histogram buckets."""
        n = arrival.size
        if n == 0:
            return
        s_count = self.shards
        tw = self.window_of(arrival)
        shard = np.repeat(np.arange(s_count), counts)
        first, last = int(tw.min()), int(tw.max())
        span = last - first + 1
        local = tw - first
        self.requests[first:last + 1] += np.bincount(
            local * s_count + shard, minlength=span * s_count).reshape(span, s_count)
        if self._open is not None and self._open != first:
            self._close()
        # windows that may continue in another piece go to the open state: the one open
        # before (== first) and the last of this piece
        pending = sorted({last} | ({self._open} if self._open is not None else set()))
        if buckets is None:
            buckets = bucket_of(latency)
        # (shard, window) groups: contiguous in shard order (arrivals sorted in a shard)
        gid = shard * span + local
        sizes = np.bincount(gid, minlength=s_count * span)
        groups = np.flatnonzero(sizes)
        starts = (np.cumsum(sizes) - sizes)[groups]
        low = np.minimum.reduceat(latency, starts)
        high = np.maximum.reduceat(latency, starts)
        del gid
        window = groups % span
        keep = ~np.isin(window + first, pending)
        if keep.any():
            self._direct_shards(buckets, groups[keep], starts[keep], sizes, span, first,
                                low[keep], high[keep])
            self._direct_windows(local, buckets, latency, first, span, pending,
                                 window, low, high)
        del local, sizes, groups, starts, low, high
        for k in pending:
            if k == self._open or self._open is None:
                self._open = k
                # a piece inside one window (a profile's ten minutes) is merged whole
                self._merge_open(None if first == last else tw == k, shard, latency, buckets)
            if k != last:   # the piece went past it: it is done
                self._close()

    def _direct_shards(self, buckets, groups, starts, sizes, span, first, low,
                       high) -> None:
        """p99 of every (shard, window) group held whole by this piece: the groups are
        contiguous slices, each counted into buckets and walked down from its top (a
        compiled pass: a p99 is read from the top 1%)."""
        n = sizes[groups]

        def at(ranks):
            out = np.empty(ranks.shape, dtype=np.int64)
            _compiled_ranks()(buckets, starts, n, ranks, np.zeros(BUCKETS, dtype=np.int64),
                              out)
            return out

        value = _ranked(at, n, np.array([99.0]), low, high)
        self.p99[groups % span + first, groups // span] = value[:, 0]

    def _direct_windows(self, local, buckets, latency, first, span, pending, window, low,
                        high) -> None:
        """The latency summary of every window held whole by this piece (all shards); the
        windows' exact min and max from their shards' groups'."""
        sizes = np.bincount(local, minlength=span)
        windows = np.flatnonzero(sizes)
        windows = windows[~np.isin(windows + first, pending)]
        w_low = np.full(span, np.inf)
        w_high = np.full(span, -np.inf)
        np.minimum.at(w_low, window, low)
        np.maximum.at(w_high, window, high)
        w_low, w_high = w_low[windows], w_high[windows]
        n = sizes[windows]
        if span * BUCKETS <= 2 * local.size:   # few windows: dense counts, no sort
            counts = np.bincount(local * BUCKETS + buckets,
                                 minlength=span * BUCKETS).reshape(span, BUCKETS)
            cum = [np.cumsum(counts[w]) for w in windows]
            qs = _ranked(lambda r: np.stack([np.searchsorted(c, row, side="right")
                                             for c, row in zip(cum, r, strict=True)]),
                         n, _QS, w_low, w_high)
        else:
            ordered = np.sort(local * BUCKETS + buckets) % BUCKETS
            base = (np.cumsum(sizes) - sizes)[windows]
            qs = _ranked(lambda r: ordered[base[:, None] + r], n, _QS, w_low, w_high)
        rows = windows + first
        self.latency[rows, :4] = qs
        self.latency[rows, 4] = w_high
        # the mean of equal values may round an ulp past them: held to the max, as it is
        mean = np.bincount(local, weights=latency, minlength=span)[windows] / n
        self.latency[rows, 5] = np.minimum(mean, w_high)

    def _merge_open(self, mine: NDArray[np.bool_] | None, shard, latency, buckets) -> None:
        """Add a piece's requests of the open window (``mine``; None: all of them) to its
        counts."""
        if mine is None:
            owner, lat, flat = shard, latency, shard * BUCKETS + buckets
        else:
            rows = np.flatnonzero(mine)   # in shard order: one slice a shard
            owner, lat = shard[rows], latency[rows]
            flat = owner * BUCKETS + buckets[rows]
        if lat.size == 0:
            return
        s_count = self.shards
        if self._open_counts is None:
            self._open_counts = np.zeros((s_count, BUCKETS), dtype=np.int64)
        if s_count * BUCKETS <= 4 * lat.size:   # one pass over every shard's buckets
            self._open_counts += np.bincount(flat, minlength=s_count * BUCKETS).reshape(
                s_count, BUCKETS)
        else:                                    # many shards, few requests: each one
            np.add.at(self._open_counts.reshape(-1), flat, 1)
        del flat
        starts = np.concatenate([[0], np.flatnonzero(np.diff(owner)) + 1])
        here = owner[starts]
        self._open_n[here] += np.diff(np.concatenate([starts, [lat.size]]))
        self._open_low[here] = np.minimum(self._open_low[here],
                                          np.minimum.reduceat(lat, starts))
        self._open_high[here] = np.maximum(self._open_high[here],
                                           np.maximum.reduceat(lat, starts))
        self._open_sum[here] += np.add.reduceat(lat, starts)

    def _close(self) -> None:
        """The open window is complete: its percentiles from its merged counts."""
        k = self._open
        have = np.flatnonzero(self._open_n)
        if have.size:
            counts = self._open_counts[have]
            n = self._open_n[have]
            low, high = self._open_low[have], self._open_high[have]
            cum = np.cumsum(counts, axis=1)

            def at(ranks, cum=cum):
                return np.stack([np.searchsorted(c, r, side="right")
                                 for c, r in zip(cum, ranks, strict=True)])

            self.p99[k, have] = _ranked(at, n, np.array([99.0]), low, high)[:, 0]
            total = np.cumsum(counts.sum(axis=0))[None, :]
            lo, hi = np.array([low.min()]), np.array([high.max()])
            self.latency[k, :4] = _ranked(lambda r: at(r, total), np.array([n.sum()]), _QS,
                                          lo, hi)[0]
            self.latency[k, 4] = hi[0]
            self.latency[k, 5] = min(self._open_sum[have].sum() / n.sum(), hi[0])
            self._open_counts[have] = 0
        self._open = None
        self._open_n[:] = 0
        self._open_low[:] = np.inf
        self._open_high[:] = -np.inf
        self._open_sum[:] = 0.0

    # -- the queues' work -------------------------------------------------------------------
    def work(self, shard, arrival, start, finish, coalesced) -> None:
        """Served requests (a piece's, of any queues; ``shard`` each one's, or one for all):
        each counts as reaching its shard in its arrival's window, and its work [start,
        finish) (cut at the run's end; a coalesced read did none) is spread over the
        windows it ran in (one compiled pass)."""
        if arrival.size == 0:
            return
        contiguous = np.ascontiguousarray
        shard = np.broadcast_to(np.asarray(shard, dtype=np.int64), np.shape(arrival))
        _compiled_work()(contiguous(shard), contiguous(arrival),
                         contiguous(start), contiguous(finish), contiguous(coalesced),
                         self.width, self.duration, self.k, self.reaching, self.busy)

    # -- the result ---------------------------------------------------------------------------
    def result(self) -> WindowSeries:
        if self._open is not None:
            self._close()
        starts = np.arange(self.k) * self.width
        ends = np.minimum(starts + self.width, self.duration)
        ends[-1] = self.duration
        seconds = (ends - starts)[:, None] * self.capacity
        return WindowSeries(
            starts=_read_only(starts), ends=_read_only(ends),
            requests=_read_only(self.requests), reaching=_read_only(self.reaching),
            cpu=_read_only(self.busy / seconds), p99_ms=_read_only(self.p99),
            latency_ms=_read_only(self.latency), mean_service_s=self.mean_service_s,
            capacity=self.capacity)


@functools.cache
def _compiled_work():
    """``_spread_work`` compiled by numba."""
    from numba import njit

    return njit(cache=True, nogil=True)(_spread_work)


def _spread_work(shard, arrival, start, finish, coalesced, width, end, k, reaching,
                 busy):  # pragma: no cover - compiled
    """Request i reaches ``shard[i]`` in its arrival's window (``reaching``); its service
    [start, finish), cut at ``end``, is added to ``busy`` window by window (none for a
    coalesced read). A window is ``int(t / width)``, the last holding the run's end, as
    ``SeriesRecorder.window_of`` computes it."""
    last = k - 1
    for i in range(arrival.size):
        s = shard[i]
        w = min(int(arrival[i] / width), last)
        reaching[w, s] += 1
        if coalesced[i]:
            continue
        st = min(start[i], end)
        fi = min(finish[i], end)
        if not fi > st:
            continue
        a = min(int(st / width), last)
        z = min(int(fi / width), last)
        if a == z:
            busy[a, s] += fi - st
            continue
        busy[a, s] += (a + 1) * width - st
        for w in range(a + 1, z):
            busy[w, s] += width
        busy[z, s] += fi - z * width


@functools.cache
def _compiled_ranks():
    """``_group_ranks`` compiled by numba (imported here: paid when a run keeps a series)."""
    from numba import njit

    return njit(cache=True, nogil=True)(_group_ranks)


def _group_ranks(buckets, starts, sizes, ranks, scratch, out):  # pragma: no cover - compiled
    """``out[g, j]``: the bucket of the value at 0-based rank ``ranks[g, j]`` among group g's
    buckets (``buckets[starts[g]:starts[g] + sizes[g]]``), as a sort would give it: the
    group is counted into ``scratch`` (zeros, one per bucket, zeros again after), then
    walked down from its top bucket until every rank asked for is found."""
    q = ranks.shape[1]
    for g in range(starts.size):
        lo = starts[g]
        m = sizes[g]
        top = 0
        for i in range(lo, lo + m):
            b = buckets[i]
            scratch[b] += 1
            if b > top:
                top = b
        left = q
        done = np.zeros(q, dtype=np.bool_)
        above = 0
        b = top
        while left > 0:
            above += scratch[b]
            for j in range(q):   # rank r lies in bucket b when fewer than r + 1 lie below it
                if not done[j] and m - above <= ranks[g, j]:
                    out[g, j] = b
                    done[j] = True
                    left -= 1
            b -= 1
        for i in range(lo, lo + m):
            scratch[buckets[i]] = 0


# -- saturation -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShardLoad:
    """The load offered to one shard over a span: ``share`` of all requests reached its
    queues, at ``rate_rps`` requests/s in all, each ``mean_service_s`` of work, for
    ``capacity`` workers: ``load`` = share x rate x mean service / capacity (> 1: its queue
    grows without bound)."""

    shard: int
    start_s: float
    end_s: float
    share: float
    rate_rps: float
    mean_service_s: float
    capacity: int

    @property
    def load(self) -> float:
        return self.share * self.rate_rps * self.mean_service_s / self.capacity


@dataclass(frozen=True)
class Saturation:
    """Where the offered load exceeds capacity: ``service`` (the whole service: every
    request's work against every shard's workers), ``whole_run`` (shards saturated on
    average), ``windows`` (each shard saturated in some window: its worst one, that is
    not saturated over the whole run), ``peak`` (the largest load offered to one shard in
    one window, saturated or not)."""

    service: ShardLoad
    shards: int
    whole_run: tuple[ShardLoad, ...]
    windows: tuple[ShardLoad, ...]
    peak: ShardLoad | None

    @property
    def any(self) -> bool:
        return self.service.load > 1 or bool(self.whole_run) or bool(self.windows)


def saturation(series: WindowSeries) -> Saturation:
    """The offered load of a run's series, shard by shard, over the whole run and window by
    window (see ``Saturation``)."""
    reached = series.reaching.astype(np.float64)
    counts = series.requests.sum(axis=1).astype(np.float64)   # all requests, per window
    total = float(counts.sum())
    start, end = float(series.starts[0]), float(series.ends[-1])
    shards = reached.shape[1]

    def load(s, lo, hi, count, all_count, capacity=series.capacity):
        return ShardLoad(int(s), float(lo), float(hi),
                         float(count / all_count) if all_count else 0.0,
                         float(all_count) / (float(hi) - float(lo)), series.mean_service_s,
                         capacity)

    service = load(-1, start, end, reached.sum(), total, series.capacity * shards)
    per_shard = reached.sum(axis=0)
    whole_run = tuple(sorted((x for x in (load(s, start, end, per_shard[s], total)
                                          for s in range(shards)) if x.load > 1),
                             key=lambda x: -x.load))
    saturated = {x.shard for x in whole_run}
    offered = series.offered
    peak = None
    if total:
        k, s = np.unravel_index(int(np.argmax(offered)), offered.shape)
        peak = load(s, series.starts[k], series.ends[k], reached[k, s], counts[k])
    windows = []
    for s in range(shards):
        k = int(np.argmax(offered[:, s]))
        if s not in saturated and offered[k, s] > 1:
            windows.append(load(s, series.starts[k], series.ends[k], reached[k, s], counts[k]))
    return Saturation(service, shards, whole_run,
                      tuple(sorted(windows, key=lambda x: -x.load)), peak)
