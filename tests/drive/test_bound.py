"""drive.bound: what made a run's latency (its shards, the machine, the driver), on synthetic
evidence; the driver's lag warning threshold; p99 comparisons over repeats.

The expected numbers are worked out here from the queueing formulas the module cites: a
shard's busy time per request S = CPU x duration / requests, an M/M/1 mean sojourn
S / (1 - rho), its p99 ln(100) times that.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from hotshard.drive.bound import (
    LAG_MATERIAL,
    SLACK,
    CpuTimes,
    RunBound,
    classify_run,
    compare_p99,
    cpu_times,
    host_cpu,
    lag_share,
    queue_p99,
    recorded_comparison,
)
from hotshard.drive.breakdown import driver_warnings, to_observations
from hotshard.drive.record import Recorder
from hotshard.drive.run import DriveConfig, DriveResult
from hotshard.errors import InputError
from hotshard.observations import Latency, Observations, ShardObservation

DURATION = 8.0


def _run(label: str = "run", *, cpu: tuple[float, ...] = (0.18, 0.18, 0.18, 0.18),
         requests: tuple[int, ...] = (300, 300, 300, 300), latency: Latency | None = None,
         sent: Latency | None = None, lag: dict | None = None, host: dict | None = None,
         extra: dict | None = None) -> Observations:
    shards = tuple(ShardObservation(id=str(i), cpu=c, requests=n)
                   for i, (c, n) in enumerate(zip(cpu, requests, strict=True)))
    drive = {"dispatch_lag_ms": lag or {"p50": 0.5, "p99": 2.0}, "host_cpu": host}
    return Observations(label=label, duration_s=DURATION, rate_rps=150.0, shards=shards,
                        latency_ms=latency, service_time_ms=sent,
                        extra={"drive": drive, **(extra or {})})


def _sojourn(cpu: float, requests: int) -> float:
    service = 1000 * cpu * DURATION / requests
    return service / (1 - cpu)


# -- the verdicts ---------------------------------------------------------------------------------
def test_every_shard_cool_with_seconds_of_latency_is_host_bound():
    """The user's run: p50 1.9 s with every shard at ~18% CPU on a saturated machine."""
    lat = Latency(min=3.0, p50=1900.0, p99=4069.0, max=4200.0)
    obs = _run("load test", latency=lat, sent=Latency(min=2.9, p50=1890.0, p99=4050.0),
               lag={"p50": 1.0, "p99": 17.0}, host={"busy": 0.98, "cores": 2})
    bound = classify_run(obs)
    explained = 3.0 + _sojourn(0.18, 300)
    assert bound.verdict == "host-bound" and not bound.shard_bound
    assert bound.explained_p50_ms == pytest.approx(explained, rel=1e-3)
    assert bound.over == pytest.approx(1900.0 / explained, rel=1e-3) and bound.over > SLACK
    assert bound.host_busy == 0.98 and bound.host_cores == 2
    assert "98% busy" in bound.reason and "outside the shards" in bound.reason
    # 17 ms of lag is not the driver's run: it is under 1% of the latency
    assert bound.lag_share < 0.01


def test_one_hot_shard_explains_its_latency():
    cpu, requests = (0.85, 0.2, 0.2, 0.2), (900, 200, 200, 200)
    hot = _sojourn(0.85, 900)
    lat = Latency(min=2.0, p50=2.0 + 0.69 * hot, p99=2.0 + 4.6 * hot)
    bound = classify_run(_run("production", cpu=cpu, requests=requests, latency=lat,
                              host={"busy": 0.6, "cores": 2}))
    assert bound.verdict == "shard-bound" and bound.shard_bound
    assert bound.queue_shard == "0" and bound.queue_cpu == bound.hottest_cpu == 0.85
    assert bound.explained_p99_ms == pytest.approx(2.0 + math.log(100) * hot, rel=1e-3)


def test_a_saturated_shard_explains_any_wait_even_on_a_busy_machine():
    lat = Latency(min=2.0, p50=900.0, p99=5000.0)
    bound = classify_run(_run(cpu=(0.95, 0.2, 0.2, 0.2), latency=lat,
                              host={"busy": 1.0, "cores": 2}))
    assert bound.verdict == "shard-bound" and "saturated" in bound.reason


def test_a_busy_machine_is_host_bound_even_within_the_queueing_bound():
    lat = Latency(min=2.0, p50=10.0, p99=40.0)
    bound = classify_run(_run(latency=lat, host={"busy": 0.95, "cores": 2}))
    assert bound.over <= SLACK and bound.verdict == "host-bound"
    assert "waited for a core" in bound.reason


def test_big_lag_is_driver_bound():
    # half of the latency is the time the driver sent late
    lat = Latency(min=5.0, p50=40.0, p99=120.0)
    sent = Latency(min=1.0, p50=20.0, p99=70.0)
    bound = classify_run(_run(latency=lat, sent=sent, lag={"p50": 20.0, "p99": 60.0},
                              host={"busy": 0.7, "cores": 2}))
    assert bound.verdict == "driver-bound"
    assert bound.lag_share == pytest.approx(0.5) and bound.lag_percentile == "p50"
    assert "50% of the latency's p50" in bound.reason


def test_a_run_without_shard_cpu_cannot_be_judged():
    obs = Observations(label="dashboards", latency_ms=Latency(p50=10.0, p99=800.0),
                       shards=(ShardObservation(id="0", requests=10),), duration_s=60.0)
    bound = classify_run(obs)
    assert bound.verdict == "unknown" and "CPU" in bound.reason


def test_a_verdict_round_trips_through_its_record():
    bound = classify_run(_run(latency=Latency(min=1.0, p50=5.0, p99=20.0)))
    assert RunBound.from_dict(bound.to_dict()) == bound


@pytest.mark.parametrize(("record", "message"), [
    ({"verdict": "nonsense", "label": "x", "reason": "y"}, "latency_bound.verdict must be one"),
    ({"verdict": "host-bound", "label": "x", "reason": "y", "p99_ms": "slow"},
     "latency_bound.p99_ms has the wrong type"),
    ("host-bound", "latency_bound must be an object"),
])
def test_a_malformed_record_is_one_clear_line(tmp_path, record, message):
    from tests.conftest import run_cli

    with pytest.raises(InputError, match=message):
        RunBound.from_dict(record)
    bad = _run("load test", latency=Latency(min=1.0, p50=5.0, p99=20.0),
               extra={"latency_bound": record})
    path = tmp_path / "bad.json"
    bad.save(path)
    other = _run("production", latency=Latency(min=1.0, p50=9.0, p99=90.0))
    other.save(tmp_path / "prod.json")
    r = run_cli("report", str(tmp_path / "prod.json"), str(path), "-o",
                str(tmp_path / "r.html"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "load test: latency_bound" in r.stderr


# -- the lag's part of the latency ----------------------------------------------------------------
def test_lag_share_is_the_percentile_less_the_same_from_the_actual_send():
    share = lag_share({"p50": 10.0, "p99": 100.0}, {"p50": 9.0, "p99": 60.0},
                      {"p50": 1.0, "p99": 45.0})
    assert share.percentile == "p99" and share.share == pytest.approx(0.4)
    # without the send-side percentiles, the lag's own over the latency (an upper bound)
    assert lag_share({"p50": 10.0, "p99": 100.0}, None, {"p50": 1.0, "p99": 45.0}).share \
        == pytest.approx(0.45)
    assert lag_share(None, None, {"p50": 1.0}) is None


def _recorded(latency_s: float, lag_s: float, n: int = 200) -> DriveResult:
    """A run of ``n`` requests each sent ``lag_s`` late and answered ``latency_s`` after
    its intended send."""
    rec = Recorder()
    for i in range(n):
        t = i / 100
        rec.record(intended=t, sent=t + lag_s, done=t + latency_s, shard="0", error=None,
                   is_read=True, key=f"k{i}")
    config = DriveConfig(url="http://127.0.0.1:9", keys="uniform:10", rate=100,
                         duration=n / 100)
    return DriveResult(config, rec, n / 100, n, 0.0, "uniform")


def _lag_warnings(result: DriveResult) -> list[str]:
    return [w for w in driver_warnings(result) if "dispatch lag" in w]


def test_17_ms_of_lag_against_seconds_of_latency_is_no_warning():
    assert not _lag_warnings(_recorded(latency_s=1.9, lag_s=0.017))


def test_the_lag_warning_fires_from_a_material_share_and_says_how_much():
    below = LAG_MATERIAL * 0.8  # of a 50 ms latency: the lag's share is lag / latency
    above = LAG_MATERIAL * 1.25
    assert not _lag_warnings(_recorded(latency_s=0.050, lag_s=0.050 * below))
    warned = _lag_warnings(_recorded(latency_s=0.050, lag_s=0.050 * above))
    assert len(warned) == 1
    assert f"accounts for {above:.0%} of the latency" in warned[0]
    assert "bottleneck" in warned[0]
    # a sub-millisecond target: 0.4 ms of lag is most of a 0.6 ms latency
    assert _lag_warnings(_recorded(latency_s=0.0006, lag_s=0.0004))


def test_observations_record_the_machine_and_the_verdict():
    result = dataclasses.replace(_recorded(latency_s=0.05, lag_s=0.001),
                                 host_cpu={"busy": 0.42, "cores": 2})
    obs = to_observations(result, "load test")
    assert obs.extra["drive"]["host_cpu"] == {"busy": 0.42, "cores": 2}
    assert obs.extra["latency_bound"]["verdict"] == "unknown"  # no /stats: no shard CPU
    assert Observations.from_dict(obs.to_dict()).extra["latency_bound"] == \
        obs.extra["latency_bound"]


# -- the machine's CPU ----------------------------------------------------------------------------
def test_cpu_times_reads_proc_stat_with_steal_as_busy(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 800 20 3 2 10 0 0\ncpu0 50 0 25 400 10 1 1 5 0 0\n"
                    "cpu1 50 5 25 400 10 2 1 5 0 0\nintr 1\n")
    times = cpu_times(stat)
    assert times == CpuTimes(busy=100 + 5 + 50 + 3 + 2 + 10, total=170 + 800 + 20, cores=2)
    later = CpuTimes(busy=times.busy + 90, total=times.total + 100, cores=2)
    assert host_cpu(times, later) == {"busy": 0.9, "cores": 2}
    assert host_cpu(None, later) is None and host_cpu(later, later) is None
    assert cpu_times(tmp_path / "absent") is None


# -- the model and the comparisons ----------------------------------------------------------------
def test_queue_p99_is_the_m_m_1_closed_form():
    one = _run(cpu=(0.5,), requests=(800,), latency=Latency(min=3.0, p50=10.0, p99=30.0))
    mean = _sojourn(0.5, 800)
    assert queue_p99(one) == pytest.approx(math.log(100) * mean, rel=1e-6)
    assert queue_p99(one, path=True) == pytest.approx(3.0 + math.log(100) * mean, rel=1e-6)
    # two equal shards make the same mixture as one
    two = _run(cpu=(0.5, 0.5), requests=(800, 800))
    assert queue_p99(two) == pytest.approx(math.log(100) * mean, rel=1e-6)


def _bound(verdict: str = "shard-bound", label: str = "run") -> RunBound:
    return RunBound(label=label, verdict=verdict, reason=f"{verdict} for the test")


def test_a_host_bound_run_makes_no_p99_claim():
    before = [(_bound(label="before"), 300.0), (_bound("host-bound", "before"), 4069.0),
              (_bound(label="before"), 310.0)]
    after = [(_bound(label="after"), 74.0)] * 3
    claim = compare_p99(before, after)
    assert not claim.supported and claim.direction is None
    assert claim.reason.startswith("live p99 not compared: before, run 2 of 3, was host-bound")


def test_overlapping_repeats_make_no_claim_and_apart_ones_do():
    b = [(_bound(label="profile keys"), v) for v in (28.0, 33.0, 30.0)]
    overlapping = [(_bound(label="mitigated"), v) for v in (18.0, 29.0, 22.0)]
    claim = compare_p99(b, overlapping)
    assert not claim.supported and "within the run-to-run noise" in claim.reason
    apart = [(_bound(label="mitigated"), v) for v in (18.0, 21.0, 20.0)]
    claim = compare_p99(b, apart)
    assert claim.supported and claim.direction == "lower"
    assert claim.factor == pytest.approx(30.0 / 20.0)
    assert "from 28-33 ms to 18-21 ms over 3 and 3 runs" in claim.reason
    assert compare_p99(apart, b).direction == "higher"
    # one run a side says nothing about the noise
    assert not compare_p99(b[:1], apart[:1]).supported


def test_recorded_comparison_judges_only_runs_that_record_a_verdict():
    lat = Latency(min=1.0, p50=5.0, p99=20.0)
    plain = Observations(label="production", latency_ms=Latency(p50=12.0, p99=800.0))
    assert recorded_comparison(plain, plain) is None
    host = _run("load test", latency=lat, extra={"latency_bound": _bound("host-bound").to_dict()})
    claim = recorded_comparison(host, plain)
    assert claim is not None and not claim.supported
    fine = _run("load test", latency=lat, extra={"latency_bound": _bound().to_dict()})
    assert recorded_comparison(fine, plain).supported
