"""The report's time axis: per-shard load over time with the events marked, p99 over time."""

from __future__ import annotations

import re

import pytest

from hotshard.observations import Observations
from hotshard.profile.count import count_profile
from hotshard.report.html import build_report
from tests._event_trace import EVENT_KEY, write_event_trace
from tests.diagnose.test_diagnose_windows import _production, _shards_of


@pytest.fixture(scope="module")
def event_profile(tmp_path_factory):
    trace = write_event_trace(tmp_path_factory.mktemp("report") / "trace.parquet")
    return count_profile([str(trace.path)], key="channel_id", time_col="ts")


def _section(page: str, name: str) -> str:
    return re.search(rf'<section id="{name}">(.*?)</section>', page, re.S).group(1)


def test_the_time_section_names_both_peaks_and_the_event(event_profile):
    event_shard, steady_shard = _shards_of(event_profile)
    prod = _production(event_shard, steady_shard, windows=True)
    page = build_report([prod], profile=event_profile, partitioner="redis-cluster")
    time = _section(page, "time")
    assert time.count("<svg") == 1
    assert (f"production's peak window is 60:00-70:00: shard {event_shard} at 45%"
            in time)
    assert "the window's p99 (all shards) 2,900 ms" in time
    assert f"the profile predicts its peak in 60:00-70:00 on shard {event_shard}" in time
    assert f"event: key {EVENT_KEY} on shard {event_shard}" in time
    # the summary leads with the window, not only the whole run's shares
    summary = page.split("<main>")[0].split("In short.</b>")[1]
    assert summary.lstrip().startswith("production's peak window is 60:00-70:00")


def test_without_a_time_axis_the_section_says_so(event_profile):
    event_shard, steady_shard = _shards_of(event_profile)
    prod = _production(event_shard, steady_shard, windows=False)
    plain = Observations.from_dict({**prod.to_dict()})
    page = build_report([plain])
    time = _section(page, "time")
    assert "<svg" not in time
    assert "no time axis in its evidence" in time
