"""A synthetic 2-hour trace with an event: one channel takes a large share of the requests in
one window, a steady channel its share throughout, the rest Zipf over many channels.

Written for the window-aware tests (predict, check, diagnose, report): the truth is known by
construction, so every verdict can be checked against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

EVENT_KEY = 4242424
STEADY_KEY = 7777


@dataclass(frozen=True)
class EventTrace:
    path: Path
    seconds: float
    rps: float
    event_start: float
    event_end: float
    event_share: float      # of the requests in [event_start, event_end)
    steady_share: float     # of all requests


def write_event_trace(path: Path, *, rps: float = 60.0, seconds: float = 7200.0,
                      event: tuple[float, float] = (3600.0, 4200.0), event_share: float = 0.4,
                      steady_share: float = 0.07, channels: int = 20_000, seed: int = 1,
                      with_event: bool = True) -> EventTrace:
    """Poisson arrivals at ``rps`` for ``seconds``; in ``event`` the event channel takes
    ``event_share`` of the requests, the steady channel ``steady_share`` always, the rest
    Zipf(1.1) over ``channels`` channels. Times are float seconds from 1.7e9 (Unix)."""
    rng = np.random.default_rng(seed)
    n = int(rps * seconds)
    times = np.sort(rng.uniform(0.0, seconds, n))
    ranks = np.arange(1, channels + 1, dtype=np.float64)
    weights = ranks ** -1.1
    keys = 100_000 + rng.choice(channels, size=n, p=weights / weights.sum())
    u = rng.random(n)
    keys = np.where(u < steady_share, STEADY_KEY, keys)
    if with_event:
        inside = (times >= event[0]) & (times < event[1])
        keys = np.where(inside & (u >= steady_share) & (u < steady_share + event_share),
                        EVENT_KEY, keys)
    pq.write_table(pa.table({"channel_id": keys.astype(np.int64),
                             "ts": times + 1.7e9}), path)
    return EventTrace(path, seconds, rps, event[0], event[1], event_share, steady_share)
