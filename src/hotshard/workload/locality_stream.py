"""The locality order made window by window: any number of references in bounded memory.

``locality_order`` lays every key's references out as a renewal process on a circle of the
run's length and sorts all of them: 16 bytes a reference, so a run of 2 billion (the seed's
data set) cannot be ordered whole. Here the same construction is made in time order, one
window of the run at a time:

* every key draws from a random stream of its own (splitmix64 from a seed of the key's own:
  draw j of key k is one hash of (seed_k + j)), so any draw is made where it is needed;
* a key's instants increase from its first (on the circle, or in its own timeline windows);
  where they pass the circle's end they go on from its start. A first pass over every key
  cuts its instants into *runs*, each increasing in run time, and records where each starts
  (its draw index and instant): per run a few numbers, not per reference;
* each run sits in a calendar queue under the window of its next instant; a window takes its
  runs, writes their instants below its end, queues each run again under the window of its
  next, and sorts what it wrote (the same packed words and radix sort as the whole order).

A key without measured reuse times (``row`` < 0) gets independent uniform instants: made in
order as the normalised partial sums of exponential spacings (the order statistics of
uniforms), its total summed in the first pass.

Peak memory: the keys' and runs' tables (about 80 bytes a key) and two buffers of a window
(``WINDOW_UNITS`` references, 16 bytes each); time: two passes of draws (the runs, then the
instants) and one radix sort, whatever the number of windows, so a run is byte-identical
however it is cut into chunks and workers (the windows do not depend on them).
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit

from hotshard.errors import HotshardError
from hotshard.workload._sorting import sort_run

__all__ = ["WINDOW_UNITS", "LocalityStream", "StreamedPositions"]

_GUIDE = 1024   # guide-table entries per reuse-time CDF


@njit(cache=True)
def _guides(cdf: np.ndarray) -> np.ndarray:
    """Per CDF row, the first bin whose CDF exceeds g / _GUIDE, for each g: a draw starts
    there and walks a bin or two (a guide table: searchsorted's answer in O(1))."""
    out = np.zeros((cdf.shape[0], _GUIDE), dtype=np.int32)
    last = cdf.shape[1] - 1
    for r in range(cdf.shape[0]):
        b = 0
        for g in range(_GUIDE):
            while b < last and cdf[r, b] <= g / _GUIDE:
                b += 1
            out[r, g] = b
    return out


@njit(cache=True, inline="always")
def _warp(u: float, knots: np.ndarray, row: int, y: np.ndarray) -> float:
    """Fraction ``u`` of a key's circle moved to its fraction of the run: piecewise linear
    from knots[row] (at the window edges) to ``y``."""
    last = knots.shape[1] - 2
    seg = 0
    while seg < last and knots[row, seg + 1] <= u:
        seg += 1
    span = knots[row, seg + 1] - knots[row, seg]
    frac = (u - knots[row, seg]) / span if span > 0 else 0.0
    return y[seg] + frac * (y[seg + 1] - y[seg])


_BUCKET_FILL = 2   # references per bucket on average; insertion sort finishes each bucket
_TOP_BITS = 11     # the first pass's buckets: 2,048 write streams stay in the caches


@njit(cache=True)
def _bucket_sorted_owners(packed: np.ndarray, value_bits: int, owner_bits: int,
                          spread: np.ndarray) -> np.ndarray:
    """The low ``owner_bits`` of ``packed`` (values below 2^value_bits) in the order of
    ``np.sort(packed)``, in linear time, written over ``packed``. The instants are spread over
    the run at about one a unit, so a most-significant-digit radix sort fits them: one
    counting pass on the top ``_TOP_BITS`` bits (2,048 buckets, so the scatter stays in the
    caches), then inside each bucket (now in cache) a counting pass on the next bits that
    leaves a couple of values a sub-bucket, finished by insertion sort (a sub-bucket a burst
    of immediate re-reads filled, by a comparison sort). Measured against numpy's sort of the
    same 64-bit words, which was two thirds of the order's time: ``bench_locality.py``."""
    n = packed.size
    top_bits = _TOP_BITS if value_bits > _TOP_BITS else value_bits
    shift = value_bits - top_bits
    starts = np.zeros((1 << top_bits) + 1, dtype=np.int64)
    for i in range(n):
        starts[(packed[i] >> shift) + 1] += 1
    for b in range(1, starts.size):
        starts[b] += starts[b - 1]
    fill = starts[:-1].copy()
    for i in range(n):
        b = packed[i] >> shift
        spread[fill[b]] = packed[i]
        fill[b] += 1
    biggest = 1
    for b in range(starts.size - 1):
        biggest = max(biggest, starts[b + 1] - starts[b])
    local = np.zeros(2 * biggest + 2, dtype=np.int64)
    mask = (np.int64(1) << owner_bits) - 1
    for b in range(starts.size - 1):
        first, end = starts[b], starts[b + 1]
        sub_bits = 0
        while (1 << sub_bits) * _BUCKET_FILL < end - first and sub_bits < shift:
            sub_bits += 1
        sub_shift = shift - sub_bits
        sub_mask = (np.int64(1) << sub_bits) - 1
        width = (1 << sub_bits) + 1
        local[:width] = 0
        for i in range(first, end):
            local[((spread[i] >> sub_shift) & sub_mask) + 1] += 1
        for s in range(1, width):
            local[s] += local[s - 1]
        for i in range(first, end):
            s = (spread[i] >> sub_shift) & sub_mask
            packed[first + local[s]] = spread[i]
            local[s] += 1
        # local[s] is now where sub-bucket s ends (relative to first); s - 1's, where it starts
        begin = first
        for s in range(width - 1):
            stop = first + local[s]
            sort_run(packed, begin, stop)
            begin = stop
        for i in range(first, end):
            packed[i] &= mask
    return packed



WINDOW_UNITS = 1 << 24      # run time units (about one reference each) per window
_PLAN_REFS = 1 << 24        # references a batch of the first pass covers


class _Stopped(HotshardError):
    """The order's work was stopped from outside (``LocalityStream(stop=...)``)."""
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_REST, _OWN, _IRM = 0, 1, 2


@njit(cache=True, inline="always")
def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, inline="always")
def _draw(base: np.uint64, j: int) -> np.uint64:
    """Draw ``j`` of a key's stream (``base``: its seed): splitmix64's j + 1-th output."""
    return _mix(base + np.uint64(j + 1) * _GOLDEN)


@njit(cache=True, inline="always")
def _u53(z) -> float:
    return np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, inline="always")
def _gap(z, r: int, stretch: float, cdf, guide, lo, width) -> float:
    """The gap to a key's next instant from draw ``z``: a reuse time g from row ``r``'s
    CDF as (g - 1) x ``stretch`` units, plus 1e-6 so a key re-read at once follows itself
    (``locality_order._advance``)."""
    scale = 1.0 / 4294967296.0
    u = np.float64(z >> np.uint64(32)) * scale
    v = np.float64(z & np.uint64(0xFFFFFFFF)) * scale
    b = guide[r, int(u * _GUIDE)]
    while b < cdf.shape[1] - 1 and cdf[r, b] <= u:
        b += 1
    g = lo[b] + np.floor(v * width[b])
    return (g - 1.0) * stretch + 1e-6


@njit(cache=True, inline="always")
def _exp(z) -> float:
    return -np.log(1.0 - _u53(z))


@njit(cache=True)
def _key_seeds(n_keys: int, seed: int) -> np.ndarray:
    out = np.empty(n_keys, dtype=np.uint64)
    s = _mix(np.uint64(seed) * _GOLDEN + np.uint64(0x5EED))
    for k in range(n_keys):
        out[k] = _mix(s ^ (np.uint64(k) * np.uint64(0xD1342543DE82EF95)))
    return out


@njit(cache=True)
def _plan_runs(counts, k0: int, k1: int, row, cdf, guide, lo, width, seeds, n: int, own_u,
               warp_y, warp_row):
    """Every key's runs (module notes): arrays key, kind, first draw, count, first instant
    (unwrapped), offset, stretch. An own-row key (``warp_row`` >= 0) has runs per
    window of its timeline (``own_u``: its cumulative shares at the window edges, ``warp_y``:
    the run's at the same edges): each window's share of its requests (largest remainder),
    laid out on a circle of that window's length. Keys ``k0`` to ``k1`` (a batch: the caller
    stays responsive between batches)."""
    cap = 2 * (k1 - k0) + 64
    rk = np.empty(cap, np.int64)
    kind = np.empty(cap, np.int8)
    rj = np.empty(cap, np.int64)
    rc = np.empty(cap, np.int64)
    rt = np.empty(cap, np.float64)
    roff = np.empty(cap, np.float64)
    rs = np.empty(cap, np.float64)
    m = 0
    for k in range(k0, k1):
        c = counts[k]
        if c == 0:
            continue
        r = row[k]
        own = k < warp_row.size and warp_row[k] >= 0
        if not own and r < 0:   # independent instants: one run, its spacings' total kept
            total = 0.0
            for j in range(c + 1):
                total += _exp(_draw(seeds[k], j))
            if m + 1 > rk.size:
                rk, kind, rj, rc = _grown(rk), _grown(kind), _grown(rj), _grown(rc)
                rt, roff, rs = _grown(rt), _grown(roff), _grown(rs)
            rk[m], kind[m], rj[m], rc[m] = k, _IRM, 0, c
            rs[m] = n / total
            rt[m] = _exp(_draw(seeds[k], 0)) * rs[m]
            roff[m] = 0.0
            m += 1
            continue
        # the windows this key is laid out in: the whole circle, or its timeline's
        windows = own_u.shape[1] - 1 if own else 1
        j = 0
        for w in range(windows):
            if own:
                here = _share(c, own_u[warp_row[k]], w)
                a = warp_y[w] * n
                length = warp_y[w + 1] * n - a
            else:
                here, a, length = c, 0.0, float(n)
            if here == 0:
                continue
            stretch = length / (length - here) if here < length else 1.0
            t = _u53(_draw(seeds[k], j)) * length
            lap = -1
            for i in range(here):
                if i > 0:
                    t += _gap(_draw(seeds[k], j + i), r, stretch, cdf, guide, lo, width)
                this = np.floor(t / length) if length > 0 else 0.0
                if this != lap:   # a new run: the instants wrapped to the window's start
                    if m + 1 > rk.size:
                        rk, kind, rj, rc = _grown(rk), _grown(kind), _grown(rj), _grown(rc)
                        rt, roff = _grown(rt), _grown(roff)
                        rs = _grown(rs)
                    rk[m], kind[m], rj[m], rc[m] = k, _OWN if own else _REST, j + i, 0
                    rt[m], roff[m] = t, a - this * length
                    rs[m] = stretch
                    lap = this
                    m += 1
                rc[m - 1] += 1
            j += here
    return rk[:m], kind[:m], rj[:m], rc[:m], rt[:m], roff[:m], rs[:m]


@njit(cache=True)
def _share(c: int, u: np.ndarray, w: int) -> int:
    """Window ``w``'s part of ``c`` requests split by cumulative shares ``u`` (largest
    remainder; ``locality_order._own_instants``)."""
    windows = u.size - 1
    here = np.zeros(windows, dtype=np.int64)
    rem = np.zeros(windows, dtype=np.float64)
    left = c
    for x in range(windows):
        share = u[x + 1] - u[x]
        here[x] = int(np.floor(c * share))
        rem[x] = c * share - here[x]
        left -= here[x]
    while left > 0:
        best = np.argmax(rem)
        here[best] += 1
        rem[best] = -1.0
        left -= 1
    return here[w]


@njit(cache=True)
def _grown(a):
    b = np.empty(2 * a.size, a.dtype)
    b[: a.size] = a
    return b


@njit(cache=True, inline="always")
def _at(q: int, kind, rt, roff, n: int, warp_u, warp_y, warped: bool) -> float:
    """Run ``q``'s next instant in run time."""
    x = rt[q] + roff[q]
    if kind[q] == _OWN or not warped:
        return x
    return _warp(x / n, warp_u, warp_u.shape[0] - 1, warp_y) * n


@njit(cache=True)
def _queue_all(kind, rt, roff, n: int, warp_u, warp_y, warped: bool, units: int,
               n_windows: int):
    """The calendar queue: every run under the window of its first instant."""
    head = np.full(n_windows, -1, np.int64)
    link = np.full(kind.size, -1, np.int64)
    for q in range(kind.size - 1, -1, -1):
        w = min(int(_at(q, kind, rt, roff, n, warp_u, warp_y, warped) // units),
                n_windows - 1)
        link[q] = head[w]
        head[w] = q
    return head, link


@njit(cache=True, nogil=True)
def _window(w: int, units: int, n: int, n_windows: int, head, link, rk, kind, rj, rc, rt,
            roff, rs, seeds, row, cdf, guide, lo, width, warp_u, warp_y, warped: bool,
            frac_bits: int, owner_bits: int, out: np.ndarray, m: int) -> int:
    """Write window ``w``'s instants, as packed words relative to its start, into ``out``
    from ``out[m]`` on, re-queueing each run under the window of its next instant. Returns
    the words written, or -(words written) - 1 when ``out`` filled first: the window is then
    resumed by calling again with a larger ``out`` (the runs not yet done stay queued)."""
    one = float(1 << frac_bits)
    top = (np.int64(n) << frac_bits) - 1
    end = np.inf if w == n_windows - 1 else float((w + 1) * units)
    base = np.int64(w * units) << frac_bits
    while head[w] >= 0:
        q = head[w]
        k = rk[q]
        while rc[q] > 0:
            y = _at(q, kind, rt, roff, n, warp_u, warp_y, warped)
            if y >= end:
                break
            if m == out.size:
                return -m - 1
            out[m] = ((min(np.int64(y * one), top) - base) << owner_bits) | k
            m += 1
            rc[q] -= 1
            rj[q] += 1
            if rc[q] > 0:
                rt[q] = _next(rt[q], q, rj[q], kind, rk, rs, seeds, row, cdf, guide, lo,
                              width)
        head[w] = link[q]
        if rc[q] > 0:  # its next instant lies in a later window
            y = _at(q, kind, rt, roff, n, warp_u, warp_y, warped)
            to = min(max(int(y // units), w + 1), n_windows - 1)
            link[q] = head[to]
            head[to] = q
    return m


@njit(cache=True, inline="always")
def _next(t: float, q: int, j: int, kind, rk, rs, seeds, row, cdf, guide, lo, width
          ) -> float:
    """Run ``q``'s instant after ``t``, from draw ``j`` of its key."""
    k = rk[q]
    z = _draw(seeds[k], j)
    if kind[q] == _IRM:
        return t + _exp(z) * rs[q]
    return t + _gap(z, row[k], rs[q], cdf, guide, lo, width)


class LocalityStream:
    """The locality order of ``counts`` (references per key position) made window by window
    (module notes); ``take(n)`` gives the next ``n`` key positions. ``row``, ``cdf``, ``lo``,
    ``width``: each key's reuse-time CDF row and the bins (``locality_order``); ``warp_u``,
    ``warp_y``, ``warp_row``: the timelines' knots (``locality_order._with_rest``). ``stop``,
    once set, ends the work at its next batch or window with ``_Stopped`` (a generator
    interrupted: its chunk threads must not run on)."""

    def __init__(self, counts, row, cdf, lo, width, seed: int, warp_u, warp_y, warp_row,
                 units: int = WINDOW_UNITS, stop: threading.Event | None = None):
        counts = np.ascontiguousarray(counts, dtype=np.int64)
        self.n = int(counts.sum())
        self.units = int(units)
        self.n_windows = max(1, -(-self.n // self.units))
        self.owner_bits = max(int(counts.size - 1).bit_length(), 1)
        self.frac_bits = min(63 - self.owner_bits - max(self.n.bit_length(), 1), 30)
        if self.frac_bits < 4:
            from hotshard.errors import InputError

            raise InputError(f"ordering {self.n:,} references over {counts.size:,} keys by "
                             "locality needs more than 64 bits a reference")
        self.row = np.ascontiguousarray(row, dtype=np.int64)
        self.cdf = np.ascontiguousarray(cdf, dtype=np.float64)
        self.guide = _guides(self.cdf)
        self.lo = np.ascontiguousarray(lo, dtype=np.float64)
        self.width = np.ascontiguousarray(width, dtype=np.float64)
        self.seeds = _key_seeds(counts.size, int(seed))
        warp_u = np.ascontiguousarray(warp_u, dtype=np.float64)
        self.warp_y = np.ascontiguousarray(warp_y, dtype=np.float64)
        self.warp_row = np.ascontiguousarray(warp_row, dtype=np.int64)
        self.warped = warp_u.shape[0] > 0
        own = warp_u[:-1] if self.warped else np.zeros((0, 2))
        self.warp_u = np.ascontiguousarray(warp_u[-1:] if self.warped else np.zeros((0, 2)))
        self.stop = stop
        batches, k0 = [], 0
        bounds = np.searchsorted(np.cumsum(counts), np.arange(1, 1 + self.n // _PLAN_REFS)
                                 * _PLAN_REFS)
        for k1 in [*np.unique(bounds).tolist(), counts.size]:
            k1 = min(max(int(k1) + 1, k0), counts.size)
            if k1 > k0:
                self._check()
                batches.append(_plan_runs(counts, k0, k1, self.row, self.cdf, self.guide,
                                          self.lo, self.width, self.seeds, self.n,
                                          np.ascontiguousarray(own), self.warp_y,
                                          self.warp_row))
                k0 = k1
        self.runs = tuple(np.concatenate([b[i] for b in batches]) if batches
                          else np.zeros(0) for i in range(7))
        rk, kind, rj, rc, rt, roff, rs = self.runs
        self.head, self.link = _queue_all(kind, rt, roff, self.n, self.warp_u,
                                          self.warp_y, self.warped, self.units,
                                          self.n_windows)
        self.window = 0
        self.buffer = np.empty(0, dtype=np.int64)
        self.spare = np.empty(0, dtype=np.int64)
        self.pending = np.empty(0, dtype=np.int64)
        self.lock = threading.Lock()

    def _check(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise _Stopped("the locality order was stopped")

    def _next_window(self) -> np.ndarray:
        """Key positions of the next window, in order."""
        self._check()
        args = (self.window, self.units, self.n, self.n_windows, self.head, self.link,
                *self.runs, self.seeds, self.row, self.cdf, self.guide, self.lo, self.width,
                self.warp_u, self.warp_y, self.warped, self.frac_bits, self.owner_bits)
        if self.buffer.size == 0:
            self.buffer = np.empty(min(self.n, self.units + (self.units >> 3)) + 1024,
                                   dtype=np.int64)
        m = _window(*args, self.buffer, 0)
        while m < 0:  # a window denser than the buffer: grow it, go on where it stopped
            grown = np.empty(2 * self.buffer.size, dtype=np.int64)
            grown[: self.buffer.size] = self.buffer
            self.buffer = grown
            m = _window(*args, self.buffer, -m - 1)
        if self.spare.size < self.buffer.size:
            self.spare = np.empty_like(self.buffer)
        self.window += 1
        if m == 0:
            return np.empty(0, dtype=np.int64)
        span = (self.units if self.window < self.n_windows else
                self.n - (self.n_windows - 1) * self.units + 1)
        value_bits = (max(int(span).bit_length(), 1) + 1 + self.frac_bits + self.owner_bits)
        return _bucket_sorted_owners(self.buffer[:m], value_bits, self.owner_bits,
                                     self.spare).copy()

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` key positions of the order (fewer at its end)."""
        parts, have = [], 0
        with self.lock:
            while have < n:
                if self.pending.size == 0:
                    if self.window >= self.n_windows:
                        break
                    self.pending = self._next_window()
                    continue
                part = self.pending[: n - have]
                self.pending = self.pending[part.size:]
                parts.append(part)
                have += part.size
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


class StreamedPositions:
    """Rows [first, stop) of a ``LocalityStream``'s order, for a generator whose chunks are
    made by threads in any order within a bounded lookahead (``messages._chunks``): the
    order is made forward once, and what every chunk below the lowest not yet served needs
    no more is dropped. Rows asked for again once dropped (a second pass over the first
    chunk) are made again from the start: ``make(stop=event)`` gives a fresh stream of the same
    order, stopping when the event is set (``cancel``).
    ``numpy.asarray`` of it is the whole order (a run held in memory)."""

    def __init__(self, make, events: int):
        self.stop = threading.Event()
        self.make = lambda: make(stop=self.stop)
        self.events = int(events)
        self.stream = None
        self.start = 0                       # the first row the buffer holds
        self.buffer = np.empty(0, dtype=np.int64)
        self.served: dict[int, int] = {}     # first -> stop of chunks served above the low
        self.low = 0                         # every row below was served
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return self.events

    def cancel(self) -> None:
        """Stop making the order: a thread in it ends with ``_Stopped`` at its next batch or
        window (the run was interrupted)."""
        self.stop.set()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self.make().take(self.events)
        return whole if dtype is None else whole.astype(dtype)

    def __getitem__(self, rows: slice) -> np.ndarray:
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise TypeError("the order is read in runs of rows: positions[first:stop]")
        first, stop = int(rows.start or 0), min(int(rows.stop), self.events)
        with self.lock:
            if self.stream is None or first < self.start:   # from the start (again)
                self.stream, self.start = self.make(), 0
                self.buffer = np.empty(0, dtype=np.int64)
                self.served, self.low = {}, 0
            made = self.start + self.buffer.size
            if stop > made:
                self.buffer = np.concatenate([self.buffer, self.stream.take(stop - made)])
            out = self.buffer[first - self.start: stop - self.start].copy()
            self.served[first] = max(stop, self.served.get(first, stop))
            while self.low in self.served:
                self.low = self.served.pop(self.low)
            if self.low > self.start:
                self.buffer = self.buffer[self.low - self.start:].copy()
                self.start = self.low
        return out
