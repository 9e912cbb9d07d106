"""A drive's time axis: the recorder's per-window tallies as the observations' ``windows``.

A hot shard is hot in a window, so the run's evidence carries, per window, each shard's
requests, failures and p99 and the run's latency (``Recorder`` tallies them by intended send
time, mergeable across processes and Locust workers), and each shard's CPU where the target
reported it during the run (``CpuSamples``: the service's ``/stats`` read every window).

Windows are the recorder's (1 s) while the run has at most ``MAX_WINDOWS`` of them, else
whole multiples of it, so an hour's drive writes 600 windows of 6 s, not 3,600.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hotshard.drive.record import RUN, WINDOW_OCTAVE_BINS, Recorder
from hotshard.observations import ShardObservation, TimeWindow

__all__ = ["MAX_WINDOWS", "CpuSample", "bucket_percentile", "drive_windows"]

MAX_WINDOWS = 600


@dataclass(frozen=True)
class CpuSample:
    """Each shard's cumulative CPU seconds as the target reported them at ``at`` (seconds
    from the run's start)."""

    at: float
    cpu_seconds: Mapping[str, float]


def bucket_percentile(buckets: Mapping[int, int], q: float) -> float | None:
    """The q-th percentile (0-100) in ms of a window's log-bucketed latencies: the geometric
    middle of the bucket holding the rank (within half a bucket, 2^(1/16) - 1 = 4.4%)."""
    total = sum(buckets.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(total * q / 100.0))
    seen = 0
    for b in sorted(buckets):
        seen += buckets[b]
        if seen >= rank:
            return round(2.0 ** ((b + 0.5) / WINDOW_OCTAVE_BINS) / 1000.0, 3)
    return None


def _merged(rows: Sequence[Mapping[str, list]]) -> dict[str, list]:
    out: dict[str, list] = {}
    for row in rows:
        for shard, (requests, errors, buckets) in row.items():
            mine = out.setdefault(shard, [0, 0, {}])
            mine[0] += requests
            mine[1] += errors
            for b, c in buckets.items():
                mine[2][b] = mine[2].get(b, 0) + c
    return out


def _cpu(samples: Sequence[CpuSample], lo: float, hi: float) -> dict[str, float]:
    """Each shard's busy fraction over [lo, hi): the CPU seconds between the samples nearest
    the edges, over the time between them (None-free: shards missing a sample are left
    out)."""
    if len(samples) < 2:
        return {}
    times = np.array([s.at for s in samples])
    a = int(np.argmin(np.abs(times - lo)))
    b = int(np.argmin(np.abs(times - hi)))
    if b <= a or times[b] - times[a] <= 0:
        return {}
    span = float(times[b] - times[a])
    out = {}
    for shard, end in samples[b].cpu_seconds.items():
        start = samples[a].cpu_seconds.get(shard)
        if start is not None and end >= start:
            out[shard] = min(1.0, (end - start) / span)
    return out


def drive_windows(recorder: Recorder, duration_s: float,
                  cpu: Sequence[CpuSample] = ()) -> tuple[TimeWindow, ...]:
    """The run's windows: per window the requests, rate and latency (p50, p99) of the run,
    and per shard its requests, failures, p99 and CPU where sampled."""
    if not recorder.windows or duration_s <= 0:
        return ()
    base = recorder.window_s
    n_base = max(1, math.ceil(duration_s / base - 1e-9),
                 max(recorder.windows) + 1)
    factor = max(1, math.ceil(n_base / MAX_WINDOWS))
    width = base * factor
    grouped: dict[int, list] = {}
    for index, rows in recorder.windows.items():
        grouped.setdefault(index // factor, []).append(rows)
    # in the order the run's own shard rows use (breakdown.to_observations)
    shard_ids = sorted({s for rows in recorder.windows.values() for s in rows if s != RUN},
                       key=lambda s: (len(s), s))
    out = []
    for w in range(max(grouped) + 1):
        rows = _merged(grouped.get(w, []))
        lo, hi = w * width, (w + 1) * width
        busy = _cpu(cpu, lo, hi)
        shards = []
        for shard in shard_ids:
            requests, errors, buckets = rows.get(shard, [0, 0, {}])
            values: dict = {"requests": requests, "errors": errors}
            p99 = bucket_percentile(buckets, 99.0)
            if p99 is not None:
                values["p99_ms"] = p99
                values["p50_ms"] = bucket_percentile(buckets, 50.0)
            if shard in busy:
                values["cpu"] = round(busy[shard], 6)
            shards.append(ShardObservation(id=shard, **values))
        requests, _, buckets = rows.get(RUN, [0, 0, {}])
        latency = None
        if buckets:
            latency = {"p50": bucket_percentile(buckets, 50.0),
                       "p99": bucket_percentile(buckets, 99.0)}
        out.append(TimeWindow(start_s=round(lo, 6), end_s=round(hi, 6), requests=requests,
                              rate_rps=round(requests / width, 3), latency_ms=latency,
                              shards=tuple(shards)))
    return tuple(out)

