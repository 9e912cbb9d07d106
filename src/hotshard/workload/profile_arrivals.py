"""Timestamps with production's rate shape and burstiness (the profile's ``arrivals``).

The run's length is its events over its rate. Two ways to lay the profile's window over it:

- stretched (``generate``): the window is stretched (or shrunk) to the run, so every
  per-minute bin keeps its share of the requests (largest remainder: exactly the run's
  events): a day's curve in an hour's file.
- in real time (``real_time=True``: ``simulate`` and ``drive``, which measure latency): the
  run's minute m is the profile's minute m (from the first; a run longer than the window
  goes round it again), its counts scaled to the run's rate, so every burst keeps the length
  it had. A stretched 10-minute run of an hour's profile turns minute-long swings into
  10-second ones, and a 95%-busy shard's queue answers the difference (measured on the
  incident's hot shard: p99 0.8 s against 2.4 s in real time).

The bursts inside a bin stay at
the time scales they were measured at, because queues respond to seconds, not to fractions
of a window: a bin of the run is first cut evenly into pieces as long as the first cascade
level that fits in it (a minute's bin shrunk to 10 s starts at the 10 s -> 1 s level; one
stretched to 6 minutes is cut into six 1-minute pieces first), then split down the cascade
(Dirichlet-multinomial draws with the profile's concentrations) to 10 ms leaves, then spread
uniformly inside its leaf. The burstiness above the bin's length is what a compressed run
gives up. Each bin is made from its own seed, so the rows of a chunk get the same instants
however the run is cut into chunks or workers.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np
from numba import njit
from numpy.typing import NDArray

from hotshard.profile.arrivals import ArrivalModel
from hotshard.workload._sorting import sort_run
from hotshard.workload.profile_sampler import largest_remainder

__all__ = ["CascadeArrivals"]


_KEPT_BINS = 3  # bins kept made: the chunks that threads make at once span at most these


@dataclass(frozen=True)
class CascadeArrivals:
    """Event times for ``events`` requests at mean ``rate`` shaped by ``model``; the same
    interface as ``scenario.Arrivals`` (``times``, ``seconds_for``, ``describe``)."""

    model: ArrivalModel
    events: int
    rate: float
    seed: int
    real_time: bool = False
    _cum: NDArray[np.int64] = field(init=False, repr=False)
    _stretch: float = field(init=False, repr=False)
    _starts: NDArray[np.float64] = field(init=False, repr=False)
    _widths: NDArray[np.float64] = field(init=False, repr=False)
    _made: dict = field(init=False, repr=False, compare=False)
    _lock: threading.Lock = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        res = self.model.resolution_s
        run = self.events / self.rate
        if self.real_time:
            n_bins = max(1, int(math.ceil(run / res - 1e-9)))
            widths = np.full(n_bins, res)
            widths[-1] = run - (n_bins - 1) * res
            weights = self.model.counts[np.arange(n_bins) % self.model.counts.size] * (
                widths / res)
            if not weights.sum() > 0:  # the run falls in minutes the profile saw empty
                weights = widths.copy()
            stretch = 1.0
        else:
            widths = np.full(self.model.counts.size, res * run / self.model.seconds)
            weights = self.model.counts.astype(np.float64)
            stretch = run / self.model.seconds
        counts = largest_remainder(np.asarray(weights, dtype=np.float64), int(self.events))
        object.__setattr__(self, "_cum", np.concatenate([[0], np.cumsum(counts)]))
        object.__setattr__(self, "_stretch", stretch)
        object.__setattr__(self, "_widths", widths)
        object.__setattr__(self, "_starts", np.concatenate([[0.0], np.cumsum(widths)[:-1]]))
        # the last bins made, kept: a run longer than the profile's span stretches each bin
        # over many chunks (2e9 requests of an hour's profile: 3e7 a bin, 33 chunks), and each
        # chunk would otherwise make its whole bin again
        object.__setattr__(self, "_made", {})
        object.__setattr__(self, "_lock", threading.Lock())

    def __getstate__(self) -> dict:
        """Pickled (to a drive process) without its kept bins and its lock."""
        state = dict(self.__dict__)
        state.pop("_made", None)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        object.__setattr__(self, "_made", {})
        object.__setattr__(self, "_lock", threading.Lock())

    def _bin(self, b: int) -> NDArray[np.float64]:
        """``_bin_times(b)``, made once while chunks are in it (the two latest bins kept)."""
        with self._lock:
            if b in self._made:
                return self._made[b]
        times = self._bin_times(b)
        with self._lock:
            self._made[b] = times
            while len(self._made) > _KEPT_BINS:  # the oldest made goes first
                self._made.pop(next(iter(self._made)))
        return times

    def _bin_times(self, b: int) -> NDArray[np.float64]:
        """Sorted offsets (s from the run's start) of bin ``b``'s requests."""
        n = int(self._cum[b + 1] - self._cum[b])
        width = float(self._widths[b])
        if n == 0:
            return np.zeros(0)
        rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(0xA11, b)))
        levels = [lv for lv in self.model.cascade if lv[0] <= width * (1 + 1e-9)]
        pieces = max(1, int(round(width / levels[0][0]))) if levels else 1
        counts = rng.multinomial(n, np.full(pieces, 1.0 / pieces)).astype(np.int64)
        leaf = width / pieces
        for parent, child, alpha in levels:
            k = int(round(parent / child))
            live = counts > 0
            weights = rng.gamma(alpha, 1.0, size=(int(live.sum()), k))
            weights /= np.maximum(weights.sum(axis=1, keepdims=True), 1e-300)
            weights[~np.isfinite(weights).all(axis=1)] = 1.0 / k  # alpha tiny: all underflow
            split = np.zeros((counts.size, k), dtype=np.int64)
            split[live] = rng.multinomial(counts[live], weights)
            counts = split.reshape(-1)
            leaf = leaf / k
        starts = np.repeat(np.arange(counts.size) * leaf, counts)
        times = starts + rng.random(starts.size) * leaf
        return float(self._starts[b]) + _sorted_in_leaves(times, counts)

    def times(self, rows: NDArray[np.int64], u: NDArray[np.float64] | None = None
              ) -> NDArray[np.float64]:
        """Seconds since the start for the events with these row indices (increasing rows
        get non-decreasing times; ``u`` is unused: the bins draw their own)."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty(rows.size)
        if rows.size == 0:
            return out
        bins = np.searchsorted(self._cum, rows, side="right") - 1
        # each bin's rows as one run: in place when the rows come in order (as a simulation
        # asks, window after window), else through a stable sort of their bins
        order = None if (bins[1:] >= bins[:-1]).all() else np.argsort(bins, kind="stable")
        ordered = bins if order is None else bins[order]
        edges = np.concatenate([[0], np.flatnonzero(ordered[1:] != ordered[:-1]) + 1,
                                [rows.size]])
        for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
            b = int(ordered[lo])
            mine = slice(lo, hi) if order is None else order[lo:hi]
            out[mine] = self._bin(b)[rows[mine] - self._cum[b]]
        return out

    def seconds_for(self, events: int) -> float:
        return self.events / self.rate

    def describe(self) -> dict:
        return {"process": "profile", "rate": self.rate,
                "resolution_s": self.model.resolution_s * self._stretch,
                "cascade": [list(level) for level in self.model.cascade]}


@njit(cache=True)
def _sorted_in_leaves(times: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``np.sort(times)`` when each leaf's times (``counts[i]`` of them, in leaf order) lie in
    that leaf's own interval: only each leaf needs sorting, a few dozen values at a time (a
    leaf is 10 ms: ~30 requests at 3000 req/s), in place. The same array as numpy's sort of
    the whole, measured 2-3x cheaper: that sort was a fifth of a profile-arrivals
    simulation's time."""
    start = 0
    for c in counts:
        sort_run(times, start, start + c)
        start += c
    return times
