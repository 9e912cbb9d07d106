"""The locality order made window by window: the same order whatever the windows, every key's
exact count, rows asked for in any order by chunk threads, and the correction measured on a
shorter run when the run is long. (An event channel with a timeline of its own is followed
window by window in tests/workload/test_profile_arrivals.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hotshard.profile.document import Profile
from hotshard.workload import locality_order
from hotshard.workload.locality_order import (
    _class_tables,
    _rows_for,
    bin_bounds,
    class_of,
    key_counts,
    profile_order,
)
from hotshard.workload.locality_stream import LocalityStream, StreamedPositions, _Stopped
from hotshard.workload.profile_sampler import from_profile

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def event_profile():
    return Profile.load(EXAMPLES / "incident-event.profile.json")


def _stream(profile, events: int, units: int, seed: int = 7) -> LocalityStream:
    """The order's inputs as ``locality_stream`` makes them, with the timelines' warp."""
    classes = from_profile(profile).classes
    rng = np.random.default_rng(5)
    counts = key_counts(classes.key_weight, classes.sizes, events, rng)
    measured, cdf = _class_tables(profile.locality)
    rows = _rows_for(class_of(np.rint(counts * profile.locality.events / events)), measured)
    lo, hi = bin_bounds(np.arange(locality_order.N_BINS))
    warp_u, warp_y, warp_row = locality_order._with_rest(
        *locality_order.head_warp(profile.timelines, None), counts)
    return counts, LocalityStream(counts, rows, cdf, lo, hi - lo, seed, warp_u, warp_y,
                                  warp_row, units=units)


def test_the_order_is_the_same_whatever_the_windows_and_every_count_exact(event_profile):
    counts, narrow = _stream(event_profile, 400_000, units=1 << 14)
    _, wide = _stream(event_profile, 400_000, units=1 << 22)
    assert narrow.n_windows == 25 and wide.n_windows == 1
    a = np.concatenate([narrow.take(n) for n in (1, 99_999, 150_000, 10**9)])
    b = wide.take(400_000)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.bincount(a, minlength=counts.size), counts)
    assert narrow.take(10).size == 0  # the order is over


def test_chunks_asked_for_in_any_order_get_the_rows_of_the_whole_order(event_profile):
    sampler = from_profile(event_profile)
    events = 300_000

    def make(stop=None):
        return profile_order(event_profile, sampler, events, 3, stop=stop)

    whole = make().take(events)
    rows = StreamedPositions(make, events)
    starts = [0, 100_000, 50_000, 150_000, 250_000, 200_000]  # threads a chunk apart
    got = {s: rows[s:s + 50_000] for s in starts}
    for s, part in got.items():
        np.testing.assert_array_equal(part, whole[s:s + 50_000])
    assert rows.start == 300_000 and rows.buffer.size == 0  # all served: nothing kept
    np.testing.assert_array_equal(rows[0:10], whole[:10])  # asked again: made again
    np.testing.assert_array_equal(np.asarray(rows), whole)
    rows.cancel()  # an interrupted run: the order stops at its next window
    with pytest.raises(_Stopped):
        rows[0:10]


def test_a_long_run_takes_its_correction_from_a_shorter_one(event_profile, monkeypatch):
    """Past CORRECTION_PREFIX references the correction is measured on a run of that length
    of the same profile; the long run's counts stay exact."""
    sampler = from_profile(event_profile)
    monkeypatch.setattr(locality_order, "CORRECTION_PREFIX", 50_000)
    order = profile_order(event_profile, sampler, 400_000, 3).take(400_000)
    classes = sampler.classes
    want = key_counts(classes.key_weight, classes.sizes, 400_000,
                      np.random.default_rng(np.random.SeedSequence(3, spawn_key=(0x10CA1,))))
    np.testing.assert_array_equal(np.bincount(order, minlength=want.size), want)


@pytest.mark.slow
def test_sigterm_while_the_order_is_made_ends_generate_at_once(tmp_path):
    """_Stopped while chunk threads are inside the order's first pass or a window: one line,
    exit 143, no file, and the threads do not run the pass out (the process ends within a
    few seconds, not when a 5e7-reference order would be done)."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run.parquet"
    hotshard = str(Path(sys.executable).with_name("hotshard"))
    proc = subprocess.Popen([hotshard, "generate", str(EXAMPLES / "incident.profile.json"),
                             "--messages", "5e7", "--seed", "1", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)
    proc.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert time.monotonic() - stopped < 10
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err
    assert not list(tmp_path.iterdir())


def test_a_steady_head_key_large_enough_to_heat_a_shard_keeps_its_timeline():
    """A head key of at least ``TIMELINE_SHARE`` of the requests gets in each of the
    timeline's windows its share of its requests (largest remainder), however its class's
    pooled reuse times would have spread them: laid out over the whole run, the incident's
    steady ranks 1-11 swung by a standard deviation of 23-40% from window to window, against
    1-3% by chance (Poisson). Smaller keys keep the class's layout."""
    profile = Profile.load(EXAMPLES / "incident.profile.json")
    counts, stream = _stream(profile, 1_200_000, units=1 << 22)
    order = stream.take(1_200_000)
    timelines = profile.timelines
    windows = timelines.windows
    share = counts[: len(profile.head_keys)] / counts.sum()
    own = np.flatnonzero(share >= locality_order.TIMELINE_SHARE)
    assert 5 <= own.size < len(profile.head_keys)
    window_of = np.arange(order.size) * windows // order.size   # the run is even in time
    for k in own:
        got = np.bincount(window_of[order == k], minlength=windows)
        expected = np.diff(timelines.cumulative()[k]) * counts[k]
        # independent draws would spread a window's count by 1 / sqrt(its mean) (Poisson);
        # the key's own windows stay within three times that (the row windows' edges move
        # with every other key's instants), where the class's layout spread it 8-10 times
        spread = float(np.std(got / expected))
        assert spread < 3 / np.sqrt(expected.mean()), (k, got, expected)
