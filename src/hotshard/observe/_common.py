"""What every source shares: times of a window, shard ordering, the notes, the result."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from hotshard.errors import InputError
from hotshard.observations import Latency, Observations, ShardObservation

__all__ = ["CPU_SLACK_S", "Notes", "build", "finite", "iso", "natural_key", "parse_time",
           "parse_window", "settle_fraction"]

_RELATIVE = re.compile(r"^(?:now)?\s*-\s*(.+)$")


def parse_time(text: str | float, *, now: float | None = None, what: str = "time") -> float:
    """Unix seconds from RFC 3339 (``2026-12-04T10:00:00Z``, an offset, or no zone: UTC),
    ``now``, a relative time (``-30m``, ``now-1h30m``) or Unix seconds.

    Raises
    ------
    InputError
        Not one of those forms.
    """
    from hotshard.workload.timing import parse_duration

    now = time.time() if now is None else now
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    raw = str(text).strip()
    if raw == "now":
        return now
    relative = _RELATIVE.match(raw)
    if relative:
        try:
            return now - parse_duration(relative.group(1))
        except InputError:
            raise InputError(f"{what} {raw!r}: a relative time is -DURATION such as -30m or "
                             "now-2h") from None
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(raw.replace("z", "Z"))
    except ValueError:
        raise InputError(f"{what} {raw!r} is not a time: give RFC 3339 "
                         "(2026-12-04T10:00:00Z), a relative time (-30m, now-2h), now, or "
                         "Unix seconds") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def parse_window(start: str | float, end: str | float, *, now: float | None = None
                 ) -> tuple[float, float]:
    """(start, end) in Unix seconds, end after start."""
    now = time.time() if now is None else now
    a = parse_time(start, now=now, what="start")
    b = parse_time(end, now=now, what="end")
    if not b > a:
        raise InputError(f"the window is empty: end ({iso(b)}) must come after start "
                         f"({iso(a)})")
    return a, b


def iso(seconds: float) -> str:
    """Unix seconds as RFC 3339 in UTC, to the millisecond."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def natural_key(text: str) -> tuple:
    """Sort key reading digit runs as numbers: shard 2 before 10, port 7000 before 7001."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", text) if part)


class Notes:
    """The notes of one observation: what could not be filled, and why; deduplicated."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, message: str) -> None:
        if message not in self.items:
            self.items.append(message)

    def missing(self, what: str, why: str) -> None:
        self.add(f"{what} left out: {why}")


def finite(value: Any) -> float | None:
    """``value`` as a finite float, else None (NaN, infinities, text)."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def build(label: str, *, source: Mapping[str, Any], notes: Notes,
          shards: Iterable[ShardObservation] = (), latency: Mapping[str, float] | None = None,
          fields: Mapping[str, Any] | None = None) -> Observations:
    """The observations: shards in natural order of their ids, the latency percentiles,
    top-level ``fields``, and ``extra.observe`` = ``source`` plus the notes."""
    ordered = sorted(shards, key=lambda s: natural_key(s.id))
    extra = {"observe": {**source, "notes": list(notes.items)}}
    values = {k: v for k, v in (fields or {}).items() if v is not None}
    return Observations(label=label, shards=tuple(ordered),
                        latency_ms=Latency(**latency) if latency else None,
                        extra=extra, **values)


# CPU seconds a busy fraction's measurement may be off by: CPU-seconds counters advance in clock
# ticks (10 ms: /proc's and os.times()' USER_HZ of 100), one tick at each edge of the span, and
# an exporter reads its counter a few milliseconds after the scrape's timestamp. So one core
# busy all along measures 1 + up to ~0.05 s / span (seen live: 1.0011 over 9 s, 1.01 over 1 s),
# and an idle machine 1 - idle slightly below 0. See ``settle_fraction``.
CPU_SLACK_S = 0.05


def settle_fraction(value: float, slack: float) -> float:
    """A busy fraction measured just outside [0, 1] (by at most ``slack``, the counters'
    resolution over the span) is 1 or 0: one core busy all along, or an idle one, not more
    than a core (which would leave the shard's cpu out) nor less than nothing."""
    if 1 < value <= 1 + slack:
        return 1.0
    if -slack <= value < 0:
        return 0.0
    return value
