"""The drive's time axis: per-window tallies by intended send time, merged across processes."""

from __future__ import annotations

import numpy as np
import pytest

from hotshard.drive.record import Recorder
from hotshard.drive.series import MAX_WINDOWS, CpuSample, bucket_percentile, drive_windows


def _fill(rec: Recorder, rng, n: int, seconds: float) -> list[tuple[float, str, float, bool]]:
    made = []
    for _ in range(n):
        t = float(rng.uniform(0, seconds))
        hot = 20 <= t < 30
        shard = "1" if hot and rng.random() < 0.8 else str(int(rng.integers(0, 4)))
        lat = float(rng.lognormal(-4, 0.5)) * (20 if shard == "1" and hot else 1)
        err = rng.random() < 0.01
        rec.record(intended=t, sent=t, done=t + lat, shard=shard, error="http 503" if err
                   else None, is_read=True, key="k")
        made.append((t, shard, lat, err))
    return made


def test_windows_merge_across_processes_and_add_up():
    rng = np.random.default_rng(1)
    a, b = Recorder(), Recorder()
    made = _fill(a, rng, 3000, 60.0) + _fill(b, rng, 3000, 60.0)
    merged = Recorder()
    merged.merge(a.encode())
    merged.merge(b.encode())
    windows = drive_windows(merged, 60.0)
    assert len(windows) == 60 and windows[0].start_s == 0 and windows[-1].end_s == 60
    assert sum(w.requests for w in windows) == len(made)
    for shard in "0123":
        per = sum(s.requests for w in windows for s in w.shards if s.id == shard)
        assert per == sum(1 for m in made if m[1] == shard)
    # the event's windows: shard 1 carries most requests and the p99
    w25 = windows[25]
    top = max(w25.shards, key=lambda s: s.requests)
    assert top.id == "1" and top.p99_ms > 5 * windows[5].latency_ms.p99 / 2
    # a window's p99 within half a log bucket (4.4%) of the exact one, by rank
    lat = sorted(m[2] * 1000 for m in made if 25 <= m[0] < 26 and not m[3])
    exact = lat[int(np.ceil(0.99 * len(lat))) - 1]
    assert w25.latency_ms.p99 == pytest.approx(exact, rel=0.09)


def test_long_runs_are_coarsened_and_cpu_is_per_window():
    rec = Recorder()
    for t in np.arange(0, 7200, 0.5):
        rec.record(intended=float(t), sent=float(t), done=float(t) + 0.002, shard="0",
                   error=None, is_read=True, key="k")
    samples = [CpuSample(float(t), {"0": 0.25 * t}) for t in range(0, 7201, 12)]
    windows = drive_windows(rec, 7200.0, samples)
    assert len(windows) == MAX_WINDOWS and windows[0].end_s == 12.0
    assert all(w.requests == 24 for w in windows)
    assert all(w.shards[0].cpu == pytest.approx(0.25) for w in windows)


def test_bucket_percentile_reads_the_rank():
    assert bucket_percentile({}, 99) is None
    one_ms = int(np.log2(1000) * 8)
    assert bucket_percentile({one_ms: 10}, 50) == pytest.approx(1.0, rel=0.09)
