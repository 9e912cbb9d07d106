"""What a time column's numbers mean: their unit, and the tick they were written at.

Logs write time as timestamps, ISO text, or numbers: epoch seconds (web servers, many KV
traces), milliseconds (JavaScript, Kafka, most JSON logs), microseconds or nanoseconds. A
number's unit is read from its magnitude, because the ranges of the plausible units do not
overlap: epoch seconds of any date from 1973 to 5138 lie in [1e8, 1e11), the same instants in
milliseconds in [1e11, 1e14), in microseconds in [1e14, 1e17), in nanoseconds beyond. Times
counted from a trace's own start (cloudphysics' ``time``: seconds since the trace began) are
small numbers and read as seconds; a trace of relative milliseconds is the one case the
magnitude cannot tell, and ``--time-unit`` says it.

The *tick* is the resolution the times were written at: whole seconds in a web server's log,
milliseconds in most JSON. Below it a trace holds no information about when requests came
(every request of a second is stamped at its start), so no burstiness may be fitted there:
``profile.arrivals`` fits the cascade only down to the tick and spreads a tick's requests
evenly inside it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import InputError

__all__ = ["TICKS", "TIME_UNITS", "detect_unit", "seconds_per", "timestamp_tick"]

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
# the largest magnitude each unit is read from (module notes)
_UNIT_BELOW = (("s", 1e11), ("ms", 1e14), ("us", 1e17), ("ns", float("inf")))
# the ticks a trace may be written at, coarsest first
TICKS = (60.0, 1.0, 0.1, 0.01, 0.001, 1e-6)
# times past this many seconds from the epoch (year ~33,000) are a unit mistaken, and their
# 10 ms windows no longer whole numbers a double holds exactly
MAX_SECONDS = 1e12
_TICK_SAMPLE = 100_000


def detect_unit(low: float, high: float) -> str:
    """The unit of numeric times whose smallest and largest values are ``low`` and ``high``
    (module notes)."""
    biggest = max(abs(float(low)), abs(float(high)))
    return next(unit for unit, below in _UNIT_BELOW if biggest < below)


def seconds_per(unit: str, low: float | None, high: float | None, column: str) -> float:
    """Seconds per unit of a numeric time column: ``unit`` as given, or detected ("auto")."""
    if unit != "auto":
        if unit not in TIME_UNITS:
            raise InputError(f"${{time_unit}} must be auto, {', '.join(TIME_UNITS)}; got {unit!r}")
        scale = TIME_UNITS[unit]
        top = max(abs(x) for x in (low, high) if x is not None) if (low, high) != (None, None) \
            else 0.0
        if np.isfinite(top) and top * scale > MAX_SECONDS:
            raise InputError(f"time column {column!r} reaches {top:.4g}: in ${{time_unit}} {unit} "
                             f"that is {top * scale / 3.15576e7:.3g} years from the epoch; give "
                             "the column's unit (auto reads it from the magnitude)")
        return scale
    if low is None or high is None:
        return 1.0
    if not (np.isfinite(low) and np.isfinite(high)):
        raise InputError(f"time column {column!r} holds values that are not finite numbers "
                         f"({low!r} to {high!r}): clean them, or give a timestamp column")
    return TIME_UNITS[detect_unit(low, high)]


def timestamp_tick(times: NDArray[np.float64]) -> float | None:
    """The coarsest of ``TICKS`` that every time (seconds) is a whole multiple of, read on an
    even sample of at most 100,000; None when the times are finer than a microsecond, or too
    few to tell. Times are taken from the first, so epoch magnitudes cost no precision."""
    t = np.asarray(times, dtype=np.float64)
    t = t[np.isfinite(t)]
    if t.size < 2:
        return None
    step = max(1, t.size // _TICK_SAMPLE)
    sample = t[::step]
    # a double's precision at the sample's magnitude: a multiple of a tick finer than this
    # cannot be told from noise
    precision = max(float(np.abs(sample).max()) * 2.3e-16 * 4, 1e-12)
    rel = sample - np.floor(sample[0])
    for tick in TICKS:
        if tick < precision * 100:
            return None
        q = rel / tick
        if np.all(np.abs(q - np.round(q)) * tick <= max(precision, tick * 1e-6)):
            return tick
    return None
