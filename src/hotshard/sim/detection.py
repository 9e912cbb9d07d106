"""``serve``'s hot-key rule replayed over a simulated stream, so a model sees the transient.

Without it the models apply a mitigation to the top keys by rank from the first instant: they
predict the service after relief, never the seconds before it. With it (``simulate --detect``)
a mitigation applies to a key only from the moment the service would have called it hot
(``detect.policy``): at each reading of the hot set (every ``HOT_REFRESH_S``), the key's share
of the sliding window (``SLICES`` slices of ``window_s / SLICES``, the newest one up to the
reading) is at least ``hot_share`` and the window holds at least ``MIN_HOT_WINDOW_REQUESTS``
requests; a request uses the reading at or before its arrival less ``apply_s``.

The shares are exact counts: serve's sketch reports a guaranteed share at most
``1 / capacity`` (0.4% at its 256 counters) below the true one, which moves a detection by
under one reading for any share well above that. The keys followed are the ones that can be
hot: the events' channels and the ``CANDIDATES`` most requested head keys (the sketch keeps
256 per slice; a key outside its top cannot hold 5% of a window while 256 keys above it do).

Time is cut into intervals of ``delta``, the largest that divides both a slice and the
reading period, so every window is a whole number of intervals and counts are exact.
Memory: at most ``CHUNK_INTERVALS`` intervals beyond one window, per followed key.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from hotshard.detect.policy import HOT_REFRESH_S, MIN_HOT_WINDOW_REQUESTS, SLICES, Detection

__all__ = ["CANDIDATES", "HotKeyReplay"]

# head keys followed besides the events' channels (the service's sketch capacity)
CANDIDATES = 256
# intervals counted at once past the window (bounds memory for long blocks)
CHUNK_INTERVALS = 4096
# actions kept (a key flapping at the threshold for hours logs two a reading)
MAX_ACTIONS = 10_000


class HotKeyReplay:
    """The hot set over a simulated run, fed its requests block by block in time order.

    Parameters
    ----------
    detection : the rule (window, share, time to apply).
    key_ids : the followed keys' ids as the simulator draws them (an event's channel outside
        the head is ``-(i + 1)``, a head key its position), any order.
    names, shards : each followed key's name and shard, in ``key_ids``' order.
    """

    def __init__(self, detection: Detection, key_ids, names, shards) -> None:
        self.detection = detection
        ids = np.asarray(key_ids, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        self.ids = ids[order]
        self.names = [names[i] for i in order]
        self.shards = [int(shards[i]) for i in order]
        k = self.ids.size
        slice_ms = max(1, round(detection.slice_s * 1000))
        tick_ms = round(HOT_REFRESH_S * 1000)
        delta_ms = math.gcd(slice_ms, tick_ms)
        self.delta = delta_ms / 1000.0
        self.per_slice = slice_ms // delta_ms
        self.per_tick = tick_ms // delta_ms
        # counts per interval and key for intervals [base, base + len(totals))
        self.base = 0
        self.counts = np.zeros((0, k), dtype=np.int64)
        self.totals = np.zeros(0, dtype=np.int64)
        self.done_until = 0   # intervals below this are complete
        self.next_tick = 0
        self.state = np.zeros(k, dtype=bool)     # hot at the last reading
        self.ever = np.zeros(k, dtype=bool)      # hot at any reading so far (splits stay)
        # readings kept for requests still to come: [tick_base, tick_base + len)
        self.tick_base = 0
        self.hot_rows = np.zeros((0, k), dtype=bool)
        self.ever_rows = np.zeros((0, k), dtype=bool)
        self.actions: list[dict] = []
        self.dropped_actions = 0

    def columns(self, key_id: NDArray[np.int64]) -> NDArray[np.int64]:
        """Each request's followed key (its column), -1 for a key not followed."""
        if self.ids.size == 0:
            return np.full(key_id.size, -1, dtype=np.int64)
        col = np.searchsorted(self.ids, key_id)
        col = np.minimum(col, self.ids.size - 1)
        return np.where(self.ids[col] == key_id, col, -1)

    def mark(self, arrival: NDArray[np.float64], key_id: NDArray[np.int64], until: float
             ) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """One block's requests (sorted times, none before a previous block's, all at or
        before ``until``): whether each request's key was hot at its reading (the read
        mitigations apply) and whether it had been hot at any reading by then (a split,
        which stays). Readings up to ``until`` are taken."""
        col = self.columns(key_id)
        hot = np.zeros(arrival.size, dtype=bool)
        ever = np.zeros(arrival.size, dtype=bool)
        end = int(math.floor(until / self.delta))   # interval of ``until``
        lo = 0
        while True:
            step_end = min(end, self.done_until + CHUNK_INTERVALS)
            hi = int(np.searchsorted(arrival, (step_end + 1) * self.delta, side="left")) \
                if step_end < end else arrival.size
            self._count(arrival[lo:hi], col[lo:hi], step_end)
            self._readings(step_end)
            self._assign(arrival[lo:hi], col[lo:hi], hot[lo:hi], ever[lo:hi])
            lo = hi
            if step_end >= end:
                break
        return hot, ever

    def finish(self, duration: float) -> None:
        """Take the readings to the end of the run (keys lifted once the stream stops)."""
        self._count(np.zeros(0), np.zeros(0, dtype=np.int64), int(duration // self.delta))
        self._readings(int(duration // self.delta))

    # -- steps ------------------------------------------------------------------------------
    def _count(self, arrival, col, step_end: int) -> None:
        """Add requests to the intervals, the buffer grown to hold interval ``step_end``."""
        need = step_end + 1 - self.base
        have = self.totals.size
        if need > have:
            self.totals = np.concatenate([self.totals, np.zeros(need - have, np.int64)])
            self.counts = np.concatenate(
                [self.counts, np.zeros((need - have, self.ids.size), np.int64)])
        if arrival.size:
            rows = np.floor(arrival / self.delta).astype(np.int64) - self.base
            rows = np.clip(rows, 0, need - 1)
            self.totals += np.bincount(rows, minlength=self.totals.size)
            mine = col >= 0
            if mine.any() and self.ids.size:
                flat = rows[mine] * self.ids.size + col[mine]
                self.counts += np.bincount(flat, minlength=self.counts.size).reshape(
                    self.counts.shape)
        self.done_until = max(self.done_until, step_end)

    def _readings(self, step_end: int) -> None:
        """Every reading whose window is complete by interval ``step_end``."""
        last = step_end // self.per_tick
        if last < self.next_tick:
            return
        ticks = np.arange(self.next_tick, last + 1, dtype=np.int64)
        ends = ticks * self.per_tick
        starts = np.maximum((ends // self.per_slice - SLICES + 1) * self.per_slice, 0)
        k = self.ids.size
        cum = np.zeros((self.totals.size + 1, k), dtype=np.int64)
        np.cumsum(self.counts, axis=0, out=cum[1:])
        cum_total = np.concatenate([[0], np.cumsum(self.totals)])
        e, s = ends - self.base, np.maximum(starts - self.base, 0)
        window = cum[e] - cum[s]
        total = (cum_total[e] - cum_total[s]).astype(np.float64)
        share = window / np.maximum(total, 1.0)[:, None]
        hot = (share >= self.detection.hot_share) & (total >= MIN_HOT_WINDOW_REQUESTS)[:, None]
        before = np.vstack([self.state[None, :], hot[:-1]])
        changed = np.argwhere(hot != before)   # (reading, key), readings in order
        for j, c in changed:
            self._log(float(ticks[j] * self.per_tick * self.delta), int(c), bool(hot[j, c]),
                      float(share[j, c]))
        ever = np.logical_or.accumulate(np.vstack([self.ever[None, :], hot]), axis=0)[1:]
        self.state, self.ever = hot[-1].copy(), ever[-1].copy()
        self.hot_rows = np.vstack([self.hot_rows, hot])
        self.ever_rows = np.vstack([self.ever_rows, ever])
        self.next_tick = last + 1
        # drop what no later reading or request needs
        next_start = max(((self.next_tick * self.per_tick) // self.per_slice - SLICES + 1)
                         * self.per_slice, 0)
        cut = min(max(next_start - self.base, 0), self.totals.size)
        if cut:
            self.totals, self.counts = self.totals[cut:], self.counts[cut:]
            self.base += cut

    def _assign(self, arrival, col, hot, ever) -> None:
        """Each request's state at its reading (arrival less the time to apply)."""
        if arrival.size == 0:
            return
        at = np.floor((arrival - self.detection.apply_s) / self.delta).astype(np.int64)
        tick = np.floor_divide(at, self.per_tick)
        row = tick - self.tick_base
        mine = (col >= 0) & (row >= 0)
        row = np.minimum(row, self.hot_rows.shape[0] - 1)
        hot[mine] = self.hot_rows[row[mine], col[mine]]
        ever[mine] = self.ever_rows[row[mine], col[mine]]
        # keep the readings a later request can still use
        first = int(tick[-1]) - self.tick_base
        if first > 0:
            self.hot_rows, self.ever_rows = self.hot_rows[first:], self.ever_rows[first:]
            self.tick_base += first

    def _log(self, t: float, c: int, hot: bool, share: float) -> None:
        if len(self.actions) >= MAX_ACTIONS:
            self.dropped_actions += 1
            return
        self.actions.append({"t": round(t, 3), "key": self.names[c], "shard": str(self.shards[c]),
                             "action": "hot" if hot else "lifted",
                             "share": round(min(max(share, 0.0), 1.0), 4)})
