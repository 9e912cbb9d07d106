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

__all__ = ["MAX_WINDOWS", "CpuSample", "CpuSampler", "bucket_percentile", "cpu_seconds",
           "drive_windows"]

MAX_WINDOWS = 600


@dataclass(frozen=True)
class CpuSample:
    """Each shard's cumulative CPU seconds as the target reported them at ``at`` (seconds
    from the run's start)."""

    at: float
    cpu_seconds: Mapping[str, float]


def cpu_seconds(stats: Mapping | None) -> dict[str, float]:
    """Each shard's cumulative CPU seconds in a target's stats (``/stats`` of ``hotshard
    serve``: a shard's worker and its replicas; a Redis node's INFO)."""
    out: dict[str, float] = {}
    for shard in (stats or {}).get("shards", []) or []:
        seconds = shard.get("cpu_seconds") if isinstance(shard, Mapping) else None
        if not isinstance(seconds, int | float):
            continue
        total = float(seconds)
        for rep in shard.get("replicas", []) or []:
            if isinstance(rep, Mapping) and isinstance(rep.get("cpu_seconds"), int | float):
                total += float(rep["cpu_seconds"])
        out[str(shard.get("id"))] = total
    return out


class CpuSampler:
    """Reads the target's per-shard CPU seconds every ``every_s`` on a thread of its own
    while a run goes on (the parent process of a drive only waits), so each window's CPU is
    known; ``read`` is ``run.target_stats`` bound to the target. Time is ``time.time``."""

    def __init__(self, read, every_s: float = 1.0) -> None:
        import threading

        self.read, self.every_s = read, every_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hotshard-cpu-sampler",
                                        daemon=True)

    def _loop(self) -> None:
        import time

        while not self._stop.is_set():
            at = time.time()
            got = cpu_seconds(self.read())
            if got:
                self.samples.append(((at + time.time()) / 2, got))
            self._stop.wait(max(0.0, self.every_s - (time.time() - at)))

    def start(self) -> CpuSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def relative(self, start_epoch: float) -> tuple[CpuSample, ...]:
        return tuple(CpuSample(at - start_epoch, values) for at, values in self.samples)


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
                  cpu: Sequence[CpuSample] = (), rename: Mapping[str, str] | None = None
                  ) -> tuple[TimeWindow, ...]:
    """The run's windows: per window the requests, rate and latency (p50, p99) of the run,
    and per shard its requests, failures, p99 and CPU where sampled. ``rename`` maps the
    recorder's shard names to the run's ids (a Redis node's address to its number)."""
    rename = rename or {}
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
    shard_ids = sorted({rename.get(s, s) for rows in recorder.windows.values() for s in rows
                        if s != RUN} | {s for sample in cpu for s in sample.cpu_seconds},
                       key=lambda s: (len(s), s))
    named = {v: k for k, v in rename.items()}
    out = []
    n_windows = max(max(grouped) + 1, math.ceil(duration_s / width - 1e-9))
    for w in range(n_windows):
        rows = _merged(grouped.get(w, []))
        lo, hi = w * width, (w + 1) * width
        busy = _cpu(cpu, lo, hi)
        shards = []
        for shard in shard_ids:
            requests, errors, buckets = rows.get(named.get(shard, shard), [0, 0, {}])
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

