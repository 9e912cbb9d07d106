"""simulate in windows: the queues and caches carry across window edges exactly, the result
does not depend on the window, latencies are histograms within their stated error, and
memory does not grow with the simulated duration."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.mitigations import Mitigations
from hotshard.sim import queues
from hotshard.sim.arrivals import OnOffArrivals, PoissonArrivals, ProfileArrivals
from hotshard.sim.cache import LRUCache, lru_hits
from hotshard.sim.histogram import RELATIVE_ERROR, LatencyHistogram
from hotshard.sim.queues import ShardQueue, serve
from hotshard.sim.service_times import Exponential
from hotshard.sim.system import ServiceModel, simulate
from hotshard.workload import sampler as samplers
from tests.conftest import ROOT


def _cuts(rng, n, k):
    edges = np.unique(rng.integers(0, n, k))
    return np.concatenate([[0], edges, [n]])


@pytest.mark.parametrize(("workers", "coalescing"), [(1, False), (3, False), (1, True),
                                                     (2, True)])
def test_a_queue_in_windows_is_the_queue_in_one_pass(workers, coalescing):
    rng = np.random.default_rng(workers)
    n = 50_000
    arrival = np.cumsum(rng.exponential(1 / (90 * workers), n))
    service = rng.exponential(0.01, n)
    keys = rng.integers(0, 6, n) if coalescing else None
    reads = rng.random(n) < 0.8 if coalescing else None
    horizon = float(arrival[-1]) * 0.99   # the last requests are cut at the window's end
    whole = queues._events(arrival, service, workers,
                           None if keys is None else keys.astype(np.int64), reads)
    one = serve(arrival, service, workers, keys=keys, coalesce=reads)
    queue = ShardQueue(horizon, workers)
    parts = []
    for lo, hi in zip(*(lambda e: (e[:-1], e[1:]))(_cuts(rng, n, 40)), strict=True):
        done = queue.serve(arrival[lo:hi], service[lo:hi],
                           keys=None if keys is None else keys[lo:hi],
                           coalesce=None if reads is None else reads[lo:hi])
        parts.append((done.start, done.finish, done.coalesced))
    start, finish, coalesced = (np.concatenate(p) for p in zip(*parts, strict=True))
    # bit for bit the one compiled pass, whatever the cuts
    assert np.array_equal(start, whole[0]) and np.array_equal(finish, whole[1])
    assert np.array_equal(coalesced, whole[2]) and queue.coalesced == int(whole[2].sum())
    # and the run's statistics are the whole run's (sums: to rounding)
    assert queue.utilisation() == pytest.approx(one.utilisation(horizon), rel=1e-12)
    mine, theirs = queue.queue_length_stats(), one.queue_length_stats(horizon)
    assert mine.max_in_system == theirs.max_in_system
    assert mine.max_waiting == theirs.max_waiting
    assert mine.mean_in_system == pytest.approx(theirs.mean_in_system, rel=1e-12)
    assert mine.mean_waiting == pytest.approx(theirs.mean_waiting, rel=1e-12)


def test_a_long_busy_period_runs_on_across_window_edges():
    # one request needs 10 s of work; the next windows arrive while it is still in service
    arrival = np.arange(0.0, 30.0, 0.5)
    service = np.full(arrival.size, 0.1)
    service[2] = 10.0          # arrives at 1 s, busy until 11.1 s
    queue = ShardQueue(30.0)
    first = queue.serve(arrival[:4], service[:4])     # window 1 ends at 1.5 s
    second = queue.serve(arrival[4:10], service[4:10])  # 2.0 .. 4.5 s: all still waiting
    third = queue.serve(arrival[10:], service[10:])
    assert first.finish[2] == pytest.approx(11.0)
    # FIFO behind the long one: the waiting ones start in turn when it is done
    assert second.start[0] == pytest.approx(first.finish[3])
    assert np.all(np.diff(np.concatenate([first.start, second.start, third.start])) >= 0)
    whole = queues._events(arrival, service, 1, None, None)
    assert np.array_equal(np.concatenate([first.finish, second.finish, third.finish]),
                          whole[1])
    # the queue at its longest: everything that arrived from 1 s until 11 s (~20 requests)
    stats = queue.queue_length_stats()
    assert stats.max_in_system == serve(arrival, service).queue_length_stats(30.0).max_in_system
    assert stats.max_in_system >= 19


def test_windows_must_continue_in_time():
    queue = ShardQueue(10.0)
    queue.serve([1.0, 2.0], [0.1, 0.1])
    with pytest.raises(InputError, match="continue the previous window"):
        queue.serve([1.5], [0.1])


def test_an_lru_in_windows_is_the_lru_in_one_pass():
    rng = np.random.default_rng(4)
    keys = rng.zipf(1.2, 100_000) % 3000 - 200   # negative keys too (events, sub-keys)
    for capacity in (1, 50, 2000, 5000):
        cache = LRUCache(capacity)
        cuts = _cuts(rng, keys.size, 25)
        parts = [cache.hits(keys[lo:hi]) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)]
        assert np.array_equal(np.concatenate(parts), lru_hits(keys, capacity)), capacity


def test_histogram_percentiles_are_within_the_stated_error():
    rng = np.random.default_rng(5)
    values = np.concatenate([rng.exponential(6.0, 200_000), rng.lognormal(5, 1.5, 3000),
                             np.full(500, 0.5), np.zeros(10)])
    h = LatencyHistogram.of(values)
    qs = [0, 1, 25, 50, 90, 99, 99.9, 99.99, 100]
    exact = np.percentile(values, qs)
    got = h.percentile(qs)
    assert np.all(np.abs(got - exact) <= RELATIVE_ERROR * exact + 1e-12)
    assert h.max == values.max() and h.count == values.size
    assert h.mean == pytest.approx(values.mean(), rel=1e-12)
    # histograms of parts add up to the whole's, exactly
    parts = LatencyHistogram.empty()
    for chunk in np.array_split(values, 7):
        parts.merge(LatencyHistogram.of(chunk))
    assert np.array_equal(parts.counts, h.counts) and parts.max == h.max
    assert LatencyHistogram.of(np.full(9, 0.5)).percentile(99) == 0.5  # clamped: exact


SMALL = ServiceModel(shards=4, partitioner="kafka", service=Exponential(0.0006),
                     arrivals=PoissonArrivals())


def _same(a, b):
    """Everything counted is identical; sums of floats (utilisation, mean queue, mean
    latency) add up window by window, so they agree to rounding."""
    assert a.requests == b.requests and a.coalesced == b.coalesced
    assert np.array_equal(a.latency.counts, b.latency.counts)
    assert (a.latency.count, a.latency.min, a.latency.max) == (
        b.latency.count, b.latency.min, b.latency.max)
    assert a.latency.mean == pytest.approx(b.latency.mean, rel=1e-12)
    assert a.percentiles() == pytest.approx(b.percentiles(), rel=1e-12)
    assert a.cache_hit_rate == b.cache_hit_rate
    for x, y in zip(a.shards, b.shards, strict=True):
        assert x.latency == y.latency or np.array_equal(x.latency.counts, y.latency.counts)
        assert (x.requests, x.p50_ms, x.p90_ms, x.p99_ms, x.p999_ms, x.max_queue,
                x.cache_hit_rate) == (y.requests, y.p50_ms, y.p90_ms, y.p99_ms, y.p999_ms,
                                      y.max_queue, y.cache_hit_rate)
        assert (x.cpu, x.cpu_max_replica, x.mean_queue) == pytest.approx(
            (y.cpu, y.cpu_max_replica, y.mean_queue), rel=1e-12)
    _same_windows(a.windows, b.windows)


def _same_windows(a, b):
    """The time axis too: counts and percentiles to the bit (the same buckets, merged where
    a window straddles two streamed pieces), sums (CPU, means) to rounding."""
    assert a is not None and b is not None and len(a) == len(b) > 1
    assert np.array_equal(a.starts, b.starts) and np.array_equal(a.ends, b.ends)
    assert np.array_equal(a.requests, b.requests) and np.array_equal(a.reaching, b.reaching)
    assert np.array_equal(a.p99_ms, b.p99_ms, equal_nan=True)
    assert np.array_equal(a.latency_ms[:, :5], b.latency_ms[:, :5], equal_nan=True)
    assert np.allclose(a.latency_ms[:, 5], b.latency_ms[:, 5], rtol=1e-12, equal_nan=True)
    assert np.allclose(a.cpu, b.cpu, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("case", ["poisson", "onoff", "coalesce+replicas", "split+event",
                                  "che cache", "workers"])
def test_the_result_does_not_depend_on_the_window(case, web07_profile):
    from hotshard.workload.profile_sampler import from_profile
    from hotshard.workload.timing import HotEvent

    smp = from_profile(web07_profile)
    model, kwargs = SMALL, {}
    if case == "onoff":
        model = ServiceModel(shards=4, service=Exponential(0.0006), arrivals=OnOffArrivals())
    elif case == "coalesce+replicas":
        kwargs = {"mitigations": Mitigations(coalesce=True, replicas=2)}
    elif case == "split+event":
        kwargs = {"mitigations": Mitigations(split_keys=2, split_into=4),
                  "hot_events": (HotEvent(str(web07_profile.head_keys[0]), 0.3, 20.0, 70.0),)}
    elif case == "che cache":
        model = ServiceModel(shards=4, service=Exponential(0.0006), cache_size=300)
    elif case == "workers":
        model = ServiceModel(shards=4, workers=3, service=Exponential(0.0018))
    # a Poisson block is 2^16 requests: 5.5 blocks at 4000 req/s over 90 s (~1000 req/s a
    # shard, busy 60%, the hottest more)
    args = {"rps": 4000.0, "duration": 90.0, "model": model, "rng": 11, **kwargs}
    one = simulate(smp, window=1e9, **args)
    small = simulate(smp, window=1e-9, **args)   # one block a window
    default = simulate(smp, **args)
    _same(one, small)
    _same(one, default)
    assert one.latency.count == one.requests


@pytest.mark.parametrize("interval", [0.37, 7.0, 41.0, 200.0])
def test_the_time_windows_do_not_depend_on_the_streaming(interval, web07_profile):
    """Time windows narrower than a block of arrivals, a few blocks wide, wider than the
    run: each streamed piece (one block, a few, the whole run) cuts them anywhere."""
    from hotshard.workload.profile_sampler import from_profile

    model = ServiceModel(shards=4, workers=2, service=Exponential(0.0012),
                         arrivals=OnOffArrivals())
    args = {"rps": 4000.0, "duration": 90.0, "model": model, "rng": 12,
            "mitigations": Mitigations(coalesce=True), "interval": interval}
    smp = from_profile(web07_profile)
    runs = [simulate(smp, window=w, **args) for w in (1e9, 1e-9, 23.0)]
    assert runs[0].windows.seconds[0] == pytest.approx(min(interval, 90.0))
    if interval >= 90.0:   # one window: the whole run's numbers
        assert len(runs[0].windows) == 1
        assert runs[0].windows.p99_ms[0, 0] == runs[0].shards[0].p99_ms
        return
    for other in runs[1:]:
        _same(runs[0], other)


def test_the_result_does_not_depend_on_the_window_with_production_order(tmp_path):
    """Keys in production's order (made for the whole run) and an LRU per shard carried
    across windows; the profile's own measured arrivals, a minute a block."""
    from hotshard.profile.count import count_profile
    from hotshard.sim.scenarios import prepare
    from tests.conftest import shared

    profile = count_profile([str(shared("traces", "web07.parquet"))], key="key")
    path = tmp_path / "web07.json"
    profile.save(str(path))
    ready = prepare({"profile": str(path), "order": "locality", "shards": 4,
                     "cache_size": 200, "arrivals": "poisson"})
    assert ready.key_order.name == "locality" and not ready.key_order.windowed
    model = ServiceModel(shards=4, cache_size=200, service=Exponential(0.002),
                         arrivals=OnOffArrivals())
    args = {"rps": 3000.0, "duration": 120.0, "model": model, "rng": 2,
            "key_order": ready.key_order}
    _same(simulate(ready.sampler, window=1e9, **args),
          simulate(ready.sampler, window=1e-9, **args))


def test_profile_arrivals_in_blocks_are_its_whole_schedule():
    from hotshard.profile.document import Profile

    model = Profile.load(ROOT / "examples" / "incident.profile.json").arrivals
    process = ProfileArrivals(model)
    blocks = process.blocks(500.0, 400.0, 9)
    parts = list(blocks)
    assert blocks.count == 7 and len(parts) == 7  # one a minute, the last 40 s
    assert np.array_equal(np.concatenate(parts), process.times(500.0, 400.0, 9))


def test_on_off_blocks_keep_the_process():
    process = OnOffArrivals(burst=4, on_fraction=0.2, mean_period=1.0)
    times = np.concatenate(list(process.blocks(3000.0, 1800.0, 4)))
    assert np.all(np.diff(times) >= 0) and times[-1] < 1800.0
    assert times.size / 1800.0 == pytest.approx(3000.0, rel=0.03)
    counts = np.bincount((times // 10).astype(np.int64), minlength=180)
    idc = counts.var() / counts.mean()
    # 180 windows: the IDC's sampling error is ~sqrt(2/180) = 11%
    assert idc == pytest.approx(process.index_of_dispersion(3000.0, 10.0), rel=0.35)


def test_a_block_too_large_to_hold_is_refused():
    from hotshard.profile.document import Profile

    model = Profile.load(ROOT / "examples" / "incident.profile.json").arrivals
    slow = ServiceModel(shards=4, arrivals=ProfileArrivals(model))
    with pytest.raises(InputError, match="drawn 60 s at a time"):
        simulate(samplers.uniform(100), rps=1e6, duration=120.0, model=slow, rng=1)


def _peak(duration: float) -> int:
    model = ServiceModel(shards=8, service=Exponential(0.0002))  # 2,500 req/s a shard: 50%
    tracemalloc.start()
    try:
        simulate(samplers.uniform(100_000), rps=20_000.0, duration=duration, model=model,
                 rng=1, window=10.0)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_duration():
    # numpy's buffers are traced: a window is ~200,000 requests (10 s at 20,000 req/s); ten
    # times the duration (1.2e6 against 1.2e7 requests) must not need more memory: the
    # whole run's arrays alone would take ~100 bytes a request, 1.2 GB
    _peak(10.0)   # first: imports, compiled kernels' caches
    short, long = _peak(60.0), _peak(600.0)
    assert long < 1.25 * short, (short, long)
    assert long < 200e6
