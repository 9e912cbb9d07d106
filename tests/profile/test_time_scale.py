"""`profile --time` at scale: memory that does not grow with the requests, any input order,
and a run stopped mid-pass that leaves nothing behind (the CLI, as a user runs it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

HOTSHARD = str(Path(sys.executable).with_name("hotshard"))


def _trace(path: Path, events: int, keys: int = 50_000, seed: int = 3,
           shuffled: bool = False, rate: float = 2000.0) -> Path:
    """A Zipf-keyed trace at ``rate`` req/s with epoch-millisecond times, in row groups."""
    rng = np.random.default_rng(seed)
    with pq.ParquetWriter(path, pa.schema([("channel", pa.int64()), ("ts", pa.int64())])) as w:
        now = 0.0
        for first in range(0, events, 1 << 20):
            n = min(1 << 20, events - first)
            times = now + np.cumsum(rng.exponential(1 / rate, n))
            now = float(times[-1])
            channel = (rng.zipf(1.2, n) - 1) % keys
            ts = 1_714_560_000_000 + np.floor(times * 1000).astype(np.int64)
            if shuffled:
                order = rng.permutation(n)
                channel, ts = channel[order], ts[order]
            w.write_table(pa.table({"channel": channel, "ts": ts}))
    return path


_PEAK = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); "
         "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def _peak_rss_mb(args: list[str]) -> float:
    """Peak RSS (MB) of ``hotshard args`` in a process of its own; fails if it fails."""
    out = subprocess.run([sys.executable, "-c", _PEAK, HOTSHARD, *args], check=True,
                         capture_output=True, text=True).stdout.split()
    assert out[-2] == "0", out
    return int(out[-1]) / 1024


@pytest.mark.slow
def test_memory_does_not_grow_with_the_requests(tmp_path):
    """The same 50,000 keys over the same hour and six minutes, 2 M requests then 16 M:
    holding the stream (as profile did) grows by 14 M x 24 bytes (hash, time, order) =
    336 MB or more; counting in windows (as many 10 ms windows either way) and streaming the
    locality pass, the peak moves by less than a third of that. (The windows grow with the
    span, not the requests: a week's 6e7 spill to disk past --memory-limit.)"""
    small = _trace(tmp_path / "small.parquet", 2_000_000, rate=500.0)
    large = _trace(tmp_path / "large.parquet", 16_000_000, rate=4000.0)
    peaks = []
    for trace in (small, large):
        out = tmp_path / f"{trace.stem}.json"
        peaks.append(_peak_rss_mb(["profile", str(trace), "--key", "channel", "--time", "ts",
                                   "-o", str(out), "-q", "--memory-limit", "512MB"]))
        doc = json.loads(out.read_text())
        assert doc["locality"]["method"] == "exact"
        assert doc["arrivals"]["tick_s"] == 0.001 and doc["timelines"]["windows"] == 12
    assert peaks[1] - peaks[0] < 112, peaks


def test_a_file_out_of_time_order_gives_the_profile_of_the_same_file_in_order(tmp_path):
    """The locality pass reads a log in time order as it lies, and sorts any other (DuckDB,
    out of core; ties in file order): the sections are the same either way."""
    shuffled = pq.read_table(_trace(tmp_path / "shuffled.parquet", 300_000, shuffled=True))
    # the same requests in time order, requests at one millisecond in the shuffled file's
    # order (what the sort keeps)
    order = np.argsort(shuffled.column("ts").to_numpy(), kind="stable")
    pq.write_table(shuffled.take(order), tmp_path / "in_order.parquet")
    docs = []
    for name in ("in_order", "shuffled"):
        out = tmp_path / f"{name}.json"
        subprocess.run([HOTSHARD, "profile", str(tmp_path / f"{name}.parquet"), "--key",
                        "channel", "--time", "ts", "-o", str(out), "-q"], check=True)
        doc = json.loads(out.read_text())
        doc["source"].pop("created")
        doc["source"].pop("inputs")
        docs.append(doc)
    assert docs[0] == docs[1]


@pytest.mark.slow
def test_sigterm_mid_pass_ends_the_run_cleanly_and_writes_nothing(tmp_path):
    """Stopped while the locality pass runs beside DuckDB's aggregations (two threads, one
    compiled): one line, exit 143, no profile, no DuckDB spill directory left behind."""
    trace = _trace(tmp_path / "t.parquet", 12_000_000, keys=2_000_000)
    out = tmp_path / "p.json"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([HOTSHARD, "profile", str(trace), "--key", "channel", "--time",
                             "ts", "-o", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(3)  # past the count: inside the pass (about 1 s of 8 s here)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err
    assert not out.exists()
    assert not list(tmp_path.glob("hotshard-duckdb-*"))


def _time_sections(path: Path, monkeypatch=None, streamed: bool = True) -> dict:
    """The profile's time sections (and locality) of ``path`` by the library call; with
    ``streamed`` False the locality stream is given no plan, so the windows are counted
    by their own scans."""
    from hotshard.profile.count import count_profile
    from hotshard.profile.engines import duckdb_engine

    if not streamed:
        monkeypatch.setattr(duckdb_engine, "_stream_plan", lambda *a: None)
    doc = count_profile([str(path)], key="channel", time_col="ts").to_dict()
    return {k: doc[k] for k in ("rate", "arrivals", "timelines", "locality")}


@pytest.mark.parametrize("unit", ["ms", "s", "timestamp"])
def test_a_stream_in_time_order_counts_its_windows_as_the_scans_do(tmp_path, monkeypatch,
                                                                    unit):
    """A log in time order (epoch milliseconds, seconds as doubles, a timestamp column): the
    locality stream counts the 10 ms windows and the head's timelines as it reads them (no
    scan of their own), to the count of the scans, across its batches (2^20 rows; at
    40,000 req/s a 10 ms window straddles the boundary)."""
    from hotshard.profile.engines import duckdb_engine

    table = pq.read_table(_trace(tmp_path / "t.parquet", 1_200_000, rate=40_000.0))
    ms = table.column("ts").to_numpy()
    ts = {"ms": pa.array(ms), "s": pa.array(ms / 1e3),
          "timestamp": pa.array(ms.astype("datetime64[ms]"))}[unit]
    trace = tmp_path / f"{unit}.parquet"
    pq.write_table(table.set_column(1, "ts", ts), trace)
    scans = []
    real = duckdb_engine._fine_counts

    def counted(*args):
        scans.append(args)
        return real(*args)

    monkeypatch.setattr(duckdb_engine, "_fine_counts", counted)
    streamed = _time_sections(trace)
    assert not scans  # the stream counted them
    by_scans = _time_sections(trace, monkeypatch, streamed=False)
    assert scans
    assert streamed == by_scans


def test_a_log_out_of_order_late_is_counted_by_the_scans_all_the_same(tmp_path):
    """One request 5 ms back in time, past the stream's first batch: the stream finds the
    file out of order only then, drops what it counted, and the profile is the sorted
    file's."""
    table = pq.read_table(_trace(tmp_path / "t.parquet", 1_500_000))
    ts = table.column("ts").to_numpy().copy()
    i = 1_400_000
    ts[i + 1] = ts[i] - 5
    late = table.set_column(1, "ts", pa.array(ts))
    pq.write_table(late, tmp_path / "late.parquet")
    order = np.argsort(ts, kind="stable")
    pq.write_table(late.take(order), tmp_path / "sorted.parquet")
    assert _time_sections(tmp_path / "late.parquet") == \
        _time_sections(tmp_path / "sorted.parquet")


@pytest.mark.parametrize("bad", ["nan", "null"])
def test_a_request_without_a_usable_time_is_counted_and_left_out_of_the_time_sections(
        tmp_path, bad):
    """One request's time NaN (or empty) among 200,000: the profile is made (it used to be
    refused: a head key's windows then held one request fewer than its count), the
    request counted per key and in no window, and a note says so."""
    rng = np.random.default_rng(1)
    n = 200_000
    t = 1_714_560_000 + np.sort(rng.random(n) * 600)
    k = rng.zipf(1.3, n) % 5000
    k[5000] = 1   # the top key's
    times = pa.array(np.where(np.arange(n) == 5000, np.nan, t)) if bad == "nan" else \
        pa.array(t, mask=np.arange(n) == 5000)
    pq.write_table(pa.table({"k": k, "t": times}), tmp_path / "t.parquet")
    out = tmp_path / "p.json"
    res = subprocess.run([HOTSHARD, "profile", str(tmp_path / "t.parquet"), "--key", "k",
                          "--time", "t", "-o", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "1 requests have no usable time" in res.stderr
    doc = json.loads(out.read_text())
    assert doc["totals"]["events"] == n
    row = [str(key) for key in doc["head"]["keys"]].index("1")
    assert sum(doc["timelines"]["counts"][row]) == doc["head"]["counts"][row] - 1
    assert sum(doc["arrivals"]["counts"]) == n - 1
