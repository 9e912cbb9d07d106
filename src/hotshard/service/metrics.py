"""/metrics: the service's counters in Prometheus text format, via prometheus-client.

A custom collector reads the live counters at scrape time, so nothing is counted twice and each
app has its own registry (tests run several services in one process).

``hotshard_shard_request_duration_seconds`` is a real Prometheus histogram of each shard's
backend calls since start (``_bucket{le}``, ``_sum``, ``_count``), so
``histogram_quantile(0.99, sum by (shard, le) (rate(..._bucket[5m])))`` gives a shard's p99
over any window, as on any production service (``hotshard observe prometheus --preset
hotshard`` does exactly that). ``hotshard_shard_latency_seconds{quantile}`` stays: the
percentiles of the last ``/stats`` window, for a glance without PromQL.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from hotshard.service.chat import ChatService
from hotshard.service.stats import process_cpu_seconds

__all__ = ["render"]


class _Collector:
    def __init__(self, service: ChatService, state: dict[str, Any]) -> None:
        self.service = service
        self.state = state

    def collect(self) -> Any:
        svc = self.service
        requests = CounterMetricFamily("hotshard_shard_requests", "Backend calls per shard "
                                       "and kind", labels=["shard", "op"])
        errors = CounterMetricFamily("hotshard_shard_errors", "Failed backend calls per shard",
                                     labels=["shard", "kind"])
        hits = CounterMetricFamily("hotshard_shard_cache_hits", "Reads served by the gateway "
                                   "page cache, by the shard they spared", labels=["shard"])
        coalesced = CounterMetricFamily("hotshard_shard_coalesced_reads", "Reads that shared "
                                        "an identical in-flight read", labels=["shard"])
        depth = GaugeMetricFamily("hotshard_shard_queue_depth", "Calls in flight to the "
                                  "shard's processes", labels=["shard"])
        latency = GaugeMetricFamily("hotshard_shard_latency_seconds", "Backend call latency "
                                    "over the recent window", labels=["shard", "quantile"])
        duration = HistogramMetricFamily(
            "hotshard_shard_request_duration_seconds", "Backend call latency per shard since "
            "start (queueing included; successful calls)", labels=["shard"])
        cpu = CounterMetricFamily("hotshard_worker_cpu_seconds", "CPU time of each worker "
                                  "process", labels=["shard", "replica"])
        restarts = CounterMetricFamily("hotshard_worker_restarts", "Times the supervisor "
                                       "restarted the worker", labels=["shard", "replica"])
        up = GaugeMetricFamily("hotshard_worker_up", "1 when the worker answers",
                               labels=["shard", "replica"])
        hot_now = svc.hot_channels()   # read again first: a lift due now is counted now
        actions = CounterMetricFamily("hotshard_mitigation_actions", "Mitigation actions "
                                      "taken: a channel made hot, split, or lifted",
                                      labels=["action"])
        for action in ("hot", "split", "lifted"):
            actions.add_metric([action], svc.action_counts.get(action, 0))
        hot = GaugeMetricFamily("hotshard_hot_channels", "Channels the mitigations target "
                                "for their heat right now", labels=["shard"])
        per_shard: dict[int, int] = {}
        for channel in hot_now:
            shard = svc.router.shard_of(channel)
            per_shard[shard] = per_shard.get(shard, 0) + 1
        for shard in range(len(svc.counters)):
            hot.add_metric([str(shard)], per_shard.get(shard, 0))
        for shard, c in enumerate(svc.counters):
            s = str(shard)
            requests.add_metric([s, "read"], c.reads)
            requests.add_metric([s, "write"], c.writes)
            errors.add_metric([s, "error"], c.errors)
            errors.add_metric([s, "unavailable"], c.unavailable)
            errors.add_metric([s, "timeout"], c.timeouts)
            hits.add_metric([s], c.cache_hits)
            coalesced.add_metric([s], c.coalesced)
            window = c.latency.snapshot()
            for q in (50, 99):
                value = window.percentile(q)
                if value is not None:
                    latency.add_metric([s, f"0.{q}"], value)
            bounds, total, seconds = c.since_start.cumulative()
            duration.add_metric([s], [(repr(b), n) for b, n in bounds] + [("+Inf", total)],
                                seconds)
        in_flight: dict[int, int] = {}
        for w in svc.supervisor.workers():
            labels = [str(w.shard), str(w.replica)]
            in_flight[w.shard] = in_flight.get(w.shard, 0) + w.in_flight
            seconds = process_cpu_seconds(w.pid) if w.pid else None
            if seconds is not None:
                cpu.add_metric(labels, seconds)
            restarts.add_metric(labels, w.restarts)
            up.add_metric(labels, 1 if w.up else 0)
        for shard, value in sorted(in_flight.items()):
            depth.add_metric([str(shard)], value)
        yield from (requests, errors, hits, coalesced, depth, latency, duration, cpu,
                    restarts, up, actions, hot)


def render(service: ChatService, state: dict[str, Any]) -> tuple[bytes, str]:
    """(body, content type) of one scrape."""
    from prometheus_client import CONTENT_TYPE_LATEST

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(service, state))
    return generate_latest(registry), CONTENT_TYPE_LATEST
