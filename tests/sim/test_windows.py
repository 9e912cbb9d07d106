"""simulate's time axis: windows whose numbers are their requests' own (the same histograms,
the same sums as the whole run), a run from a profile at its measured rate over its span with
its event in the window it happened, and the warning that names a shard saturated in it."""

from __future__ import annotations

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.sim.histogram import LatencyHistogram
from hotshard.sim.series import MAX_WINDOWS, SeriesRecorder, saturation, series_interval
from hotshard.sim.service_times import Exponential
from hotshard.sim.system import ServiceModel, simulate
from hotshard.workload import sampler as samplers
from tests.sim import event_trace
from tests.sim.event_trace import EVENT_END, EVENT_START, SPAN


def test_window_widths():
    assert series_interval(7200.0) == 360.0            # 1/20 of two hours: six minutes
    assert series_interval(90.0) in (4.0, 5.0)         # 4.5 s to a whole second
    assert series_interval(86400.0) == 4320.0          # a day: 72-minute windows
    assert series_interval(7200.0, 7199.9 / 12) == 600.0  # a profile's windows, snapped
    assert series_interval(7200.0, 900.0) == 900.0
    # never more than MAX_WINDOWS windows, whatever is asked
    assert series_interval(1e6, 1.0) == 1e6 / MAX_WINDOWS


def _pieces(arrival, shard, latency, cuts, shards):
    """Each piece of the run (cut at ``cuts``) in shard order, as simulate serves it."""
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        order = np.argsort(shard[lo:hi], kind="stable")
        yield (arrival[lo:hi][order], latency[lo:hi][order],
               np.bincount(shard[lo:hi], minlength=shards))


def _recorded(arrival, shard, latency, cuts, shards=3, duration=100.0, width=7.0):
    rec = SeriesRecorder(width, duration, shards, capacity=1, mean_service_s=0.01)
    for a, lat, counts in _pieces(arrival, shard, latency, cuts, shards):
        rec.record(a, lat, counts)
    return rec.result()


def test_each_window_is_the_histogram_of_its_own_requests():
    rng = np.random.default_rng(3)
    n, shards, duration, width = 30_000, 3, 100.0, 7.0   # 15 windows, the last 2 s
    arrival = np.sort(rng.uniform(0, duration, n))
    shard = rng.integers(0, shards, n)
    latency = rng.lognormal(1.5, 1.0, n)
    one = _recorded(arrival, shard, latency, np.array([0, n]))
    assert len(one) == 15 and one.ends[-1] == duration and one.seconds[-1] == pytest.approx(2)
    window = np.minimum((arrival / width).astype(np.int64), 14)
    for k in range(15):
        mine = window == k
        whole = LatencyHistogram.of(latency[mine])
        # exactly the percentiles a histogram of the window's requests reads
        assert np.array_equal(one.latency_ms[k, :4], whole.percentile([50, 90, 99, 99.9]))
        assert one.latency_ms[k, 4] == latency[mine].max()
        assert one.latency_ms[k, 5] == pytest.approx(latency[mine].mean(), rel=1e-12)
        for s in range(shards):
            both = mine & (shard == s)
            assert one.requests[k, s] == both.sum()
            assert one.p99_ms[k, s] == LatencyHistogram.of(latency[both]).percentile(99)
    # and the same to the bit however the run is cut into pieces (a piece per request
    # block: windows straddle pieces, pieces hold many windows)
    for cuts in (np.unique(np.r_[0, rng.integers(0, n, 40), n]),
                 np.unique(np.r_[0, rng.integers(0, n, 3), n]), np.arange(0, n + 1, 997)):
        cut = _recorded(arrival, shard, latency, np.r_[cuts[cuts < n], n])
        assert np.array_equal(cut.requests, one.requests)
        assert np.array_equal(cut.p99_ms, one.p99_ms, equal_nan=True)
        assert np.array_equal(cut.latency_ms[:, :5], one.latency_ms[:, :5], equal_nan=True)
        assert np.allclose(cut.latency_ms[:, 5], one.latency_ms[:, 5], rtol=1e-12)


def test_work_is_counted_in_the_windows_it_was_done_in():
    rng = np.random.default_rng(4)
    duration, width = 50.0, 3.0
    n = 2000
    arrival = np.sort(rng.uniform(0, duration, n))
    start = arrival + rng.exponential(0.5, n)
    finish = start + rng.exponential(0.4, n)
    finish[::97] += 8.0                # some run through several windows
    coalesced = rng.random(n) < 0.1    # no work
    rec = SeriesRecorder(width, duration, 2, capacity=2, mean_service_s=0.4)
    half = n // 2
    rec.work(1, arrival[:half], start[:half], finish[:half], coalesced[:half])
    rec.work(1, arrival[half:], start[half:], finish[half:], coalesced[half:])
    series = rec.result()
    edges = np.minimum(np.arange(len(series) + 1) * width, duration)
    worked = ~coalesced
    # brute force: the part of each request's service inside each window, cut at the end
    inside = np.clip(np.minimum(finish[worked, None], edges[None, 1:])
                     - np.maximum(start[worked, None], edges[None, :-1]), 0.0, None)
    expected = inside.sum(axis=0) / (2 * np.diff(edges))
    assert series.cpu[:, 1] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert not series.cpu[:, 0].any()
    window = np.minimum((arrival / width).astype(np.int64), len(series) - 1)
    assert np.array_equal(series.reaching[:, 1], np.bincount(window, minlength=len(series)))


def test_the_windows_add_up_to_the_whole_run():
    model = ServiceModel(shards=4, service=Exponential(0.0006))
    run = simulate(samplers.zipf(1.1, 10_000), rps=4000.0, duration=90.0, model=model, rng=5)
    series = run.windows
    assert series.ends[-1] == 90.0 and series.starts[0] == 0.0
    for s, shard in enumerate(run.shards):
        assert series.requests[:, s].sum() == shard.requests
        assert series.reaching[:, s].sum() == shard.requests     # no cache, no replicas
        busy = (series.cpu[:, s] * series.seconds).sum()
        assert busy == pytest.approx(shard.cpu * 90.0, rel=1e-9)
    assert np.nanmax(series.latency_ms[:, 4]) == run.latency.max
    assert series.requests.sum() == run.requests
    obs = run.to_observations()
    assert len(obs.windows) == len(series)
    assert obs.windows[0].shards[0].requests == series.requests[0, 0]
    assert simulate(samplers.zipf(1.1, 10_000), rps=4000.0, duration=90.0, model=model,
                    rng=5, series=False).windows is None


@pytest.fixture(scope="module")
def event_path(tmp_path_factory):
    return event_trace.event_profile(tmp_path_factory.mktemp("event"))


def _run(path, **options):
    """As ``hotshard simulate PROFILE -p redis-cluster -n 16`` runs it (the rate and length
    from the profile unless given; timelines in real time)."""
    from hotshard.sim.scenarios import prepare, run_length

    given = {k: options.pop(k) for k in ("rps", "duration") if k in options}
    ready = prepare({"profile": str(path), "shards": 16, "partitioner": "redis-cluster",
                     "timelines": "real-time", **options})
    length = run_length(ready.profile, arrivals=ready.model.arrivals,
                        key_order=ready.key_order, **given)
    result = simulate(ready.sampler, rps=length.rps, duration=length.duration,
                      model=ready.model, op_mix=ready.op_mix, rng=1,
                      key_generator=ready.key_generator, key_order=ready.key_order)
    return result, length


def test_a_profile_runs_at_its_measured_rate_over_its_span(event_path):
    from hotshard.profile.document import Profile
    from hotshard.sim.scenarios import PROFILE_RUN_REQUESTS, run_length

    profile = Profile.load(event_path)
    rate = profile.rate
    length = run_length(profile)
    assert (length.rps, length.duration) == (rate["mean_rps"], rate["seconds"]) == (
        pytest.approx(profile.events / SPAN, rel=1e-3), SPAN)
    assert "measured rate" in length.notes[0] and "2h" in length.notes[0]
    # --rps alone keeps the span; --duration alone takes the rate of that part (the first
    # half hour's ~90,000 requests at 50 req/s: a Poisson count's sd is 0.33%)
    assert run_length(profile, rps=500.0).duration == SPAN
    first = run_length(profile, duration=1800.0, arrivals=_arrivals(profile))
    assert first.rps == pytest.approx(50.0, rel=0.01)
    # a month at production's rate is not a default
    with pytest.raises(InputError, match="more than the 1e\\+09"):
        run_length(profile, rps=PROFILE_RUN_REQUESTS / SPAN * 2)


def _arrivals(profile):
    from hotshard.sim.arrivals import ProfileArrivals

    return ProfileArrivals(profile.arrivals)


@pytest.mark.parametrize("order", ["locality", "irm"])
def test_the_event_shard_is_hot_in_the_event_window(event_path, order):
    result, _ = _run(event_path, order=order)
    series = result.windows
    assert result.requests == pytest.approx(SPAN * result.rps, abs=1)
    assert len(series) == 12 and series.seconds == pytest.approx(600.0)   # the timelines'
    hot = event_trace.event_shard()
    cpu = series.cpu[:, hot]
    peak = int(np.argmax(cpu))
    assert (series.starts[peak], series.ends[peak]) == (EVENT_START, EVENT_END)
    assert series.peak() == (peak, hot)
    # in the event window the channel alone brings 40% of 50 req/s (20 req/s); the shard's
    # own keys are tail keys, ~1/16 of the Zipf tail (~1.6 req/s; were it the steady
    # channel's 3.5 too, still under 6): its busiest window is over 4x its median one
    assert cpu[peak] >= 3 * np.median(cpu)
    # the event's requests arrive in its window: 40% of the window's, plus the shard's own
    assert series.requests[peak, hot] > 0.4 * series.requests[peak].sum()


def test_a_shard_saturated_only_in_its_event_window_is_named(event_path):
    # 70 ms a request: the event's 20 req/s alone offer 1.4x a worker in its window; over
    # the whole run its shard gets ~3.3 req/s (0.23x), and the busiest other shard (the top
    # Zipf channel's, ~21% of the requests: ~10 req/s) 0.7x, in any window within a few %
    result, _ = _run(event_path, order="irm", service="exp:70ms")
    sat = saturation(result.windows)
    hot = event_trace.event_shard()
    assert sat.whole_run == () and sat.service.load < 1
    assert [(x.shard, x.start_s, x.end_s) for x in sat.windows] == [
        (hot, EVENT_START, EVENT_END)]
    x = sat.windows[0]
    assert x.load == pytest.approx(result.windows.offered[6, hot], rel=1e-12)
    assert x.load > 1.2 and x.share > 0.4
    assert np.delete(result.windows.offered, hot, axis=1).max() < 0.9
    assert sat.peak == x


def test_same_seed_same_windows(event_path):
    a, _ = _run(event_path, order="irm", duration=1200.0)
    b, _ = _run(event_path, order="irm", duration=1200.0)
    assert a.windows.to_time_windows() == b.windows.to_time_windows()


def test_a_service_offered_more_than_all_its_workers_is_named():
    from hotshard.render import saturation_text

    # 5000 req/s x 1 ms = 5 workers' worth of work for 4 shards of 1 worker: every shard
    # (uniform keys: ~1250 req/s each, 1.25x) saturates, and so does the service
    model = ServiceModel(shards=4, service=Exponential(0.001))
    run = simulate(samplers.uniform(1000), rps=5000.0, duration=5.0, model=model, rng=2)
    sat = saturation(run.windows)
    assert sat.service.load == pytest.approx(run.requests / 5.0 * 0.001 / 4, rel=1e-12)
    assert sat.service.load > 1.2 and sorted(x.shard for x in sat.whole_run) == [0, 1, 2, 3]
    assert sat.windows == ()   # each saturated shard is named once, for the whole run
    lines = saturation_text(sat, run.duration)
    assert lines[0].startswith("the service is offered more work than its workers can do: ")
    assert "workers' worth for 4 shards' 4 workers" in lines[0]
    assert all(line.startswith("shard ") and "saturates over the whole run" in line
               for line in lines[1:]) and len(lines) == 5
