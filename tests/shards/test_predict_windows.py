"""predict with timelines: each window's shares, the peak window and the events, against the
truth of synthetic traces whose event is known by construction."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from hotshard.mitigations import Mitigations
from hotshard.profile.count import count_profile
from hotshard.profile.document import Profile
from hotshard.shards.partitioners import partitioner_for
from hotshard.shards.predict import predict
from tests._event_trace import EVENT_KEY, STEADY_KEY, write_event_trace

WINDOW = 600.0  # 12 timeline windows over 2 h


def _profile(trace):
    return count_profile([str(trace.path)], key="channel_id", time_col="ts")


@pytest.fixture(scope="module")
def aligned(tmp_path_factory):
    trace = write_event_trace(tmp_path_factory.mktemp("ev") / "aligned.parquet")
    return trace, _profile(trace)


@pytest.fixture(scope="module")
def straddling(tmp_path_factory):
    trace = write_event_trace(tmp_path_factory.mktemp("ev") / "straddle.parquet",
                              event=(3900.0, 4500.0), seed=2)
    return trace, _profile(trace)


def _part(profile):
    return partitioner_for("redis-cluster", 16, integer_keys=profile.integer_keys)


def _saved_without(profile, section: str, path):
    """``profile`` written to ``path`` without one of its sections (an older profile)."""
    doc = profile.to_dict()
    doc.pop(section)
    path.write_text(json.dumps(doc))
    return path


def _true_share(trace, key, start_s, end_s):
    """The key's share of every request in [start_s, end_s) of the raw trace."""
    table = pq.read_table(trace.path)
    t = table.column("ts").to_numpy() - table.column("ts").to_numpy().min()
    keys = table.column("channel_id").to_numpy()
    inside = (t >= start_s - 1e-6) & (t < end_s + 1e-6)
    return float(np.mean(keys[inside] == key))


def test_the_event_is_named_with_its_shard_window_and_share(aligned):
    trace, profile = aligned
    part = _part(profile)
    out = predict(profile, part).to_dict()
    event_shard = int(part.shard_of([str(EVENT_KEY)])[0])
    events = [e for e in out["events"] if e["key"] == str(EVENT_KEY)]
    assert len(events) == 1
    e = events[0]
    assert e["shard"] == event_shard
    assert abs(e["start_s"] - trace.event_start) <= WINDOW
    assert abs(e["end_s"] - trace.event_end) <= WINDOW
    assert abs(e["share"] - trace.event_share) < 0.10
    assert abs(e["share"] - _true_share(trace, EVENT_KEY, e["start_s"], e["end_s"])) < 0.01
    # the peak: the event's window, the event's shard, the event key first on it
    peak = out["peak"]
    assert peak["hottest"]["shard"] == event_shard
    assert abs(peak["start_s"] - trace.event_start) <= WINDOW
    assert peak["hottest"]["top_keys"][0]["key"] == str(EVENT_KEY)
    assert peak["hottest"]["share"] >= trace.event_share
    # the whole span names the steady key's shard, not the event's
    steady_shard = int(part.shard_of([str(STEADY_KEY)])[0])
    assert out["hottest"]["shard"] != event_shard or steady_shard == event_shard
    # every window's shares sum to one, as the whole span's do
    for w in out["windows"]:
        assert sum(s["share"] for s in w["shards"]) == pytest.approx(1.0, abs=1e-9)
    assert sum(w["requests"] for w in out["windows"]) == pytest.approx(profile.events, rel=1e-9)


def test_an_event_across_two_windows_is_one_event(straddling):
    trace, profile = straddling
    out = predict(profile, _part(profile)).to_dict()
    events = [e for e in out["events"] if e["key"] == str(EVENT_KEY)]
    assert len(events) == 1
    e = events[0]
    # read in the profile's sub-windows (a tenth of a window): the event's own span and share,
    # not two windows at half of it
    assert abs(e["start_s"] - trace.event_start) <= WINDOW / 10
    assert abs(e["end_s"] - trace.event_end) <= WINDOW / 10
    assert abs(e["share"] - trace.event_share) < 0.05
    # the share is of the reported span's requests, as the raw trace has it
    assert abs(e["share"] - _true_share(trace, EVENT_KEY, e["start_s"], e["end_s"])) < 0.01


def test_steady_traffic_has_no_event(tmp_path):
    trace = write_event_trace(tmp_path / "steady.parquet", with_event=False, seed=3)
    out = predict(_profile(trace), _part(_profile(trace))).to_dict()
    # every head key's window counts are Poisson around its steady share: a 5-sd excess on
    # 500 keys x 12 windows is a 1-in-a-million slip
    assert out["events"] == []


def test_peak_cpu_is_at_the_window_rate_and_mitigations_reach_the_window(aligned):
    trace, profile = aligned
    part = _part(profile)
    plain = predict(profile, part, rps=trace.rps, capacity=40.0)
    tl = plain.timeline
    hot = tl.peak.hottest
    rate = trace.rps * tl.requests[tl.peak_window] / tl.requests.mean()
    assert tl.peak.rps == pytest.approx(rate)
    assert tl.peak.cpu[hot] == pytest.approx(rate * tl.peak.shares[hot] / 40.0)
    split = predict(profile, part, rps=trace.rps, capacity=40.0,
                    mitigations=Mitigations(split_keys=1, split_into=8)).timeline.peak.after
    # the window's top key (the event channel) is split 8 ways onto 8 shards
    assert split.shares.max() < 0.5 * tl.peak.shares[hot]
    assert any(k.startswith(f"{EVENT_KEY}#") for k, _ in split.hottest_keys)


def test_without_timelines_the_whole_span_only(aligned, tmp_path):
    _, profile = aligned
    path = _saved_without(profile, "timelines", tmp_path / "plain.json")
    out = predict(Profile.load(path), _part(profile)).to_dict()
    assert "peak" not in out and "events" not in out
    run = subprocess.run([sys.executable, "-m", "hotshard", "predict", str(path), "-p",
                          "redis-cluster", "-n", "16"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "no timelines in the profile" in run.stdout


def test_without_arrivals_the_tail_is_steady_and_said(aligned, tmp_path):
    trace, profile = aligned
    path = _saved_without(profile, "arrivals", tmp_path / "no-arrivals.json")
    out = predict(Profile.load(path), _part(profile)).to_dict()
    assert out["tail_steady"] is True
    e = next(e for e in out["events"] if e["key"] == str(EVENT_KEY))
    assert abs(e["share"] - trace.event_share) < 0.10


def test_the_cli_leads_with_the_peak(aligned, tmp_path):
    trace, profile = aligned
    path = tmp_path / "p.json"
    profile.save(path)
    run = subprocess.run([sys.executable, "-m", "hotshard", "predict", str(path), "-p",
                          "redis-cluster", "-n", "16"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    shard = int(_part(profile).shard_of([str(EVENT_KEY)])[0])
    second = run.stdout.splitlines()[1]
    assert second.startswith(f"  in 60:00-70:00 shard {shard} carries ")
    assert f"key {EVENT_KEY}, " in run.stdout.split("over the whole span")[0]
    assert f"event: key {EVENT_KEY} (shard {shard})" in run.stdout


def test_the_event_detail_round_trips_and_is_checked(straddling, tmp_path):
    from hotshard.errors import ProfileError

    _, profile = straddling
    detail = profile.timelines.detail
    assert [profile.head_keys[d.key] for d in detail] == [str(EVENT_KEY)]
    path = tmp_path / "p.json"
    profile.save(path)
    assert path.stat().st_size < 100_000
    again = Profile.load(path)
    assert again.timelines.detail[0].counts.tolist() == detail[0].counts.tolist()
    doc = json.loads(path.read_text())
    doc["timelines"]["detail"][0]["counts"][3] += 1   # no longer adds up to its window
    path.write_text(json.dumps(doc))
    with pytest.raises(ProfileError, match=r"timelines\.detail\[0\] does not fit"):
        Profile.load(path)


def test_detail_totals_must_agree_with_the_arrivals(straddling, tmp_path):
    from hotshard.errors import ProfileError

    _, profile = straddling
    doc = profile.to_dict()
    totals = doc["timelines"]["detail"][0]["totals"]
    doc["timelines"]["detail"][0]["totals"] = [10 * t for t in totals]  # still <= events?
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ProfileError, match=r"where the arrivals count"):
        Profile.load(path)


def test_saturation_is_said_for_the_peak_and_the_whole_span_apart(aligned, tmp_path):
    trace, profile = aligned
    path = tmp_path / "p.json"
    profile.save(path)
    run = subprocess.run([sys.executable, "-m", "hotshard", "predict", str(path), "-p",
                          "redis-cluster", "-n", "16", "--rps", "60", "--capacity", "20"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())
    assert "saturated: " in text and "it reaches 100% in that window at" in text
    assert "Over the whole span's average, " in text


def test_predict_detect_says_how_long_each_event_goes_unmitigated(aligned, tmp_path):
    """An event of share S over a key's steady share p is found once its share fills the
    hot share h of the window: after (h - p) / (S - p) of 9 to 10 slices of it, then up to
    one 0.5 s reading (``Detection.time_to_detect``); the bounds printed are those."""
    from hotshard.detect.policy import Detection
    from tests.conftest import run_cli

    trace, profile = aligned
    path = tmp_path / "p.json"
    profile.save(path)
    res = run_cli("predict", str(path), "-p", "redis-cluster", "-n", "16", "--replicas", "3",
                  "--detect", "--hot-window", "4s", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)["detection"]
    (e,) = [e for e in doc["events"] if e["key"] == str(EVENT_KEY)]
    rule = Detection(window_s=4.0)
    event = next(x for x in predict(profile, _part(profile)).timeline.events
                 if x.key == str(EVENT_KEY))
    fill = (0.05 - event.overall_share) / (event.share - event.overall_share)
    assert e["found_after_s"] == [round(fill * 3.6, 3), round(fill * 4.0 + 0.5, 3)]
    assert rule.time_to_detect(event.share, event.overall_share) == pytest.approx(
        (fill * 3.6, fill * 4.0 + 0.5))
    text = run_cli("predict", str(path), "-p", "redis-cluster", "-n", "16", "--detect")
    assert f"key {EVENT_KEY} on shard {e['shard']}" in text.stdout
    assert "unmitigated until then" in text.stdout
    assert "no mitigation given" in text.stderr
    bad = run_cli("predict", str(path), "-p", "redis-cluster", "-n", "16", "--hot-window", "4s")
    assert bad.returncode == 2 and "add --detect" in bad.stderr
