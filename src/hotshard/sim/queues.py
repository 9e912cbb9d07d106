"""Per-shard FIFO queues in virtual time: ``serve`` turns arrival and service times into starts
and finishes.

Functions take arrays and draw nothing: the caller owns the randomness (arrival process,
service-time model, keys) and so the seed. Three paths compute the same first-in first-out
queue:

* one worker, no coalescing: the Lindley recursion, vectorized in numpy (cumulative sums and a
  running minimum; no Python loop);
* several workers: earliest-free-worker (Kiefer-Wolfowitz), compiled with numba, a binary heap of
  worker free times;
* coalescing of identical in-flight reads, on any number of workers: the same compiled loop with
  a dictionary key -> finish time of the key's in-flight leader.

numba is imported, and the loop compiled (or loaded from numba's on-disk cache), the first time
a path needs it, so the single-worker path and ``import hotshard.sim.queues`` never pay for it.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hotshard.errors import InputError

__all__ = ["QueueLengthStats", "Served", "ShardQueue", "serve"]

Seconds = NDArray[np.float64]

# The key -> leader dictionary is swept of finished leaders whenever it reaches this many
# entries (or twice the live entries after the last sweep), so its memory follows the number
# of keys in flight, not the number of distinct keys ever read.
_SWEEP_AT = 1024


@dataclass(frozen=True)
class QueueLengthStats:
    """Queue lengths over the window [0, duration], from the exact step functions.

    ``in_system`` counts requests that have arrived and not finished (waiting or in service);
    ``waiting`` counts those that have arrived and not started (the queue proper, plus coalesced
    reads waiting on their leader). Means are time averages over the window, maxima the largest
    value reached inside it.
    """

    duration: float
    mean_in_system: float
    max_in_system: int
    mean_waiting: float
    max_waiting: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, eq=False)
class Served:
    """The fate of every request of one shard, in arrival order (virtual seconds).

    Attributes
    ----------
    arrival, service : the inputs (service is the work each request would need).
    start : when a worker took the request; for a coalesced read, its leader's finish (it
        waited all the way and did no work, so ``start == finish``).
    finish : when the request completed (a coalesced read: when its leader completed).
    coalesced : True for reads that joined an identical in-flight read and did no work.
    workers : workers of the shard.
    """

    arrival: Seconds
    service: Seconds
    start: Seconds
    finish: Seconds
    coalesced: NDArray[np.bool_]
    workers: int

    def sojourn(self) -> Seconds:
        """Time in the shard per request: finish - arrival (the latency the client sees)."""
        return self.finish - self.arrival

    def wait(self) -> Seconds:
        """Time queued before a worker took the request: start - arrival."""
        return self.start - self.arrival

    def busy_time(self) -> float:
        """Total service time the workers actually performed (coalesced reads did none)."""
        return float(np.sum(self.service, where=~self.coalesced))

    def utilisation(self, duration: float) -> float:
        """Share of the workers' capacity used inside [0, duration] (1.0 = all busy throughout).

        Counts only the work done inside the window (service that runs past ``duration`` is cut
        there), divided by ``workers * duration``.
        """
        end = _window(duration)
        worked = np.clip(self.finish, 0.0, end) - np.clip(self.start, 0.0, end)
        return float(np.sum(worked, where=~self.coalesced)) / (self.workers * end)

    def queue_length_stats(self, duration: float) -> QueueLengthStats:
        """Time-average and maximum number in system and number waiting over [0, duration].

        Parameters
        ----------
        duration : float
            End of the observation window, in virtual seconds (> 0). Requests still present at
            ``duration`` count until then; requests arriving after it do not count.

        Returns
        -------
        QueueLengthStats

        Notes
        -----
        N(t) = #{arrival <= t} - #{finish <= t} is a step function; its integral over the
        window is exactly the sum over requests of the part of [arrival, finish) inside the
        window, so the mean is that sum over ``duration`` (exact for any window; not Little's
        law, which only holds in the long run). N jumps up only at arrivals, so its maximum is
        the largest of (i + 1) - #{finish <= arrival_i} over arrivals inside the window; a
        departure at the same instant as an arrival is counted first. The waiting count is the
        same with ``start`` in place of ``finish``.
        """
        end = _window(duration)
        arrival = np.clip(self.arrival, 0.0, end)
        in_system = float(np.sum(np.clip(self.finish, 0.0, end) - arrival)) / end
        waiting = float(np.sum(np.clip(self.start, 0.0, end) - arrival)) / end
        return QueueLengthStats(duration=end, mean_in_system=in_system,
                                max_in_system=self._max_present(self.finish, end),
                                mean_waiting=waiting,
                                max_waiting=self._max_present(self.start, end))

    def _max_present(self, leave: Seconds, end: float) -> int:
        """Largest #{arrival <= t} - #{leave <= t} over t in [0, end] (leave: finish or start)."""
        m = int(np.searchsorted(self.arrival, end, side="right"))
        if m == 0:
            return 0
        arrived = np.arange(1, m + 1)
        left = np.searchsorted(np.sort(leave), self.arrival[:m], side="right")
        return int(np.max(arrived - left))


def serve(arrivals: ArrayLike, service: ArrayLike, workers: int = 1,
          keys: ArrayLike | None = None, coalesce: ArrayLike | None = None) -> Served:
    """Serve one shard's requests first-in first-out on ``workers`` identical workers.

    Parameters
    ----------
    arrivals : array of float, shape (n,)
        Arrival times in virtual seconds, sorted (non-decreasing), finite and >= 0.
    service : array of float, shape (n,)
        Work each request needs, in seconds (finite, >= 0).
    workers : int
        Workers (cores) serving the shard's single FIFO queue, >= 1.
    keys : array of int, shape (n,), optional
        Each request's key (integers, e.g. key ids). Enables coalescing.
    coalesce : array of bool, shape (n,), optional
        Which requests may coalesce (reads). Needs ``keys``; with ``keys`` and no ``coalesce``
        every request may.

    Returns
    -------
    Served
        Start and finish times per request, which requests coalesced, and helpers (sojourn,
        wait, busy time, utilisation, queue lengths).

    Raises
    ------
    InputError
        Lengths differ, arrivals unsorted/negative/non-finite, a service time negative or not
        finite, ``workers`` not an integer >= 1, ``keys`` not integers, ``coalesce`` without
        ``keys``.

    Notes
    -----
    One worker (Lindley 1952): the wait of request k is W(k) = max(0, W(k-1) + S(k-1) -
    (A(k) - A(k-1))), W(0) = 0. Unrolled, W(k) = P(k) - min_{j<=k} P(j) with
    P(k) = S(0) + ... + S(k-1) - A(k): a cumulative sum and a running minimum (numpy). Rounding
    of the cumulative sum is at most about k * 2**-53 * P(k) seconds (sub-microsecond for
    hours of simulated time).

    Several workers (Kiefer & Wolfowitz 1955): in FIFO order each request goes to the worker
    that frees up first and starts at max(arrival, that worker's free time); the free times are
    kept in a binary heap, O(n log workers).

    Coalescing: a coalescible request that arrives while a coalescible request for the same key
    is in flight (arrived, not yet finished: its finish is later than this arrival) does no
    work and finishes when that one does. Every other request queues as usual, and a
    coalescible one that queues becomes its key's leader. Under FIFO a request's finish is
    fixed when it arrives (it depends only on earlier requests), so one pass over the arrivals
    in order is the exact event simulation: no departure events are needed.
    """
    arrival, work = _requests(arrivals, service)
    n = arrival.size
    workers = _workers(workers)
    key_ids, may_coalesce = _coalescing(keys, coalesce, n)

    if key_ids is None and workers == 1:
        start, finish = _lindley(arrival, work)
        coalesced = np.zeros(n, dtype=bool)
    else:
        start, finish, coalesced = _events(arrival, work, workers, key_ids, may_coalesce)
    return Served(arrival=arrival, service=work, start=start, finish=finish,
                  coalesced=coalesced, workers=workers)


class ShardQueue:
    """One shard's FIFO queue over a run cut into windows of consecutive arrivals.

    ``serve`` takes one window's requests at a time and the queue continues exactly where the
    previous window left it: the workers' free times (requests still in service or waiting
    at the edge finish when they would have), the coalescible reads still in flight, and the
    queue-length counts. Starts and finishes are bit for bit those of one compiled pass over
    the whole run (``_events``), whatever the windows, so a day can be simulated in windows
    of minutes. The statistics of the whole run (utilisation, queue lengths over [0,
    ``horizon``]) accumulate as the windows pass; the state kept between windows is the
    workers, the leaders in flight and the finish and start times of the requests still in
    the shard (so it grows only with a backlog, never with the number of windows).
    """

    def __init__(self, horizon: float, workers: int = 1):
        self.workers = _workers(workers)
        self.horizon = _window(horizon)
        self.requests = 0
        self.coalesced = 0
        self._free = np.zeros(self.workers)
        self._leaders = _NO_LEADERS
        self._last = 0.0
        self._busy = self._in_system = self._waiting = 0.0
        self._arrived = 0
        self._present = {"finish": _Present(), "start": _Present()}

    def serve(self, arrivals: ArrayLike, service: ArrayLike, keys: ArrayLike | None = None,
              coalesce: ArrayLike | None = None) -> Served:
        """Serve the next window's requests (arrivals sorted, none before the previous
        window's last); the same parameters as ``serve``. Returns the window's ``Served``."""
        arrival, work = _requests(arrivals, service)
        n = arrival.size
        if n and arrival[0] < self._last:
            raise InputError(f"arrivals must continue the previous window's: {arrival[0]} "
                             f"comes before {self._last}")
        key_ids, may_coalesce = _coalescing(keys, coalesce, n)
        start, finish, coalesced, self._leaders = _events_from(
            arrival, work, self.workers, key_ids, may_coalesce, self._free, self._leaders)
        if n:
            self._last = float(arrival[-1])
            self._account(arrival, start, finish, coalesced)
        return Served(arrival=arrival, service=work, start=start, finish=finish,
                      coalesced=coalesced, workers=self.workers)

    def _account(self, arrival, start, finish, coalesced) -> None:
        """Add the window's work and queue lengths to the run's (see
        ``Served.queue_length_stats``: the same sums, cut at the horizon)."""
        end = self.horizon
        self.requests += int(arrival.size)
        self.coalesced += int(coalesced.sum())
        came = np.minimum(arrival, end)
        done = np.minimum(finish, end)
        began = np.minimum(start, end)
        self._busy += float(np.sum(done - began, where=~coalesced))
        self._in_system += float(np.sum(done - came))
        self._waiting += float(np.sum(began - came))
        inside = int(np.searchsorted(arrival, end, side="right"))
        for name, leave in (("finish", finish), ("start", start)):
            self._present[name].add(arrival, inside, leave, self._arrived)
        self._arrived += inside

    def utilisation(self) -> float:
        """Share of the workers' capacity used over [0, horizon] (see
        ``Served.utilisation``)."""
        return self._busy / (self.workers * self.horizon)

    def queue_length_stats(self) -> QueueLengthStats:
        """Time-average and maximum numbers in system and waiting over [0, horizon] (see
        ``Served.queue_length_stats``)."""
        end = self.horizon
        return QueueLengthStats(duration=end, mean_in_system=self._in_system / end,
                                max_in_system=self._present["finish"].most,
                                mean_waiting=self._waiting / end,
                                max_waiting=self._present["start"].most)


class _Present:
    """The largest #{arrival <= t} - #{leave <= t} over the windows so far: the leave times
    (finish or start) not yet passed by an arrival are carried to the next window."""

    def __init__(self):
        self.most = 0
        self.gone = 0   # requests that left at or before the last arrival seen
        self.pending = np.empty(0)   # sorted leave times after it

    def add(self, arrival: Seconds, inside: int, leave: Seconds, arrived: int) -> None:
        # both runs sorted already or nearly (FIFO): timsort merges them in linear time
        leaves = np.sort(np.concatenate([self.pending, leave]), kind="stable")
        most, k = _compiled_present()(leaves, arrival, inside, arrived - self.gone)
        self.most = max(self.most, int(most))
        self.gone += int(k)
        self.pending = leaves[k:]


@functools.cache
def _compiled_present():
    from numba import njit

    return njit(cache=True, nogil=True)(_most_present)


def _most_present(leaves, arrival, inside, base):  # pragma: no cover - runs compiled
    """(largest base + (i + 1) - #{leaves <= arrival[i]} over the first ``inside`` arrivals,
    #{leaves <= the last arrival}): one merge of two sorted runs."""
    j = 0
    m = leaves.size
    most = 0
    for i in range(inside):
        a = arrival[i]
        while j < m and leaves[j] <= a:
            j += 1
        present = base + i + 1 - j
        if present > most:
            most = present
    if arrival.size:
        a = arrival[arrival.size - 1]
        while j < m and leaves[j] <= a:
            j += 1
    return most, j


def _requests(arrivals: ArrayLike, service: ArrayLike) -> tuple[Seconds, Seconds]:
    """(arrival, service) times checked: finite, sorted arrivals, service times >= 0, one
    for each arrival (``serve`` and each window of ``ShardQueue.serve`` alike)."""
    arrival = _seconds(arrivals, "arrivals")
    work = _seconds(service, "service")
    if work.size != arrival.size:
        raise InputError(f"service must have one time per arrival: got {work.size} service "
                         f"times for {arrival.size} arrivals")
    _check_arrivals(arrival)
    _check_service(work)
    return arrival, work


def _workers(workers) -> int:
    if isinstance(workers, bool) or not isinstance(workers, Integral) or workers < 1:
        raise InputError(f"workers must be an integer >= 1, got {workers!r}")
    return int(workers)


def _seconds(values: ArrayLike, name: str) -> Seconds:
    """``values`` as a 1-D float64 array (no copy when it already is one)."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be numbers (seconds): {exc}") from None
    if array.ndim != 1:
        raise InputError(f"{name} must be a 1-D array of seconds, got shape {array.shape}")
    return array


def _check_arrivals(arrival: Seconds) -> None:
    """Sorted, finite and >= 0 (sorted with finite ends implies all finite; NaN breaks order)."""
    if arrival.size == 0:
        return
    if not (arrival[0] >= 0 and np.isfinite(arrival[0])):
        raise InputError(f"arrivals must be finite and >= 0 (virtual time starts at 0), "
                         f"got arrivals[0] = {arrival[0]}")
    ordered = arrival[1:] >= arrival[:-1]
    if not ordered.all():
        i = int(np.argmin(ordered)) + 1
        raise InputError(f"arrivals must be sorted (non-decreasing) and finite: "
                         f"arrivals[{i}] = {arrival[i]} after arrivals[{i - 1}] = "
                         f"{arrival[i - 1]}")
    if not np.isfinite(arrival[-1]):
        raise InputError(f"arrivals must be finite, got arrivals[{arrival.size - 1}] = "
                         f"{arrival[-1]}")


def _check_service(work: Seconds) -> None:
    """Finite and >= 0 (min catches negatives and NaN, a finite sum rules out infinities)."""
    if work.size and not (work.min() >= 0 and np.isfinite(work.sum())):
        i = int(np.flatnonzero(~((work >= 0) & np.isfinite(work)))[0])
        raise InputError(f"service times must be finite and >= 0, got service[{i}] = {work[i]}")


def _coalescing(keys: ArrayLike | None, coalesce: ArrayLike | None,
                n: int) -> tuple[NDArray[np.int64] | None, NDArray[np.bool_] | None]:
    """Validated (keys as int64, coalesce mask as bool), or (None, None) without keys."""
    if keys is None:
        if coalesce is not None:
            raise InputError("coalesce needs keys: give each request's key to coalesce reads")
        return None, None
    key_ids = np.asarray(keys)
    if key_ids.ndim != 1 or key_ids.size != n:
        raise InputError(f"keys must have one key per arrival: got shape {key_ids.shape} for "
                         f"{n} arrivals")
    if key_ids.size and not np.issubdtype(key_ids.dtype, np.integer):
        raise InputError(f"keys must be integers (map other keys to ids first), got dtype "
                         f"{key_ids.dtype}")
    if key_ids.dtype == np.uint64 and key_ids.size and key_ids.max() > np.iinfo(np.int64).max:
        raise InputError("keys must fit in a signed 64-bit integer")
    key_ids = key_ids.astype(np.int64, copy=False)
    if coalesce is None:
        return key_ids, np.ones(n, dtype=bool)
    mask = np.asarray(coalesce)
    if mask.ndim != 1 or mask.size != n:
        raise InputError(f"coalesce must have one flag per arrival: got shape {mask.shape} "
                         f"for {n} arrivals")
    if mask.size and mask.dtype != np.bool_:
        raise InputError(f"coalesce must be a boolean mask (True = may coalesce, e.g. a read), "
                         f"got dtype {mask.dtype}")
    return key_ids, mask.astype(bool, copy=False)


def _window(duration: float) -> float:
    """A window length as a float, > 0 and finite."""
    if isinstance(duration, bool) or not isinstance(duration, Real) or not (
            0 < duration < np.inf):
        raise InputError(f"duration must be a finite number of seconds > 0, got {duration!r}")
    return float(duration)


def _lindley(arrival: Seconds, work: Seconds) -> tuple[Seconds, Seconds]:
    """(start, finish) of one FIFO worker: the Lindley recursion as cumsum + running minimum."""
    n = arrival.size
    start = np.empty(n)
    if n == 0:
        return start, np.empty(0)
    start[0] = 0.0
    np.cumsum(work[:-1], out=start[1:])      # S(0) + ... + S(k-1)
    start -= arrival                          # P(k) (up to the constant A(0))
    finish = np.minimum.accumulate(start)     # min_{j<=k} P(j); the buffer becomes finish
    start -= finish                           # W(k) = P(k) - min_{j<=k} P(j) >= 0
    start += arrival
    np.add(start, work, out=finish)
    return start, finish


def _events(arrival: Seconds, work: Seconds, workers: int, keys: NDArray[np.int64] | None,
            may_coalesce: NDArray[np.bool_] | None) -> tuple[Seconds, Seconds, NDArray[np.bool_]]:
    """(start, finish, coalesced) from the compiled earliest-free-worker loop, idle at first."""
    start, finish, coalesced, _ = _events_from(arrival, work, workers, keys, may_coalesce,
                                               np.zeros(workers), _NO_LEADERS)
    return start, finish, coalesced


_NO_LEADERS = (np.empty(0, dtype=np.int64), np.empty(0))


def _events_from(arrival: Seconds, work: Seconds, workers: int,
                 keys: NDArray[np.int64] | None, may_coalesce: NDArray[np.bool_] | None,
                 free: Seconds, leaders: tuple[NDArray[np.int64], Seconds]
                 ) -> tuple[Seconds, Seconds, NDArray[np.bool_], tuple[NDArray[np.int64],
                                                                       Seconds]]:
    """``_events`` continuing a queue: ``free`` holds the workers' free times as a heap and is
    updated in place; ``leaders`` are the (keys, finishes) of coalescible reads in flight from
    before. Returns the outputs and the leaders still in flight after the last arrival."""
    n = arrival.size
    start, finish = np.empty(n), np.empty(n)
    coalesced = np.zeros(n, dtype=bool)
    use_keys = keys is not None
    if not use_keys:
        keys, may_coalesce = _NO_LEADERS[0], np.empty(0, dtype=bool)
    contiguous = np.ascontiguousarray  # one compiled signature whatever the callers' strides
    live = _compiled()(contiguous(arrival), contiguous(work), workers, contiguous(keys),
                       contiguous(may_coalesce), use_keys, start, finish, coalesced, free,
                       contiguous(leaders[0]), contiguous(leaders[1]))
    return start, finish, coalesced, live


@functools.cache
def _compiled():
    """``_fifo_events`` compiled by numba (imported here: ~0.3 s, paid only by this path)."""
    from numba import njit

    return njit(cache=True, nogil=True)(_fifo_events)


def _fifo_events(arrival, work, workers, keys, may_coalesce, use_keys, start, finish,
                 coalesced, free, carried_keys, carried_done):  # pragma: no cover - compiled
    """FIFO over a min-heap of worker free times (``free``, updated in place), with exact
    coalescing; fills the outputs and returns the leaders still in flight at the last
    arrival (keys, finishes), for the next window."""
    leader = dict()                   # key -> finish of its in-flight coalescible leader
    leader[np.int64(0)] = -np.inf     # (types the dictionary: int64 -> float64)
    for i in range(carried_keys.size):
        leader[carried_keys[i]] = carried_done[i]
    sweep_at = max(_SWEEP_AT, 2 * len(leader))
    for i in range(arrival.size):
        a = arrival[i]
        joins = use_keys and may_coalesce[i]
        if joins:
            done = leader.get(keys[i], -np.inf)
            if done > a:              # an identical read is in flight: wait for it, no work
                start[i] = done
                finish[i] = done
                coalesced[i] = True
                continue
        top = free[0]
        begin = a if a > top else top
        end = begin + work[i]
        start[i] = begin
        finish[i] = end
        j = 0                         # replace the heap's root by `end` and sift it down
        while True:
            child = 2 * j + 1
            if child >= workers:
                break
            if child + 1 < workers and free[child + 1] < free[child]:
                child += 1
            if free[child] >= end:
                break
            free[j] = free[child]
            j = child
        free[j] = end
        if joins:
            leader[keys[i]] = end
            if len(leader) >= sweep_at:   # forget leaders finished by now (arrivals only grow)
                live = dict()
                live[np.int64(0)] = -np.inf
                for key, done in leader.items():
                    if done > a:
                        live[key] = done
                leader = live
                sweep_at = max(_SWEEP_AT, 2 * len(leader))
    last = arrival[arrival.size - 1] if arrival.size else -np.inf
    count = 0
    for done in leader.values():
        if done > last:
            count += 1
    out_keys = np.empty(count, dtype=np.int64)
    out_done = np.empty(count)
    j = 0
    for key, done in leader.items():
        if done > last:
            out_keys[j] = key
            out_done[j] = done
            j += 1
    return out_keys, out_done
