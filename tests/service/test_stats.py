"""Latency histograms (checked against numpy's percentiles), windows on a fake clock, and
per-process CPU from /proc (parsed from fake stat files, then once from a real busy child)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.service.stats import (
    BUCKET_WIDTH,
    MAX_SECONDS,
    MIN_SECONDS,
    CpuMeter,
    LatencyHistogram,
    WindowedLatency,
    process_cpu_seconds,
)

QS = [0, 0.1, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100]
# The documented bound: true <= reported <= (1 + BUCKET_WIDTH) * true, up to float rounding.
RTOL = BUCKET_WIDTH * (1 + 1e-9)


class FakeClock:
    """Settable monotonic seconds."""

    def __init__(self, now: float = 5000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _histogram(values) -> LatencyHistogram:
    h = LatencyHistogram()
    for v in values:
        h.record(float(v))
    return h


def _lognormal(rng, n: int = 50_000) -> np.ndarray:
    """Latencies around 5 ms with a heavy right tail (median e^-5.3 s)."""
    return rng.lognormal(mean=-5.3, sigma=1.2, size=n)


def _assert_within_bound(reported: float, exact: float) -> None:
    assert exact <= reported <= exact * (1 + RTOL), (reported, exact)


@pytest.mark.parametrize("q", QS)
def test_percentile_within_two_percent_above_numpy(rng, q):
    samples = _lognormal(rng)
    h = _histogram(samples)
    exact = float(np.percentile(samples, q, method="inverted_cdf"))
    _assert_within_bound(h.percentile(q), exact)


def test_percentiles_of_small_samples_match_numpy_ranks(rng):
    # Few samples: rank boundaries (q * n integral) must pick the same order statistic.
    for n in (1, 2, 3, 7, 10, 100, 1000):
        samples = _lognormal(rng, n)
        h = _histogram(samples)
        for q in [*QS, 12.5, 33.3, 66.7, 95]:
            exact = float(np.percentile(samples, q, method="inverted_cdf"))
            _assert_within_bound(h.percentile(q), exact)


def test_values_on_bucket_edges_are_never_underestimated():
    edges = [MIN_SECONDS * (1 + BUCKET_WIDTH) ** i for i in range(0, 931, 37)]
    for edge in edges:
        h = _histogram([edge])
        _assert_within_bound(h.percentile(50), edge)


def test_merge_equals_recording_everything_into_one(rng):
    samples = np.concatenate([_lognormal(rng, 20_000), [150.0, 0.0, 3e-7]])
    rng.shuffle(samples)
    whole = _histogram(samples)
    merged = LatencyHistogram()
    for part in np.array_split(samples, 4):
        merged.merge(_histogram(part))
    assert merged.count == whole.count == len(samples)
    assert merged.to_dict() == whole.to_dict()
    for q in np.linspace(0, 100, 401):
        assert merged.percentile(float(q)) == whole.percentile(float(q))


def test_merge_leaves_other_unchanged_and_refuses_non_histograms():
    a, b = _histogram([0.001]), _histogram([0.002, 0.003])
    a.merge(b)
    assert (a.count, b.count) == (3, 2)
    with pytest.raises(InputError, match="other"):
        a.merge([0.1])


def test_empty_histogram_reports_none():
    h = LatencyHistogram()
    assert h.count == 0
    assert h.percentile(50) is None
    assert h.max_s is None
    assert h.to_dict() == {"count": 0, "p50_ms": None, "p99_ms": None, "max_ms": None,
                           "overflow": 0}


def test_overflow_is_counted_and_reported_not_dropped():
    h = _histogram([0.010] * 98 + [150.0, 400.0])
    assert h.count == 100
    assert h.overflow == 2
    _assert_within_bound(h.percentile(98), 0.010)
    assert h.percentile(99) == 400.0  # in the overflow: the exact maximum bounds it
    d = h.to_dict()
    assert d["overflow"] == 2 and d["max_ms"] == 400_000.0
    _assert_within_bound(d["p50_ms"], 10.0)


def test_max_seconds_itself_overflows():
    h = _histogram([MAX_SECONDS])
    assert h.overflow == 1


def test_latencies_below_one_microsecond_fall_in_the_first_bucket():
    h = _histogram([0.0, 1e-9, 5e-7])
    assert h.count == 3 and h.overflow == 0
    # Below 1 µs the bound is absolute: the reported value is at most the first bucket's edge,
    # and never above the largest latency recorded.
    assert h.percentile(100) == 5e-7
    assert 0.0 <= h.percentile(0) <= 5e-7
    assert _histogram([0.0]).percentile(50) == 0.0


def test_reset_forgets_everything(rng):
    h = _histogram(_lognormal(rng, 100))
    h.record(200.0)
    h.reset()
    assert h.to_dict() == LatencyHistogram().to_dict()


@pytest.mark.parametrize("seconds", [-0.001, float("nan"), float("inf"), "0.1", None])
def test_bad_latency_refused_naming_it(seconds):
    with pytest.raises(InputError, match="seconds"):
        LatencyHistogram().record(seconds)
    with pytest.raises(InputError, match="seconds"):
        WindowedLatency(clock=FakeClock()).record(seconds)


@pytest.mark.parametrize("q", [-1, 100.5, float("nan"), "50"])
def test_bad_percent_refused_naming_it(q):
    h = _histogram([0.01])
    with pytest.raises(InputError, match="q"):
        h.percentile(q)


def test_window_reports_only_recent_slices():
    clock = FakeClock(0.0)
    window = WindowedLatency(window_s=10.0, slices=10, clock=clock)
    window.record(0.100)  # slice [0, 1)
    clock.now = 4.5
    window.record(0.200)  # slice [4, 5)
    clock.now = 9.99
    snap = window.snapshot()
    assert snap.count == 2
    _assert_within_bound(snap.percentile(100), 0.200)
    clock.now = 10.0  # slice [0, 1) leaves the window
    snap = window.snapshot()
    assert snap.count == 1
    _assert_within_bound(snap.percentile(0), 0.200)
    clock.now = 15.0
    assert window.snapshot().count == 0


def test_window_reuses_a_stale_slot_after_wrapping():
    clock = FakeClock(0.5)
    window = WindowedLatency(window_s=2.0, slices=2, clock=clock)
    window.record(0.001)
    clock.now = 2.5  # same slot as t=0.5, two slices later: the old count must go
    window.record(0.002)
    snap = window.snapshot()
    assert snap.count == 1
    _assert_within_bound(snap.percentile(50), 0.002)


def test_window_snapshot_equals_one_histogram_of_the_same_latencies(rng):
    clock = FakeClock(100.0)
    window = WindowedLatency(window_s=5.0, slices=5, clock=clock)
    samples = _lognormal(rng, 2000)
    for i, s in enumerate(samples):
        clock.now = 100.0 + 4.9 * i / len(samples)
        window.record(float(s))
    assert window.snapshot().to_dict() == _histogram(samples).to_dict()


@pytest.mark.parametrize(("kwargs", "name"), [({"window_s": 0}, "window_s"),
                                              ({"window_s": -1.0}, "window_s"),
                                              ({"slices": 0}, "slices"),
                                              ({"slices": 2.5}, "slices")])
def test_bad_window_refused_naming_it(kwargs, name):
    with pytest.raises(InputError, match=name):
        WindowedLatency(**kwargs)


def _fake_stat(proc: Path, pid: int, comm: str, utime: int, stime: int) -> None:
    """A /proc/<pid>/stat line in proc(5)'s layout, fields 14 and 15 set."""
    # fields 3..13, then utime (14), stime (15), cutime, cstime (16, 17: must not count), more
    fields = ["S", "1", "1", "1", "0", "-1", "4194560", "100", "0", "0", "0",
              str(utime), str(stime), "999", "888", "20", "0", "1", "0", "12345"]
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")


@pytest.mark.parametrize("comm", ["python", "a b c", "x) S 1 2 (y", ")("])
def test_process_cpu_seconds_parses_after_the_last_paren(tmp_path, comm):
    _fake_stat(tmp_path, 4242, comm, utime=300, stime=50)
    ticks = os.sysconf("SC_CLK_TCK")
    assert process_cpu_seconds(4242, proc=tmp_path) == pytest.approx(350 / ticks)


def test_process_cpu_seconds_of_a_missing_process_is_none(tmp_path):
    assert process_cpu_seconds(4242, proc=tmp_path) is None
    assert process_cpu_seconds(4242, proc=tmp_path / "no-procfs") is None


@pytest.mark.parametrize("pid", [0, -5, 1.0, "12", True])
def test_process_cpu_seconds_refuses_bad_pid(pid):
    with pytest.raises(InputError, match="pid"):
        process_cpu_seconds(pid)


class FakeReader:
    """CPU seconds per pid, set by the test."""

    def __init__(self) -> None:
        self.cpu: dict[int, float | None] = {}

    def __call__(self, pid: int) -> float | None:
        return self.cpu.get(pid)


def test_cpu_meter_percent_since_previous_sample():
    clock, reader = FakeClock(0.0), FakeReader()
    meter = CpuMeter(clock=clock, reader=reader)
    reader.cpu[7] = 10.0
    assert meter.sample(7) is None  # first sample: baseline only
    clock.now, reader.cpu[7] = 2.0, 11.0
    assert meter.sample(7) == pytest.approx(50.0)
    clock.now, reader.cpu[7] = 3.0, 13.0  # two cores' worth over one second
    assert meter.sample(7) == pytest.approx(200.0)


def test_cpu_meter_tracks_pids_separately_and_forgets():
    clock, reader = FakeClock(0.0), FakeReader()
    meter = CpuMeter(clock=clock, reader=reader)
    reader.cpu.update({1: 0.0, 2: 5.0})
    assert meter.sample(1) is None and meter.sample(2) is None
    clock.now = 1.0
    reader.cpu.update({1: 0.25, 2: 5.0})
    assert meter.sample(1) == pytest.approx(25.0)
    assert meter.sample(2) == pytest.approx(0.0)
    meter.forget(1)
    meter.forget(99)  # unknown: ignored
    assert meter.sample(1) is None


def test_cpu_meter_gone_process_and_reused_pid_restart_the_baseline():
    clock, reader = FakeClock(0.0), FakeReader()
    meter = CpuMeter(clock=clock, reader=reader)
    reader.cpu[3] = 50.0
    meter.sample(3)
    clock.now, reader.cpu[3] = 1.0, None  # gone
    assert meter.sample(3) is None
    clock.now, reader.cpu[3] = 2.0, 0.5  # a new process with the same pid
    assert meter.sample(3) is None
    clock.now, reader.cpu[3] = 3.0, 0.75
    assert meter.sample(3) == pytest.approx(25.0)
    clock.now, reader.cpu[3] = 4.0, 0.25  # CPU went backwards: reused again
    assert meter.sample(3) is None


def test_cpu_meter_no_elapsed_time_keeps_the_older_baseline():
    clock, reader = FakeClock(0.0), FakeReader()
    meter = CpuMeter(clock=clock, reader=reader)
    reader.cpu[3] = 1.0
    meter.sample(3)
    reader.cpu[3] = 1.5
    assert meter.sample(3) is None  # same instant
    clock.now, reader.cpu[3] = 1.0, 1.75
    assert meter.sample(3) == pytest.approx(75.0)


_BURN = """
import sys, time
sys.stdin.readline()
start = time.process_time()
while time.process_time() - start < {seconds}:
    pass
print("burned", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux procfs")
def test_real_child_cpu_is_measured():
    burn_s = 0.5
    child = subprocess.Popen([sys.executable, "-c", _BURN.format(seconds=burn_s)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        meter = CpuMeter()
        before = process_cpu_seconds(child.pid)
        assert before is not None
        assert meter.sample(child.pid) is None
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "burned\n"  # waits for the child, not a timer
        after = process_cpu_seconds(child.pid)
        percent = meter.sample(child.pid)
        # The child spent burn_s of CPU between the two readings; /proc counts in clock
        # ticks, so allow a generous margin below it.
        assert after - before > 0.2
        assert after > 0.2
        assert percent is not None and percent > 0
    finally:
        child.kill()
        child.wait(timeout=60)
    assert process_cpu_seconds(child.pid) is None  # reaped: gone
