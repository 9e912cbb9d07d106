"""Scenarios: arrival times (constant, diurnal, or the profile's own rate) and event overlays.

Times are virtual: event i of a run at rate r is due at start + (i + u_i) / r, u_i uniform, so
any chunk of events can be generated on its own (and on any worker) from its row index alone.
A diurnal curve warps those times through the inverse of its cumulative rate.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hotshard._format import pct
from hotshard.errors import InputError

__all__ = ["Arrivals", "HotEvent", "parse_duration", "parse_event"]

DAY = 86_400.0


_UNIT_SECONDS = {"": 1, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str | float) -> float:
    """'90', '90s', '500ms', '15m', '2h', '1d', and compounds such as '1h30m' or '5m33s' ->
    seconds."""
    if isinstance(text, int | float):
        value = float(text)
    else:
        compact = str(text).replace(" ", "")
        parts = re.findall(r"([0-9]*\.?[0-9]+)(ms|[smhd]?)", compact)
        if not parts or "".join(n + u for n, u in parts) != compact or \
                (len(parts) > 1 and any(not u for _, u in parts)):
            raise InputError(f"not a duration: {text!r} (use e.g. 500ms, 90s, 15m, 2h, 1h30m, 1d)")
        value = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not math.isfinite(value) or value < 0:
        raise InputError(f"durations must be >= 0, got {text!r}")
    return value


def format_duration(seconds: float) -> str:
    """Seconds as the shortest exact-ish duration a person reads: 45s, 10m, 5m33s, 2h, 1h30m."""
    total = int(round(seconds))
    if total < 60:
        return f"{seconds:.3g}s" if total < 10 else f"{total}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if total >= size:
            parts.append(f"{total // size}{unit}")
            total %= size
    return "".join(parts)


@dataclass(frozen=True)
class HotEvent:
    """During [start, end) seconds into the run, ``share`` of all traffic is redirected to
    ``key`` (on top of the traffic the key draws anyway)."""

    key: str
    share: float
    start: float
    end: float

    def apply(self, times: NDArray[np.float64], u: NDArray[np.float64],
              taken: NDArray[np.float64]) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
        """Which events (given their offsets and uniforms) this hot key takes over, and the
        share of each event's uniform now taken by hot events (``taken``, updated)."""
        active = (times >= self.start) & (times < self.end)
        hit = active & (u >= taken) & (u < taken + self.share)
        return hit, taken + self.share * active


def check_overlaps(events: tuple[HotEvent, ...]) -> None:
    """Events that run at the same time must not ask for more than all the traffic.

    Raises
    ------
    InputError
        At some moment the active events' shares add up to more than 1.
    """
    edges = sorted({e.start for e in events} | {e.end for e in events})
    for t in edges:
        active = [e for e in events if e.start <= t < e.end]
        total = sum(e.share for e in active)
        if total > 1.0 + 1e-12:
            keys = ", ".join(f"{e.key} ({e.share:g})" for e in active)
            raise InputError(f"at {format_duration(t)} into the run the events on {keys} ask "
                             f"for {pct(total)} of all traffic: shares of events at the same "
                             "time must add up to at most 1")


def _looks_like_time(text: str) -> bool:
    """Whether a would-be key is only shares and times (a spec with a part too many, such as
    71:0.4:1m:2m:3m), not a key with colons in it (channel:4711)."""
    return bool(re.fullmatch(r"[0-9.%smhd:]+", text))


def parse_event(spec: str) -> HotEvent:
    """KEY:SHARE:START:END, e.g. ``4711:0.4:10m:40m`` (SHARE may be a percentage)."""
    parts = spec.rsplit(":", 3)
    if len(parts) != 4 or not parts[0] or spec.count(":") > 3 and _looks_like_time(parts[0]):
        raise InputError(f"an event must be KEY:SHARE:START:END (e.g. 4711:0.4:10m:40m), "
                         f"got {spec!r}")
    key, share_text, start, end = parts
    try:
        share = float(share_text.rstrip("%")) / (100.0 if share_text.endswith("%") else 1.0)
    except ValueError:
        raise InputError(f"an event's share must be a number in (0, 1], got {share_text!r}") \
            from None
    if not 0.0 < share <= 1.0:
        raise InputError(f"an event's share must be in (0, 1], got {share_text!r}")
    t0, t1 = parse_duration(start), parse_duration(end)
    if t1 <= t0:
        raise InputError(f"an event must end after it starts, got {start}..{end}")
    return HotEvent(key, share, t0, t1)


# Unit-rate arrivals are made in blocks of this many, each from its own seed.
_POISSON_BLOCK = 1 << 16


@dataclass(frozen=True)
class Arrivals:
    """Event times: a Poisson process of mean ``rate`` per second, optionally modulated by a
    diurnal curve: rate(t) = rate * (1 + amplitude * sin(2 pi (t + phase) / day)), amplitude
    in [0, 1).

    With ``events`` given, the process is conditioned on its count: ``events`` independent
    uniform instants in operational time over the run (``seconds_for``), sorted: the order
    statistics of a Poisson process given its count, index of dispersion 1 at every scale
    well below the run. Each block of the run is dealt its count by a binary tree of binomial
    splits and its instants from its own seed (``seed``), so any rows are the same however
    the run is cut into chunks or workers. Without ``events``: evenly paced times
    (row + u) / rate, for callers that know no count.
    """

    rate: float
    diurnal_amplitude: float = 0.0
    diurnal_phase: float = 0.0
    events: int | None = None
    seed: int = 0

    def __post_init__(self):
        if not (math.isfinite(self.rate) and self.rate > 0):
            raise InputError(f"rate must be > 0 events/s, got {self.rate}")
        if not 0.0 <= self.diurnal_amplitude < 1.0:
            raise InputError(f"diurnal amplitude must be in [0, 1), got {self.diurnal_amplitude}")

    def _cumulative(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        a, w = self.diurnal_amplitude, 2.0 * math.pi / DAY
        p = self.diurnal_phase
        return self.rate * (t - a / w * (np.cos(w * (t + p)) - math.cos(w * p)))

    def _locate(self, row: int) -> tuple[int, int, int]:
        """(block, its first row, its count) of ``row``: the run's operational time [0, n)
        is cut into equal blocks and the n arrivals dealt to them by binomial splits down a
        binary tree (each node from its own seed), the exact split of n uniform points, found
        in log2(blocks) draws whatever the row."""
        n = int(self.events or 0)
        lo, hi = 0, max(1, -(-n // _POISSON_BLOCK))
        first, count, node = 0, n, 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            rng = np.random.default_rng(np.random.SeedSequence(self.seed,
                                                               spawn_key=(0xB10C, node)))
            left = int(rng.binomial(count, (mid - lo) / (hi - lo)))
            if row < first + left:
                hi, count, node = mid, left, 2 * node
            else:
                lo, first, count, node = mid, first + left, count - left, 2 * node + 1
        return lo, first, count

    def _poisson_targets(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        """Operational times (expected events before it, on [0, events)) of these rows."""
        n = int(self.events or 0)
        width = n / max(1, -(-n // _POISSON_BLOCK))
        out = np.empty(rows.size)
        done = 0
        order = np.argsort(rows, kind="stable")
        sorted_rows = rows[order]
        while done < rows.size:
            block, first, count = self._locate(int(sorted_rows[done]))
            rng = np.random.default_rng(np.random.SeedSequence(self.seed,
                                                               spawn_key=(0xB10D, block)))
            inner = (block + np.sort(rng.random(count))) * width
            stop = int(np.searchsorted(sorted_rows, first + count, side="left"))
            out[order[done:stop]] = inner[sorted_rows[done:stop] - first]
            done = stop
        return out

    def times(self, rows: NDArray[np.int64], u: NDArray[np.float64]) -> NDArray[np.float64]:
        """Seconds since the start for events with these row indices (u: their uniforms,
        used only without ``events``)."""
        rows = np.asarray(rows, dtype=np.int64)
        # operational time: expected number of events before this one
        target = self._poisson_targets(rows) if self.events else rows + u
        t = target / self.rate
        if self.diurnal_amplitude == 0.0:
            return t
        a, w, p = self.diurnal_amplitude, 2.0 * math.pi / DAY, self.diurnal_phase
        for _ in range(50):  # Newton on the (strictly increasing) cumulative rate
            f = self._cumulative(t) - target
            step = f / (self.rate * (1.0 + a * np.sin(w * (t + p))))
            t = t - step
            if np.max(np.abs(step)) < 1e-7:
                break
        return t

    def seconds_for(self, events: int) -> float:
        """When the run of ``events`` events ends (the expected time of the last one)."""
        if not self.diurnal_amplitude:
            return float(max(events, 1)) / self.rate
        plain = Arrivals(self.rate, self.diurnal_amplitude, self.diurnal_phase)
        return float(plain.times(np.array([max(events - 1, 0)]), np.array([1.0]))[0])

    def describe(self) -> dict:
        return {"rate": self.rate, "diurnal_amplitude": self.diurnal_amplitude}
