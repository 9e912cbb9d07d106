"""Time columns in every format users have (timestamps, ISO text, epoch s/ms/us/ns), and
whole-second timestamps: no burstiness is fitted below the tick, so a trace generated from a
whole-second profile has the real dispersion, not a burst a second."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hotshard.errors import InputError
from hotshard.profile.arrivals import IDC_SCALES, idc
from hotshard.profile.count import count_profile
from hotshard.profile.time_units import detect_unit, timestamp_tick

EPOCH = 1_714_560_000  # 2024-05-01T10:40:00Z


def _trace(n: int = 60_000, seconds: float = 1200.0, seed: int = 1):
    """Bursty arrivals (a rate switching between 20 and 80 req/s every ~5 s, on average 50)
    with millisecond times, and keys from a small Zipf."""
    rng = np.random.default_rng(seed)
    edges = np.cumsum(rng.exponential(5.0, int(seconds)))
    edges = edges[edges < seconds]
    rates = np.where(np.arange(edges.size + 1) % 2 == 0, 20.0, 80.0)
    bounds = np.concatenate([[0.0], edges, [seconds]])
    times = np.concatenate([rng.uniform(a, b, rng.poisson(r * (b - a)))
                            for a, b, r in zip(bounds[:-1], bounds[1:], rates, strict=True)])
    times = np.sort(np.round(times, 3))[:n]
    keys = rng.zipf(1.3, times.size) % 5000
    return times, keys


@pytest.mark.parametrize("low,high,unit", [(0, 7200, "s"), (1.7e9, 1.71e9, "s"),
                                          (1.7e12, 1.71e12, "ms"), (1.7e15, 1.7e15, "us"),
                                          (1.7e18, 1.7e18, "ns")])
def test_units_are_read_from_magnitude(low, high, unit):
    assert detect_unit(low, high) == unit


def test_ticks():
    assert timestamp_tick(np.array([EPOCH, EPOCH + 1.0, EPOCH + 7.0])) == 1.0
    assert timestamp_tick(np.array([EPOCH + 0.5, EPOCH + 1.25])) == 0.01
    assert timestamp_tick(EPOCH + np.array([0.001, 0.002, 0.507])) == 0.001
    assert timestamp_tick(np.array([60.0, 120.0, 600.0])) == 60.0


@pytest.fixture(scope="module")
def formats(tmp_path_factory):
    root = tmp_path_factory.mktemp("times")
    times, keys = _trace()
    ms = (EPOCH * 1000 + np.round(times * 1000)).astype(np.int64)
    columns = {
        "seconds": pa.array(ms / 1000.0),
        "ms": pa.array(ms),
        "us": pa.array(ms * 1000),
        "ns": pa.array(ms * 1_000_000),
        "ts": pa.array(ms, pa.timestamp("ms", tz="UTC")),
        "iso": pa.array([np.datetime_as_string(np.datetime64(int(v), "ms"), unit="ms") + "Z"
                         for v in ms]),
    }
    paths = {}
    for name, col in columns.items():
        path = root / f"{name}.parquet"
        pq.write_table(pa.table({"key": keys, "t": col}), path)
        paths[name] = path
    return paths, times


def test_every_format_gives_the_same_time_sections(formats):
    paths, _ = formats
    made = {name: count_profile([str(p)], key="key", time_col="t") for name, p in paths.items()}
    ref = made["ts"]
    for name, prof in made.items():
        assert np.array_equal(prof.arrivals.counts, ref.arrivals.counts), name
        assert prof.arrivals.tick_s == 0.001, name
        assert np.array_equal(prof.timelines.counts, ref.timelines.counts), name
        assert prof.rate == ref.rate, name
        assert prof.arrivals.idc == pytest.approx(ref.arrivals.idc, rel=1e-9), name


def test_a_relative_millisecond_column_needs_its_unit(tmp_path):
    times, keys = _trace(n=5000)
    path = tmp_path / "rel.parquet"
    pq.write_table(pa.table({"key": keys, "t": np.round(times * 1000).astype(np.int64)}), path)
    as_ms = count_profile([str(path)], key="key", time_col="t", time_unit="ms")
    assert as_ms.rate["seconds"] <= 1201
    with pytest.raises(InputError, match="time_unit must be"):
        count_profile([str(path)], key="key", time_col="t", time_unit="minutes")
    # left to auto, the command says how it read them: no epoch unit fits values this small
    run = subprocess.run([sys.executable, "-m", "hotshard", "profile", str(path), "--key",
                          "key", "--time", "t", "-o", str(path.with_suffix(".json"))],
                         capture_output=True, text=True)
    assert run.returncode == 0
    assert "read as seconds counted from their own origin" in run.stderr
    assert "give --time-unit ms" in run.stderr


def test_a_unit_that_puts_the_times_past_any_date_is_one_line(tmp_path):
    """Epoch nanoseconds read as seconds: years beyond counting, and 10 ms windows past the
    integers a double holds; refused before any work."""
    times, keys = _trace(n=2000)
    path = tmp_path / "ns.parquet"
    ns = (1_714_560_000 + times) * 1e9
    pq.write_table(pa.table({"key": keys, "t": ns.astype(np.int64)}), path)
    with pytest.raises(InputError, match=r"in time_unit s that is .* years from the epoch"):
        count_profile([str(path)], key="key", time_col="t", time_unit="s")
    assert count_profile([str(path)], key="key", time_col="t").rate["seconds"] <= 1201


def test_text_that_is_no_time_is_one_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("key,t\n1,2024-05-01T10:00:00Z\n2,yesterday\n")
    run = subprocess.run([sys.executable, "-m", "hotshard", "profile", str(path), "--key",
                          "key", "--time", "t", "-o", str(tmp_path / "p.json")],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "hotshard: error: time column 't' holds text that is not a timestamp ('yesterday'): "
        "give ISO 8601 times (2024-05-01T12:00:00Z), epoch numbers, or a timestamp column"]
    assert not (tmp_path / "p.json").exists()


def test_epoch_milliseconds_profile_without_a_traceback(formats, tmp_path):
    paths, _ = formats
    run = subprocess.run([sys.executable, "-m", "hotshard", "profile", str(paths["ms"]),
                          "--key", "key", "--time", "t", "-q", "-o", str(tmp_path / "p.json")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_a_whole_second_trace_generates_its_own_dispersion(tmp_path):
    """Whole-second stamps: the real IDC (of the floored trace, windows on whole seconds)
    against a generated trace's. Below the tick nothing was fitted; above it the cascade is
    fitted on the floored counts, so the generated IDC at 1, 10, 60 s is the real one's up to
    the estimate's noise (1,200 one-second windows: the IDC's standard error is ~4%)."""
    times, keys = _trace(n=10**6)
    floored = np.floor(EPOCH + times)
    path = tmp_path / "whole.parquet"
    pq.write_table(pa.table({"key": keys, "t": floored.astype(np.int64)}), path)
    profile = count_profile([str(path)], key="key", time_col="t")
    assert profile.arrivals.tick_s == 1.0
    assert "0.01" not in profile.arrivals.idc and "0.1" not in profile.arrivals.idc
    prof_path = tmp_path / "p.json"
    profile.save(prof_path)
    out = tmp_path / "gen.parquet"
    run = subprocess.run([sys.executable, "-m", "hotshard", "generate", str(prof_path),
                          "--messages", str(floored.size), "--seed", "5", "-o", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    gen = pq.read_table(out, columns=["timestamp"]).column(0).cast(pa.int64()).to_numpy()
    gen = np.sort(gen / 1000.0)
    for scale in (1.0, 10.0, 60.0):
        assert scale in IDC_SCALES
        real = idc(floored, scale, floored[0], floored[-1] + 1)
        made = idc(gen, scale, gen[0], gen[-1])
        assert 0.8 <= made / real <= 1.25, (scale, made, real)
