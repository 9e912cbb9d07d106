"""The hottest keys of the last few seconds: the sketch behind ``serve``'s ``GET /hotkeys`` and
its hot channels (``channels: "hot"``), and the detector its mitigations are modelled and scored
by (``detect.score``).

``SpaceSaving`` is one Space-Saving sketch (Metwally, Agrawal and El Abbadi, "Efficient
computation of frequent and top-k elements in data streams", ICDT 2005): ``capacity`` counters,
each an overestimate of its key's count with a known error. ``SlidingHotKeys`` keeps a ring of
such sketches, one per slice of the window, drops slices as they expire and merges the live
ones when asked, so memory is ``slices * capacity`` counters whatever the traffic.
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hotshard.errors import InputError

__all__ = ["HotKey", "HotKeys", "SlidingHotKeys", "SpaceSaving"]


def _check_int(name: str, value: object, lo: int) -> int:
    """``value`` as an int >= ``lo``, else InputError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name} must be an integer, got {value!r}")
    if value < lo:
        raise InputError(f"{name} must be >= {lo}, got {value}")
    return value


@dataclass(frozen=True)
class HotKey:
    """One hot key: ``count - error <= true count <= count`` over the window."""

    key: str
    count: int
    error: int
    share: float

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "count": self.count, "error": self.error, "share": self.share}


@dataclass(frozen=True)
class HotKeys:
    """The top keys of a window, descending ``count``, with the bound that holds for them.

    ``error_bound`` bounds every key's overestimate, and every key whose true count exceeds it
    is a candidate; ``complete`` says whether all candidates that could be such a key (estimate
    above ``error_bound``) made it into ``keys``, or the list was cut short by ``k``.
    """

    keys: tuple[HotKey, ...]
    total: int
    window_s: float
    capacity: int
    error_bound: int
    complete: bool = True

    def guarantee(self) -> str:
        """The promise of this result in plain words."""
        b = self.error_bound
        text = (f"Each count may overstate the key's true number of requests in the last "
                f"{self.window_s:g} s by at most its error (never by more than {b}), and never "
                f"understates it.")
        if self.complete:
            return text + f" Every key with more than {b} requests in the window is listed."
        return text + (f" Only the top {len(self.keys)} are listed; more keys may have over "
                       f"{b} requests.")

    def to_dict(self) -> dict[str, Any]:
        return {"keys": [k.to_dict() for k in self.keys], "total": self.total,
                "window_s": self.window_s, "capacity": self.capacity,
                "error_bound": self.error_bound, "complete": self.complete,
                "guarantee": self.guarantee()}


class SpaceSaving:
    """One Space-Saving sketch: the approximate heaviest keys of a stream in fixed memory.

    Parameters
    ----------
    capacity : int
        Number of counters, >= 1.

    Raises
    ------
    InputError
        If ``capacity`` is not an integer >= 1.

    Notes
    -----
    A new key that finds the sketch full takes over the smallest counter ``m``: its count
    becomes ``m + c`` and its error ``m``. Counters always sum to ``total``, so ``m <=
    total / capacity``; each count overestimates its key's true count by at most its error
    (which is at most ``m``), and any key not monitored has a true count of at most ``m``
    (Metwally et al. 2005, Lemmas 3.3-3.4). The counters live in a dict; the smallest is found
    with a min-heap holding one entry per key whose value may lag behind the key's count
    (counts only grow), refreshed lazily when it reaches the top, so an add costs O(1) for a
    monitored key and amortised O(log capacity) for an eviction.
    """

    __slots__ = ("_capacity", "_counts", "_errors", "_evicted", "_heap", "_total")

    def __init__(self, capacity: int) -> None:
        self._capacity = _check_int("capacity", capacity, 1)
        self._counts: dict[str, int] = {}
        self._errors: dict[str, int] = {}
        self._heap: list[tuple[int, str]] = []
        self._total = 0
        self._evicted = False

    @property
    def capacity(self) -> int:
        """Number of counters."""
        return self._capacity

    @property
    def total(self) -> int:
        """Sum of all counts added."""
        return self._total

    @property
    def floor(self) -> int:
        """Upper bound on the true count of any key not monitored: the smallest counter if full.

        Returns
        -------
        int
            0 until a key is first evicted (every count is then exact), afterwards the
            smallest counter, which is at most ``total // capacity``.
        """
        if not self._evicted:
            return 0
        return self._min()[0]

    def _min(self) -> tuple[int, str]:
        """The smallest counter and its key, refreshing stale heap entries on the way."""
        heap, counts = self._heap, self._counts
        while True:
            value, key = heap[0]
            actual = counts[key]
            if actual == value:
                return value, key
            heapq.heapreplace(heap, (actual, key))

    def add(self, key: str, count: int = 1) -> None:
        """Count ``count`` more occurrences of ``key``.

        Parameters
        ----------
        key : str
            The key (a channel name).
        count : int, optional
            Occurrences to add, >= 1.

        Raises
        ------
        InputError
            If ``count`` is below 1.
        """
        if count < 1:
            raise InputError(f"count must be >= 1, got {count}")
        self._total += count
        counts = self._counts
        current = counts.get(key)
        if current is not None:
            counts[key] = current + count
            return
        if len(counts) < self._capacity:
            counts[key] = count
            self._errors[key] = 0
            heapq.heappush(self._heap, (count, key))
            return
        smallest, victim = self._min()
        self._evicted = True
        del counts[victim], self._errors[victim]
        counts[key] = smallest + count
        self._errors[key] = smallest
        heapq.heapreplace(self._heap, (smallest + count, key))

    def _rows(self) -> list[tuple[str, int, int]]:
        """Monitored keys as ``(key, count, error)``, unordered."""
        errors = self._errors
        return [(key, count, errors[key]) for key, count in self._counts.items()]

    def items(self) -> list[tuple[str, int, int]]:
        """Monitored keys as ``(key, count, error)``, descending count (ties by key)."""
        rows = self._rows()
        rows.sort(key=lambda r: (-r[1], r[0]))
        return rows


class SlidingHotKeys:
    """Top keys over a sliding time window, from a ring of Space-Saving sketches.

    Parameters
    ----------
    window_s : float, optional
        Window length in seconds, > 0.
    slices : int, optional
        Sub-windows (one sketch each), >= 1; the window moves in steps of ``window_s / slices``.
    capacity : int, optional
        Counters per sketch, >= 1.
    clock : callable, optional
        Monotonic seconds, read only when a call passes no ``now``.

    Raises
    ------
    InputError
        If a parameter is out of range.

    Notes
    -----
    Time is cut into slices ``[i * w, (i + 1) * w)`` with ``w = window_s / slices``; the window
    at time ``now`` is the ``slices`` latest slices, so a request counts for between
    ``window_s - w`` and ``window_s`` seconds. Adds for a slice already expired are ignored.
    Merging the live sketches sums each key's counts and errors, a sketch where the key is not
    monitored contributing its ``floor`` to both (the standard merge of Space-Saving
    summaries), so every merged count is still an overestimate and ``count - error`` a lower
    bound. The merged error of any key, and the true count of any key monitored nowhere, is at
    most ``error_bound = sum of the floors <= sum_i ceil(total_i / capacity)``.
    All methods hold one lock, so threads and an event loop may share an instance.
    """

    def __init__(self, *, window_s: float = 10.0, slices: int = 10, capacity: int = 256,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(window_s, bool) or not isinstance(window_s, int | float) \
                or not math.isfinite(window_s) or window_s <= 0:
            raise InputError(f"window_s must be a finite number > 0, got {window_s!r}")
        self._slices = _check_int("slices", slices, 1)
        self._capacity = _check_int("capacity", capacity, 1)
        if not callable(clock):
            raise InputError(f"clock must be callable, got {clock!r}")
        self._window_s = float(window_s)
        self._width = self._window_s / self._slices
        self._clock = clock
        self._lock = threading.Lock()
        self._sketches: dict[int, SpaceSaving] = {}
        self._head: int | None = None  # index of the newest slice seen
        self._current: SpaceSaving | None = None  # its sketch, for the fast path

    @property
    def window_s(self) -> float:
        """The window's length, seconds."""
        return self._window_s

    def _slice(self, now: float | None) -> int:
        """Slice index of ``now`` (the clock's time if None)."""
        if now is None:
            now = self._clock()
        try:
            return int(now // self._width)
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"now must be a finite time in seconds, got {now!r}") from None

    def _advance(self, index: int) -> None:
        """Move the window's head to slice ``index`` if newer, dropping expired slices."""
        if self._head is not None and index <= self._head:
            return
        self._head = index
        self._current = None
        oldest = index - self._slices + 1
        for i in [i for i in self._sketches if i < oldest]:
            del self._sketches[i]

    def add(self, key: str, *, now: float | None = None) -> None:
        """Count one request for ``key`` at time ``now`` (seconds on the clock's scale)."""
        index = self._slice(now)
        with self._lock:
            if index == self._head and self._current is not None:
                self._current.add(key)
                return
            self._advance(index)
            assert self._head is not None
            if index <= self._head - self._slices:
                return  # already expired
            sketch = self._sketches.get(index)
            if sketch is None:
                sketch = self._sketches[index] = SpaceSaving(self._capacity)
            if index == self._head:
                self._current = sketch
            sketch.add(key)

    def _merged(self, now: float | None) -> tuple[list[tuple[str, int, int]], int, int]:
        """Merged ``(key, count, error)`` of the live slices, descending count; total; bound."""
        index = self._slice(now)
        with self._lock:
            self._advance(index)  # a ``now`` behind the head reads the head's window
            live = list(self._sketches.values())
            floors = [s.floor for s in live]
            bound = sum(floors)
            total = sum(s.total for s in live)
            merged: dict[str, list[int]] = {}
            for sketch, floor in zip(live, floors, strict=True):
                for key, count, error in sketch._rows():
                    acc = merged.get(key)
                    if acc is None:
                        acc = merged[key] = [bound, bound]
                    acc[0] += count - floor
                    acc[1] += error - floor
        rows = [(key, c, e) for key, (c, e) in merged.items()]
        rows.sort(key=lambda r: (-r[1], r[2], r[0]))
        return rows, total, bound

    def top(self, k: int = 10, *, now: float | None = None) -> HotKeys:
        """The ``k`` keys with the largest estimated counts in the window ending at ``now``.

        Parameters
        ----------
        k : int, optional
            Keys to report, >= 1.
        now : float, optional
            Current time in seconds; the clock's if None.

        Returns
        -------
        HotKeys
            Keys by descending count with their errors and shares, the window's total and
            ``error_bound``: every count is within it of the truth, and every key with a true
            count above it is reported when ``complete`` is true.

        Raises
        ------
        InputError
            If ``k`` is not an integer >= 1 or ``now`` is not a finite number.
        """
        _check_int("k", k, 1)
        rows, total, bound = self._merged(now)
        keys = tuple(HotKey(key, c, e, c / total) for key, c, e in rows[:k])
        complete = len(rows) <= k or rows[k][1] <= bound
        return HotKeys(keys=keys, total=total, window_s=self._window_s,
                       capacity=self._capacity, error_bound=bound, complete=complete)

    def hot(self, min_share: float, *, now: float | None = None) -> list[str]:
        """Keys whose guaranteed share of the window, ``(count - error) / total``, is >= min_share.

        Parameters
        ----------
        min_share : float
            Share of the window's requests, in (0, 1].
        now : float, optional
            Current time in seconds; the clock's if None.

        Returns
        -------
        list of str
            Keys by descending guaranteed count; each truly has at least ``min_share`` of the
            window's requests. Empty for an empty window.

        Raises
        ------
        InputError
            If ``min_share`` is not in (0, 1].
        """
        if isinstance(min_share, bool) or not isinstance(min_share, int | float) \
                or not 0 < min_share <= 1:
            raise InputError(f"min_share must be in (0, 1], got {min_share!r}")
        shares = self.shares(now=now)
        return [key for key, share in shares.items() if share >= min_share]

    def shares(self, *, now: float | None = None, min_total: int = 1) -> dict[str, float]:
        """Every monitored key's guaranteed share of the window, ``(count - error) / total``,
        by descending guaranteed count (ties by key); empty for a window of fewer than
        ``min_total`` requests (a share of a handful says nothing)."""
        rows, total, _ = self._merged(now)
        if total <= 0 or total < min_total:
            return {}
        sure = sorted(((c - e, key) for key, c, e in rows), key=lambda r: (-r[0], r[1]))
        return {key: sure_count / total for sure_count, key in sure}
