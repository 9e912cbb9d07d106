"""`diff` window by window: when each head key was hot, on the real cloudphysics trace.

A is cloudphysics profiled with its `time` column (two hours: twelve 10-minute windows). B
carries the same requests' keys shuffled over uniform random times (every key spread evenly
over the span), except one of A's steady head keys, whose requests B puts in one 20-minute
stretch (an event). Per-window counts, window totals, hot windows and distances are recounted
here from the Parquet with numpy and scipy, independently of the profiler and of diff.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.stats import poisson

from hotshard.compare.diff import diff
from hotshard.compare.diff_text import diff_table
from hotshard.compare.window_drift import HOT_FACTOR, HOT_P, expected_tv
from hotshard.profile.count import count_profile
from hotshard.profile.time_counts import FINE_S
from hotshard.profile.timelines import DETAIL_BINS
from tests.conftest import run_cli, shared, trace_profile

W = 12
EVENT = (4, 5)  # B's event: windows 5 and 6 (1-based), minutes 40 to 60 of the span
EVENT_RANK = 10  # the event key: A's 10th key (steady in A)


def windows_of(times: np.ndarray) -> np.ndarray:
    """Each time's window: twelve equal parts of the span's 10 ms windows, ten sub-windows
    each (``profile.time_counts``), written out in numpy."""
    t0, t1 = times.min(), times.max()
    fine = np.floor(times / FINE_S) - np.floor(t0 / FINE_S)   # 10 ms windows of the epoch
    n_fine = np.floor(t1 / FINE_S) - np.floor(t0 / FINE_S)
    sub = np.minimum(np.floor(fine * (W * DETAIL_BINS) / n_fine), W * DETAIL_BINS - 1)
    return sub.astype(int) // DETAIL_BINS


def recount(keys: np.ndarray, times: np.ndarray, key) -> np.ndarray:
    return np.bincount(windows_of(times)[keys == key], minlength=W)


def hot_windows(counts: np.ndarray, tests: int) -> tuple[int, ...]:
    """The hot rule written out: at least HOT_FACTOR x the even share, and an even spread
    (Poisson of mean n / W per window) that busy with P < HOT_P / tests."""
    even = counts.sum() / W
    return tuple(int(w) for w in range(W) if counts[w] >= HOT_FACTOR * even and counts[w] > 0
                 and poisson.sf(counts[w] - 1, even) < HOT_P / tests)


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    table = pq.read_table(shared("traces", "cloudphysics.parquet"), columns=["lbn", "time"])
    keys, times = table.column("lbn").to_numpy(), table.column("time").to_numpy().astype(float)
    a = trace_profile("cloudphysics", time_col="time")
    event_key = int(a.head_keys[EVENT_RANK - 1])
    rng = np.random.default_rng(2026)
    b_keys = rng.permutation(keys)
    b_times = rng.uniform(times.min(), times.max(), times.size)
    b_times[[0, 1]] = times.min(), times.max()  # the same span, so windows line up
    mine = b_keys == event_key
    b_times[mine] = times.min() + rng.uniform(40 * 60, 60 * 60, int(mine.sum()))
    order = np.argsort(b_times, kind="stable")
    b_keys, b_times = b_keys[order], b_times[order]
    path = tmp_path_factory.mktemp("windows") / "b.parquet"
    pq.write_table(pa.table({"lbn": b_keys, "time": b_times}), path)
    b = count_profile([str(path)], key="lbn", time_col="time")
    return {"a": a, "b": b, "keys_a": keys, "times_a": times, "keys_b": b_keys,
            "times_b": b_times, "event": str(event_key), "path_b": path}


@pytest.fixture(scope="module")
def drift(streams):
    return diff(streams["a"], streams["b"], labels=("real", "event")).windows


def test_counts_per_window_are_the_trace_recounted(streams, drift):
    assert drift is not None and drift.windows == W
    for k in drift.keys:
        assert k.counts_a == tuple(recount(streams["keys_a"], streams["times_a"], int(k.key)))
        assert k.counts_b == tuple(recount(streams["keys_b"], streams["times_b"], int(k.key)))


def test_window_totals_and_shares_are_the_trace_recounted(streams, drift):
    """Windows of 10 minutes fall on the arrivals section's minute bins, so each window's
    total is exact: the key's share of the window is its count over all requests there."""
    totals = np.bincount(windows_of(streams["times_a"]), minlength=W)
    assert np.array_equal(np.asarray(drift.totals_a), totals)
    k = drift.keys[0]
    assert k.share_a == pytest.approx(np.asarray(k.counts_a) / totals, rel=1e-5)


def test_hot_windows_follow_the_rule_for_every_key(drift):
    tests = sum((k.counts_a is not None) + (k.counts_b is not None) for k in drift.keys) * W
    for k in drift.keys:
        assert k.hot_a == hot_windows(np.asarray(k.counts_a), tests), k.key
        assert k.hot_b == hot_windows(np.asarray(k.counts_b), tests), k.key


def test_the_event_key_is_hot_in_b_for_twenty_minutes_and_not_in_a(streams, drift):
    k = next(k for k in drift.keys if k.key == streams["event"])
    assert k.hot_a == () and k.hot_b == EVENT and k.hot_moved
    # all of its B requests lie in the event: TV = 1 - A's fraction of requests there
    a = np.asarray(k.counts_a) / sum(k.counts_a)
    assert k.tv == pytest.approx(1 - a[list(EVENT)].sum(), abs=1e-12)
    assert k.tv > 0.7 and k.tv_chance < 0.15


def test_keys_bursty_in_a_are_hot_there_and_not_in_the_even_b(drift):
    """cloudphysics' own bursts: keys whose requests sit in a window or two in A, spread
    evenly in B (the same keys over uniform times)."""
    bursty = [k for k in drift.keys if k.hot_a and not k.hot_b]
    assert len(bursty) >= 10
    for k in bursty:
        share = np.asarray(k.counts_a)[list(k.hot_a)].sum() / sum(k.counts_a)
        assert share >= HOT_FACTOR * len(k.hot_a) / W
    # nothing but the event is hot in B: uniform times give no key a hot window by chance
    assert [k.key for k in drift.keys if k.hot_b] == [next(
        k.key for k in drift.keys if k.hot_b == EVENT)]


def test_tv_is_half_the_l1_distance_of_the_fractions(drift):
    for k in drift.keys[:100]:
        a = np.asarray(k.counts_a) / sum(k.counts_a)
        b = np.asarray(k.counts_b) / sum(k.counts_b)
        assert k.tv == pytest.approx(0.5 * np.abs(a - b).sum(), abs=1e-12)


@pytest.mark.parametrize(("n_a", "n_b", "shape"), [
    (300, 300, np.full(W, 1 / W)),
    (1000, 400, np.r_[np.full(10, 0.05), 0.2, 0.3]),
])
def test_expected_tv_matches_simulated_multinomial_samples(n_a, n_b, shape):
    """20,000 pairs of samples (fixed seed): the mean TV's Monte Carlo error is ~0.2%; the
    normal approximation's own error at 25+ requests a window is below that, so 1%."""
    rng = np.random.default_rng(20261203)
    a = rng.multinomial(n_a, shape, 20_000) / n_a
    b = rng.multinomial(n_b, shape, 20_000) / n_b
    simulated = float((0.5 * np.abs(a - b).sum(axis=1)).mean())
    predicted = float(expected_tv(shape[None, :], np.array([n_a]), np.array([n_b]))[0])
    assert predicted == pytest.approx(simulated, rel=0.01)


def test_a_profile_against_itself_moves_nothing(streams):
    same = diff(streams["a"], streams["a"]).windows
    assert all(k.tv == 0 and not k.hot_moved for k in same.keys)


def test_only_one_side_with_timelines_is_a_note(streams):
    plain = trace_profile("cloudphysics")
    d = diff(streams["a"], plain)
    assert d.windows is None
    assert any("only A has head timelines" in n for n in d.notes)
    assert "only A has head timelines" in diff_table(d)


def test_the_table_lists_the_event_compactly(streams):
    d = diff(streams["a"], streams["b"], movers=5)
    text = diff_table(d, limit=5)
    section = text[text.index("windows: 12 per span"):].splitlines()
    row = next(line for line in section if line.split()[:1] == [streams["event"]])
    assert row.rstrip().endswith("- -> 5-6")
    # the top 3 of each head (the same keys here) plus at most 5 movers, and two summaries
    rows = [line for line in section[3:] if line.startswith("  ")]
    assert 3 <= len(rows) <= 3 + 5
    assert "keys were hot in other windows in B than in A" in text


# -- as a user runs it -----------------------------------------------------------------------
def test_cli_diff_shows_the_windows_and_json_has_the_numbers(tmp_path, streams):
    a_path, b_path = tmp_path / "a.json", tmp_path / "b.json"
    streams["a"].save(a_path)
    streams["b"].save(b_path)
    res = run_cli("diff", str(a_path), str(b_path), "--movers", "5")
    assert res.returncode == 0, res.stderr
    assert "windows: 12 per span, A 10 min each" in res.stdout
    assert "- -> 5-6" in res.stdout
    res = run_cli("diff", str(a_path), str(b_path), "--json")
    doc = json.loads(res.stdout)
    win = doc["windows"]
    assert win["windows"] == W and win["a"]["window_seconds"] == 600
    row = next(k for k in win["keys"] if k["key"] == streams["event"])
    assert row["hot_windows_b"] == list(EVENT) and row["hot_windows_a"] == []
    assert len(row["counts_a"]) == len(row["share_b"]) == W
    assert sum(row["counts_b"][w] for w in EVENT) == sum(row["counts_b"])
    plain = tmp_path / "plain.json"
    trace_profile("cloudphysics").save(plain)
    res = run_cli("diff", str(a_path), str(plain), "--json")
    doc = json.loads(res.stdout)
    assert doc["windows"] is None and any("only A" in n for n in doc["notes"])


def test_an_event_that_moved_is_called_out(tmp_path):
    import subprocess
    import sys

    from tests._event_trace import EVENT_KEY, write_event_trace

    paths = []
    for name, event, seed in (("a", (3600.0, 4200.0), 1), ("b", (1800.0, 2400.0), 5)):
        trace = write_event_trace(tmp_path / f"{name}.parquet", event=event, seed=seed,
                                  rps=20.0)
        out = tmp_path / f"{name}.json"
        run = subprocess.run([sys.executable, "-m", "hotshard", "profile", str(trace.path),
                              "--key", "channel_id", "--time", "ts", "-o", str(out)],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        paths.append(str(out))
    run = subprocess.run([sys.executable, "-m", "hotshard", "diff", *paths],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    moved = [ln for ln in run.stdout.splitlines() if ln.startswith("event moved")]
    assert len(moved) == 1
    assert moved[0].startswith(f"event moved: key {EVENT_KEY} was hot in 60:00-70:00 in A")
    assert "and in 30:00-40:00 in B" in moved[0]
