"""/metrics' latency histogram is a real Prometheus histogram: cumulative buckets ending in
+Inf equal to _count, _sum the recorded seconds, parsed by prometheus-client's own parser."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from hotshard.service.chat import ShardCounters
from hotshard.service.metrics import render
from hotshard.service.stats import PROMETHEUS_BOUNDS


def test_histogram_buckets_are_cumulative_and_exact():
    counters = [ShardCounters(), ShardCounters()]
    latencies = [0.0004, 0.0009, 0.001, 0.0031, 0.2, 120.0]  # 120 s: only in +Inf
    for seconds in latencies:
        counters[1].since_start.record(seconds)
    service = SimpleNamespace(counters=counters,
                              supervisor=SimpleNamespace(workers=lambda: []),
                              action_counts={}, hot_channels=lambda: (),
                              router=SimpleNamespace(shard_of=lambda channel: 0))
    body, _ = render(service, {})
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    assert "hotshard_shard_latency_seconds" in families  # the old family stays
    hist = families["hotshard_shard_request_duration_seconds"]
    assert hist.type == "histogram"
    buckets = {(s.labels["shard"], s.labels["le"]): s.value for s in hist.samples
               if s.name.endswith("_bucket")}
    for bound in PROMETHEUS_BOUNDS:
        le = repr(bound)
        assert buckets[("1", le)] == sum(x <= bound for x in latencies)
        assert buckets[("0", le)] == 0
    assert buckets[("1", "+Inf")] == len(latencies)
    total = {s.labels["shard"]: s.value for s in hist.samples if s.name.endswith("_sum")}
    assert abs(total["1"] - sum(latencies)) < 1e-9 and total["0"] == 0
