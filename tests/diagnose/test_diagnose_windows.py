"""diagnose reasons per window: the peak window is named, and no sentence compares a whole-run
share with a latency made in one window."""

from __future__ import annotations

import pytest

from hotshard.diagnose.engine import diagnose
from hotshard.observations import Observations
from hotshard.profile.count import count_profile
from hotshard.shards.partitioners import partitioner_for
from tests._event_trace import EVENT_KEY, STEADY_KEY, write_event_trace

SHARDS = 16


@pytest.fixture(scope="module")
def event_profile(tmp_path_factory):
    trace = write_event_trace(tmp_path_factory.mktemp("diag") / "trace.parquet")
    return count_profile([str(trace.path)], key="channel_id", time_col="ts")


def _shards_of(profile):
    part = partitioner_for("redis-cluster", SHARDS, integer_keys=profile.integer_keys)
    return (int(part.shard_of([str(EVENT_KEY)])[0]), int(part.shard_of([str(STEADY_KEY)])[0]))


def _production(event_shard: int, steady_shard: int, *, windows: bool, event: bool = True,
                label: str = "production"):
    """12 windows of 10 minutes: the steady shard carries 14% throughout, the event shard 6%
    except in 60:00-70:00, where it carries 45% at 95% CPU with a 3.6 s p99."""
    rows = []
    with_event = event
    for w in range(12):
        event = with_event and w == 6
        shards = []
        for s in range(SHARDS):
            share = 0.45 if (event and s == event_shard) else (
                0.14 if s == steady_shard else 0.06 if s == event_shard else None)
            shards.append({"id": str(s), "share": share})
        fixed = sum(x["share"] for x in shards if x["share"] is not None)
        rest = (1 - fixed) / sum(x["share"] is None for x in shards)
        out = []
        for x in shards:
            share = x["share"] if x["share"] is not None else rest
            hot = event and x["id"] == str(event_shard)
            out.append({"id": x["id"], "requests": int(round(share * 180_000)),
                        "cpu": 0.95 if hot else min(0.9, share * 2.5),
                        "p50_ms": 900.0 if hot else 5.0, "p99_ms": 3600.0 if hot else 30.0})
        rows.append({"start_s": 600.0 * w, "end_s": 600.0 * (w + 1), "requests": 180_000,
                     "latency_ms": {"p50": 5.5, "p99": 2900.0 if event else 31.0},
                     "shards": out})
    totals = {str(s): sum(r["shards"][s]["requests"] for r in rows) for s in range(SHARDS)}
    shards = [{"id": str(s), "requests": totals[str(s)],
               "cpu": min(0.99, totals[str(s)] / sum(totals.values()) * 2.5),
               "p99_ms": 3660.0 if s == event_shard else 30.0} for s in range(SHARDS)]
    doc = {"format": "hotshard.observations/1", "label": label, "rate_rps": 300,
           "duration_s": 7200, "latency_ms": {"p50": 5.5, "p99": 800.0}, "shards": shards,
           "extra": {}}
    if windows:
        doc["windows"] = rows
    doc.pop("extra")
    return Observations.from_dict(doc)


def test_the_peak_window_is_named_and_the_p99_compared_in_it(event_profile):
    event_shard, steady_shard = _shards_of(event_profile)
    assert event_shard != steady_shard
    prod = _production(event_shard, steady_shard, windows=True)
    d = diagnose(prod, profile=event_profile, partitioner="redis-cluster")
    when = d.when.to_dict()
    assert when["observed"]["shard"] == str(event_shard)
    assert (when["observed"]["start_s"], when["observed"]["end_s"]) == (3600.0, 4200.0)
    assert when["predicted"]["shard"] == str(event_shard)
    assert when["predicted"]["key"] == str(EVENT_KEY)
    assert when["agrees"] is True
    # window by window: this production's steady busiest shard is the steady key's, not the
    # profile's busiest (its Zipf top channel): they agree in the event's window alone
    assert when["predicted"]["windows_matched"] == {"same": 1, "compared": 12}
    skew = " ".join(d.finding("key-skew").evidence)
    assert "the latency lives where the load is" not in skew
    assert (f"in 60:00-70:00 shard {event_shard} served 45% of that window's requests"
            in skew)
    # the what-ifs are judged in the peak window, on the event's shard
    split = d.recommendations[0]
    assert "peak window (60:00-70:00)" in split.detail
    assert split.hottest_before == pytest.approx(when["predicted"]["share"])
    text = d.to_dict()
    assert text["when"]["evidence"][0].startswith("production's peak window is 60:00-70:00")


def test_without_windows_no_sentence_claims_the_latency_follows_the_load(event_profile):
    event_shard, steady_shard = _shards_of(event_profile)
    prod = _production(event_shard, steady_shard, windows=False)
    d = diagnose(prod, profile=event_profile, partitioner="redis-cluster")
    skew = " ".join(d.finding("key-skew").evidence)
    assert "the latency lives where the load is" not in skew
    assert "cannot show a shard that was hot in one window" in skew
    assert any("no time axis" in n for n in d.notes)
    # the profile still names when: its predicted peak
    assert d.when.observed is None and d.when.predicted["shard"] == str(event_shard)


def test_the_cli_prints_when(event_profile, tmp_path):
    import subprocess
    import sys

    event_shard, steady_shard = _shards_of(event_profile)
    prod = tmp_path / "prod.json"
    _production(event_shard, steady_shard, windows=True).save(prod)
    profile = tmp_path / "p.json"
    event_profile.save(profile)
    run = subprocess.run([sys.executable, "-m", "hotshard", "diagnose", str(prod), "--profile",
                          str(profile), "-p", "redis-cluster"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "When:" in run.stdout
    assert f"production's peak window is 60:00-70:00: shard {event_shard}" in run.stdout


def test_a_host_bound_run_gives_no_latency_evidence():
    """A run whose latency the machine made (every shard cool) is not a p99 to compare."""
    shards = [{"id": str(s), "requests": 1000, "cpu": 0.18, "p99_ms": 40.0} for s in range(4)]
    prod = Observations.from_dict({
        "format": "hotshard.observations/1", "label": "production", "rate_rps": 300,
        "duration_s": 60, "latency_ms": {"p50": 5.0, "p99": 900.0}, "shards": shards})
    test = Observations.from_dict({
        "format": "hotshard.observations/1", "label": "load test", "rate_rps": 500,
        "duration_s": 60, "model": "open", "key_generator": "uniform",
        "latency_ms": {"p50": 1900.0, "p99": 4000.0}, "shards": shards,
        "latency_bound": {"label": "load test", "verdict": "host-bound",
                          "reason": "p50 1,900 ms, 40x what its shards explain",
                          "p50_ms": 1900.0, "explained_p50_ms": 47.0, "over": 40.0,
                          "over_at": "p50", "hottest_cpu": 0.18}})
    d = diagnose(prod, test)
    assert any("'load test' was host-bound" in w for w in d.warnings)
    words = " ".join(e for f in d.ranking for e in f.evidence)
    assert "4,000 ms" not in words and "1,900 ms" not in words


def test_a_load_test_without_the_event_is_said_to_lack_it(event_profile):
    event_shard, steady_shard = _shards_of(event_profile)
    prod = _production(event_shard, steady_shard, windows=True)
    flat = _production(event_shard, steady_shard, windows=True, event=False, label="load test")
    d = diagnose(prod, flat, profile=event_profile, partitioner="redis-cluster")
    words = " ".join(d.when.sentences)
    assert f"'load test' never has it: its busiest window for shard {event_shard}" in words
    assert "0.13x the peak's 45%" in words
    same = diagnose(prod, _production(event_shard, steady_shard, windows=True,
                                      label="load test"), profile=event_profile)
    assert "'load test' has it: in its 60:00-70:00" in " ".join(same.when.sentences)
