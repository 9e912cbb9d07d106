"""The tests' event trace (``tests/_event_trace.py``) profiled for simulate's time axis: two
hours at 50 req/s over 20,000 Zipf(1.1) channels, a steady channel with 7% of the requests,
and an event channel that takes 40% of the requests from 60:00 to 70:00 (20 req/s). Its
profile has every time section (rate, arrivals, timelines, locality). On redis-cluster with
16 shards the event's channel is on a shard of its own among the hot keys (13; the Zipf
head's keys on 3, 7, 11 and 15, the steady channel on 9)."""

from __future__ import annotations

import json
from pathlib import Path

from tests._event_trace import EVENT_KEY, write_event_trace

RATE = 50.0
SPAN = 7200.0
EVENT_START, EVENT_END = 3600.0, 4200.0


def event_profile(directory: Path) -> Path:
    """The trace written and profiled (``--key channel_id --time ts``) in ``directory``."""
    from hotshard.profile.count import count_profile

    trace = write_event_trace(directory / "trace.parquet", rps=RATE, seconds=SPAN,
                              event=(EVENT_START, EVENT_END))
    path = directory / "event.profile.json"
    count_profile([str(trace.path)], key="channel_id", time_col="ts").save(str(path))
    return path


def event_shard(partitioner: str = "redis-cluster", shards: int = 16) -> int:
    """The shard the event's channel lives on."""
    from hotshard.shards.partitioners import partitioner_for

    return int(partitioner_for(partitioner, shards, integer_keys=True).shard_of(
        [str(EVENT_KEY)])[0])


def without_time_sections(profile: Path, out: Path) -> Path:
    """The profile with its rate and time sections removed (a profile of counts only)."""
    doc = json.loads(profile.read_text())
    for name in ("rate", "arrivals", "timelines", "locality"):
        doc.pop(name, None)
    out.write_text(json.dumps(doc))
    return out
