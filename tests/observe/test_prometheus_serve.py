"""`observe prometheus --preset hotshard`: a real Prometheus scraping `hotshard serve` every
second while `hotshard drive` sends the incident-event profile's keys (one channel with 30% of
the requests), checked against the service's own /stats over the same window.

Why the tolerances hold. The window opens before the drive (a scrape after the first /stats
snapshot is waited for) and closes after it (a scrape after the drive is waited for before the
second snapshot), so the first and last scrapes inside the window bracket every request: the
counter deltas Prometheus holds and /stats' deltas count the same requests, and the shares
agree to well within 1 point (any difference is a request between a snapshot and a scrape;
there are none: nothing else is sent). CPU: Prometheus' CPU seconds are the workers' /proc
counters read at the scrapes, /stats' the same counters read at the snapshots; outside the
drive the workers idle, so both deltas hold the drive's CPU seconds, and over the same span
(the observation's duration_s) they agree to the idle workers' CPU between a scrape and a
snapshot: far below 3 points. Latency: histogram_quantile interpolates inside the bucket where
the rank falls, so a shard's p99 and the exact p99 (/stats' window holds the whole drive, 2%
above the exact value at most) lie in one bucket: within the largest bucket ratio, 5/3.
"""

from __future__ import annotations

import json
import time

import pytest

from hotshard.service.stats import PROMETHEUS_BOUNDS
from tests.conftest import ROOT, run_cli
from tests.observe._prom import prometheus, scrapes
from tests.service._traffic import serve

pytestmark = pytest.mark.slow

PROFILE = str(ROOT / "examples" / "incident-event.profile.json")
BUCKET_RATIO = max(b / a for a, b in zip(PROMETHEUS_BOUNDS, PROMETHEUS_BOUNDS[1:],
                                          strict=False))


def _cpu_seconds(shard: dict) -> float:
    return shard["cpu_seconds"] + sum(r["cpu_seconds"] or 0 for r in shard["replicas"])


# timing: it asserts the load the drive achieved (the hot shard busy, p99 in the windows),
# which a starved machine (the idle pass's load beside it) does not deliver
@pytest.mark.timing
def test_prometheus_preset_hotshard_matches_the_services_own_stats(tmp_path):
    with serve(tmp_path / "data", "--shards", "4", "--cost-ms", "2") as svc:
        target = svc.url.removeprefix("http://")
        jobs = {"hotshard": {"static_configs": [{"targets": [target]}]}}
        with prometheus(tmp_path / "prom", jobs) as prom:
            before = svc.stats()
            t0 = time.time()
            scrapes(prom, "hotshard", t0, targets=1)
            r = run_cli("drive", svc.url, PROFILE, "--rps", "200", "--duration",
                        "6s", "--seed", "3", "-q", "-o", str(tmp_path / "drive.json"))
            assert r.returncode == 0, r.stderr
            scrapes(prom, "hotshard", time.time(), targets=1)
            after = svc.stats()
            t1 = time.time()
            out = tmp_path / "prod.json"
            r = run_cli("observe", "prometheus", prom, "--start", f"{t0:.3f}", "--end",
                        f"{t1:.3f}", "--preset", "hotshard", "-o", str(out))
            assert r.returncode == 0, r.stderr
            uniform = tmp_path / "uniform.json"
            r = run_cli("drive", svc.url, "--dist", "uniform:300000", "--rps", "200",
                        "--duration", "4s", "--seed", "4", "-q", "--label", "load test",
                        "-o", str(uniform))
            assert r.returncode == 0, r.stderr
    obs = json.loads(out.read_text())
    shards = {s["id"]: s for s in obs["shards"]}
    old = {str(s["id"]): s for s in before["shards"]}
    new = {str(s["id"]): s for s in after["shards"]}
    assert set(shards) == set(new) == {"0", "1", "2", "3"}
    counted = {k: new[k]["requests"] - old[k]["requests"] for k in new}
    total = sum(counted.values())
    assert total > 1000  # 200/s for 6 s
    observed_total = sum(s["requests"] for s in shards.values())
    for k, shard in shards.items():
        assert abs(shard["requests"] / observed_total - counted[k] / total) < 0.01, (
            shards, counted)
    span = obs["duration_s"]
    for k, shard in shards.items():
        own = (_cpu_seconds(new[k]) - _cpu_seconds(old[k])) / span
        assert abs(shard["cpu"] - own) < 0.03, (k, shard["cpu"], own)
    hottest = max(counted, key=counted.get)
    assert counted[hottest] / total > 0.35  # the event channel's shard (predict: ~45%)
    assert shards[hottest]["cpu"] > 0.08  # 2 ms a read: the hot shard is busy, not idle
    assert abs(obs["rate_rps"] * span - observed_total) < 1
    # latency from the histogram: each shard's p99 in the bucket of /stats' exact-ish p99
    assert obs["latency_ms"]["p50"] <= obs["latency_ms"]["p99"]
    for k, shard in shards.items():
        exact = new[k]["p99_ms"]
        assert shard["p50_ms"] <= shard["p99_ms"]
        assert shard["p99_ms"] / BUCKET_RATIO <= exact <= shard["p99_ms"] * BUCKET_RATIO * 1.02
    # the time axis: every counter rise is in exactly one window (the later scrape's), so the
    # windows' requests add up to each shard's whole-run count; the hot shard is hottest in
    # the busiest window
    windows = obs["windows"]
    assert len(windows) >= 2
    for k, shard in shards.items():
        in_windows = sum(next(s["requests"] for s in w["shards"] if s["id"] == k)
                         for w in windows)
        assert in_windows == shard["requests"], (k, in_windows, shard["requests"])
    busiest = max(windows, key=lambda w: w["requests"])
    assert max(busiest["shards"], key=lambda s: s["requests"])["id"] == hottest
    assert all(0 <= s["cpu"] <= 1 for w in windows for s in w["shards"] if "cpu" in s)
    assert any(w.get("latency_ms", {}).get("p99") for w in windows)
    # production observed from Prometheus against the uniform load test: key skew
    r = run_cli("diagnose", str(out), "--baseline", str(uniform), "--json")
    assert r.returncode == 0, r.stderr
    verdicts = {c["cause"]: c["verdict"] for c in json.loads(r.stdout)["ranking"]}
    assert verdicts["key-skew"] == "fits"
    report = tmp_path / "report.html"
    r = run_cli("report", str(out), str(uniform), "-o", str(report))
    assert r.returncode == 0, r.stderr
    assert report.stat().st_size > 10_000
