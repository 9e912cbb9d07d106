"""The demo's headline and its report, on synthetic repeated runs (no service started): a
host-bound run makes no live p99 claim, anywhere the demo writes one; shard-bound runs whose
ranges are apart do, led by what is solid (CPU, requests, the model from CPU)."""

from __future__ import annotations

import re

import pytest

from hotshard.demo import LiveRuns, headline
from hotshard.observations import Latency, Observations, ShardObservation

DURATION = 4.0
REQUESTS = (100, 100, 90, 270)  # the profile's keys: shard 3 hot


def _obs(label: str, *, cpu: tuple[float, ...], p50: float, p99: float, host: float,
         requests: tuple[int, ...] = REQUESTS) -> Observations:
    shards = tuple(ShardObservation(id=str(i), cpu=c, requests=n)
                   for i, (c, n) in enumerate(zip(cpu, requests, strict=True)))
    return Observations(
        label=label, rate_rps=150.0, achieved_rps=140.0, duration_s=DURATION, model="open",
        latency_ms=Latency(min=2.0, p50=p50, p99=p99, max=p99 * 1.2),
        service_time_ms=Latency(min=1.9, p50=p50 * 0.97, p99=p99 * 0.99, max=p99 * 1.2),
        shards=shards, extra={"drive": {"dispatch_lag_ms": {"p50": 0.3, "p99": 2.0},
                                        "host_cpu": {"busy": host, "cores": 2}}})


def _runs(label: str, cpu: tuple[float, ...], p99s: tuple[float, ...], *, host: float = 0.6,
          p50: float = 9.0, requests: tuple[int, ...] = REQUESTS) -> LiveRuns:
    return LiveRuns(label, tuple(_obs(label, cpu=cpu, p50=p50, p99=p, host=host,
                                      requests=requests) for p in p99s))


UNIFORM = ("load test (uniform keys)", (0.18, 0.17, 0.19, 0.20))
SKEWED = ("production-like (profile keys)", (0.12, 0.13, 0.11, 0.34))
MITIGATED = ("profile keys, mitigated", (0.12, 0.13, 0.10, 0.13))
EVEN = (140, 145, 150, 155)


def _host_bound_uniform() -> LiveRuns:
    # the user's run: p50 1.9 s with every shard under 20% CPU on a saturated machine
    return _runs(*UNIFORM, (4069.0, 3900.0, 4400.0), host=0.99, p50=1900.0, requests=EVEN)


def test_a_host_bound_run_makes_no_live_p99_claim():
    uniform = _host_bound_uniform()
    skewed = _runs(*SKEWED, (4069.0, 3000.0, 5100.0), host=0.99, p50=1500.0)
    mitigated = _runs(*MITIGATED, (74.0, 90.0, 60.0), host=0.99, p50=30.0)
    assert uniform.bound.verdict == skewed.bound.verdict == "host-bound"
    result = headline(uniform, skewed, mitigated, prediction_share=0.48)
    text = "\n".join(result.lines)
    assert not result.test_vs_production.supported and not result.fix.supported
    assert "4,069 ms" not in text and "lower;" not in text and "higher;" not in text
    live = [line for line in result.lines if line.startswith("Live p99")]
    assert len(live) == 2 and all("not compared" in line and "host-bound" in line
                                  for line in live)
    # what is solid still leads: the hot shard's requests and CPU, the fix's CPU, the model
    assert result.lines[0].startswith("Hot shard: the profile's keys put 48% of the requests "
                                      "on shard 3 (predict said 48%), and its CPU is 34%")
    assert "shard 3 went from 34% to 13% CPU" in result.lines[1]
    assert result.lines[2].startswith("Model (the shards' queues alone")
    model = result.model_p99_ms
    assert model[SKEWED[0]] > model[MITIGATED[0]]
    assert "lower) at 140 req/s" in result.lines[2]


def test_shard_bound_runs_apart_make_the_claim_with_the_model():
    uniform = _runs(*UNIFORM, (20.0, 24.0, 22.0), requests=EVEN)
    skewed = _runs(*SKEWED, (30.0, 28.0, 33.0, 31.0, 29.0))
    mitigated = _runs(*MITIGATED, (20.0, 18.0, 22.0))
    result = headline(uniform, skewed, mitigated)
    assert result.fix.supported and result.fix.direction == "lower"
    assert result.lines[-1] == (
        "Live p99, profile keys without and with the mitigations: from 28-33 ms to 18-22 ms "
        "over 5 and 3 runs of the same requests (1.50x lower; every run shard-bound, the "
        "ranges apart), as the model says.")
    # uniform 20-24 ms against 28-33 ms: apart, so stated, in the direction measured
    assert result.test_vs_production.supported
    assert result.test_vs_production.direction == "higher"


def test_the_demo_evidence_carries_its_verdicts_into_the_report():
    pytest.importorskip("matplotlib")
    from hotshard.report.html import build_report

    uniform = _host_bound_uniform()
    skewed = _runs(*SKEWED, (30.0, 28.0, 33.0))
    mitigated = _runs(*MITIGATED, (20.0, 18.0, 22.0))
    mitigated = LiveRuns(mitigated.label, tuple(
        Observations.from_dict({**o.to_dict(), "mitigations": {"cache_ttl_s": 1.0}})
        for o in mitigated.runs))
    evidence = [g.evidence() for g in (skewed, uniform, mitigated)]
    # the records survive a file
    evidence = [Observations.from_dict(o.to_dict()) for o in evidence]
    words = re.sub(r"<[^>]+>", " ", build_report(evidence))
    # the host-bound load test: its p99 is not set against production's
    assert "p99 is 30 ms" not in words and "load test (uniform keys)&#x27;s" not in words
    assert "Live p99 not compared: load test (uniform keys), run 1 of 3, was host-bound" \
        in words
    # the fix: both sides shard-bound, ranges apart over three runs each: stated
    assert "p99 from 30 ms to 20 ms (1.50x lower)" in words
    # the same mitigated run against a host-bound production: not stated
    hot = [g.evidence() for g in (_runs(*SKEWED, (4069.0, 3000.0, 5100.0), host=0.99,
                                        p50=1500.0), uniform, mitigated)]
    words = re.sub(r"<[^>]+>", " ", build_report(hot))
    assert not re.search(r"p99 from [\d,.]+ m?s to", words)
    assert "x lower)" not in words and "x higher)" not in words
    assert "p99 is not compared" in words
