"""FIFO queues against closed forms, hand-worked examples and a textbook event simulation.

Statistical tolerances. The closed forms are checked "within 2%" on long runs. Each long-run
estimate comes with its standard error from batch means: the run (after a 1% warm-up from an
empty system) is cut into B = 50 consecutive batches, each hundreds of thousands of requests
long, far beyond the queue's correlation time (about 1/(mu (1 - sqrt(rho))^2), some 90 service
times at rho = 0.8), so the batch means are nearly independent and SE = sd(batch means)/sqrt(B).
For a percentile the batches' percentiles play the same part (the full-run percentile's SE is
about their sd/sqrt(B)). Every check asserts three things: the run is long enough that 2% is at
least 4 SE, the estimate is within 4 SE of the formula, and within 2% of it. The seeds are fixed,
so the outcome is deterministic; 4 SE means a correct simulator would fail a fresh seed about
once in 16,000 checks.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.sim import queues
from hotshard.sim.queues import serve

BATCHES = 50


def poisson_arrivals(rng: np.random.Generator, rate: float, n: int) -> np.ndarray:
    return np.cumsum(rng.exponential(1.0 / rate, n))


def steady(x: np.ndarray) -> np.ndarray:
    """Drop the first 1% (the run starts empty) and trim to whole batches."""
    x = x[x.size // 100:]
    return x[: x.size // BATCHES * BATCHES]


def mean_se(x: np.ndarray) -> tuple[float, float]:
    """(mean, its standard error by batch means)."""
    batch = x.reshape(BATCHES, -1).mean(axis=1)
    return float(x.mean()), float(batch.std(ddof=1) / math.sqrt(BATCHES))


def quantile_se(x: np.ndarray, p: float) -> tuple[float, float]:
    """(p-quantile, its standard error from the batches' p-quantiles)."""
    batch = np.quantile(x.reshape(BATCHES, -1), p, axis=1)
    return float(np.quantile(x, p)), float(batch.std(ddof=1) / math.sqrt(BATCHES))


def assert_close(estimate: float, se: float, truth: float, rel: float = 0.02) -> None:
    assert 4 * se <= rel * abs(truth), f"run too short: 4 SE = {4 * se:.3g} > {rel:.0%}"
    assert abs(estimate - truth) <= 4 * se, f"{estimate} vs {truth}: more than 4 SE ({se:.3g})"
    assert abs(estimate - truth) <= rel * abs(truth)


def erlang_c(c: int, a: float) -> float:
    """Erlang C: probability that an arrival waits in M/M/c with offered load a = lambda/mu."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


# ---------------------------------------------------------------- hand-worked examples


def test_one_worker_by_hand():
    # worker free at 3 when the second arrives (waits 2), idle at 4..5, then each starts on arrival
    served = serve([0.0, 1.0, 5.0, 6.0], [3.0, 1.0, 0.5, 2.0])
    np.testing.assert_array_equal(served.start, [0.0, 3.0, 5.0, 6.0])
    np.testing.assert_array_equal(served.finish, [3.0, 4.0, 5.5, 8.0])
    np.testing.assert_array_equal(served.wait(), [0.0, 2.0, 0.0, 0.0])
    np.testing.assert_array_equal(served.sojourn(), [3.0, 3.0, 0.5, 2.0])
    assert served.busy_time() == 6.5
    assert not served.coalesced.any()


def test_two_workers_by_hand():
    # the second worker takes request 1 at once; request 2 waits for the first free (t = 2)
    served = serve([0.0, 1.0, 1.5, 6.0], [3.0, 1.0, 2.0, 1.0], workers=2)
    np.testing.assert_array_equal(served.start, [0.0, 1.0, 2.0, 6.0])
    np.testing.assert_array_equal(served.finish, [3.0, 2.0, 4.0, 7.0])


def test_empty_input():
    served = serve([], [], workers=3)
    assert served.finish.size == 0
    assert served.busy_time() == 0.0
    assert served.queue_length_stats(1.0).max_in_system == 0


def test_queue_lengths_by_hand():
    # starts 0, 2, 4 and finishes 2, 4, 6. In system: 1 on [0,1), 2 on [1,2), 2 on [2,4) (one
    # leaves as one arrives at 2), 1 on [4,6): integral 9 over 6 s. Waiting: 1 on [1,2) and
    # [2,4): integral 3.
    served = serve([0.0, 1.0, 2.0], [2.0, 2.0, 2.0])
    stats = served.queue_length_stats(6.0)
    assert (stats.mean_in_system, stats.max_in_system) == (1.5, 2)
    assert (stats.mean_waiting, stats.max_waiting) == (0.5, 1)
    # a shorter window cuts the requests still present: 5 and 2 request-seconds in [0, 3]
    cut = served.queue_length_stats(3.0)
    assert cut.mean_in_system == pytest.approx(5 / 3) and cut.mean_waiting == pytest.approx(2 / 3)
    assert cut.to_dict()["max_in_system"] == 2
    assert served.utilisation(6.0) == 1.0 and served.utilisation(12.0) == 0.5


def test_coalescing_by_hand():
    # key 7: a read at 0 works 0..10; reads at 0.5, 1, 2 join it (finish at 10, no work); a
    # write of key 7 at 3 never coalesces (10..12); key 8 at 4 queues (12..13); the read of key
    # 7 at 10 arrives as its leader finishes, so it is a new leader (13..14), and 11 joins it.
    arrivals = [0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 10.0, 11.0]
    service = [10.0, 5.0, 5.0, 5.0, 2.0, 1.0, 1.0, 9.0]
    keys = [7, 7, 7, 7, 7, 8, 7, 7]
    reads = [True, True, True, True, False, True, True, True]
    served = serve(arrivals, service, keys=keys, coalesce=reads)
    np.testing.assert_array_equal(served.coalesced, [0, 1, 1, 1, 0, 0, 0, 1])
    np.testing.assert_array_equal(served.finish, [10, 10, 10, 10, 12, 13, 14, 14])
    np.testing.assert_array_equal(served.start, [0, 10, 10, 10, 10, 12, 13, 14])
    assert served.busy_time() == 10 + 2 + 1 + 1
    # without coalescing the same requests all do their work
    plain = serve(arrivals, service, workers=1)
    assert plain.busy_time() == sum(service)


def test_keys_without_mask_coalesce_every_request():
    served = serve([0.0, 1.0, 2.0], [5.0, 5.0, 5.0], keys=np.array([3, 3, 4]))
    np.testing.assert_array_equal(served.coalesced, [False, True, False])
    np.testing.assert_array_equal(served.finish, [5.0, 5.0, 10.0])


# ---------------------------------------------------------------- paths and a reference


def test_numpy_and_compiled_paths_agree_exactly():
    # Times on a grid of 2**-10 s below 2**40 s are exact in float64, so every sum is exact
    # and the vectorized Lindley recursion must equal the compiled loop bit for bit.
    rng = np.random.default_rng(11)
    n = 200_000
    arrivals = np.cumsum(rng.integers(0, 2048, n)) / 1024.0
    service = rng.integers(0, 2048, n) / 1024.0
    lin_start, lin_finish = queues._lindley(arrivals, service)
    ev_start, ev_finish, coalesced = queues._events(arrivals, service, 1, None, None)
    np.testing.assert_array_equal(lin_start, ev_start)
    np.testing.assert_array_equal(lin_finish, ev_finish)
    assert not coalesced.any()


def test_numpy_and_compiled_paths_agree_to_rounding():
    # Continuous times: the cumulative sum's rounding is at most n * 2**-53 * (its size).
    rng = np.random.default_rng(12)
    n = 200_000
    arrivals = poisson_arrivals(rng, 0.9, n)
    service = rng.exponential(1.0, n)
    lin_start, lin_finish = queues._lindley(arrivals, service)
    ev_start, ev_finish, _ = queues._events(arrivals, service, 1, None, None)
    bound = n * 2.0**-53 * ev_finish[-1]
    np.testing.assert_allclose(lin_start, ev_start, rtol=0, atol=bound)
    np.testing.assert_allclose(lin_finish, ev_finish, rtol=0, atol=bound)


def reference_fifo(arrivals, service, workers, keys=None, coalesce=None):
    """Textbook event simulation: a departure heap, a FIFO deque, explicit followers.

    At equal times departures go first, so a leader finishing as a read arrives is not in
    flight and a worker freed at t can start an arrival at t.
    """
    n = len(arrivals)
    start, finish, joined = [0.0] * n, [0.0] * n, [False] * n
    waiting, departures, busy = deque(), [], 0
    leader, followers = {}, {}
    i = 0
    while i < n or departures:
        if departures and (i == n or departures[0][0] <= arrivals[i]):
            t, j = heapq.heappop(departures)
            busy -= 1
            for f in followers.pop(j, []):
                start[f] = finish[f] = t
            if keys is not None and leader.get(keys[j]) == j:
                del leader[keys[j]]
            if waiting:
                k = waiting.popleft()
                start[k], finish[k] = t, t + service[k]
                heapq.heappush(departures, (finish[k], k))
                busy += 1
            continue
        j, t = i, arrivals[i]
        i += 1
        if keys is not None and coalesce[j]:
            if keys[j] in leader:
                joined[j] = True
                followers.setdefault(leader[keys[j]], []).append(j)
                continue
            leader[keys[j]] = j
        if busy < workers:
            start[j], finish[j] = t, t + service[j]
            heapq.heappush(departures, (finish[j], j))
            busy += 1
        else:
            waiting.append(j)
    return np.array(start), np.array(finish), np.array(joined)


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("grid", [False, True], ids=["continuous", "ties"])
def test_coalescing_matches_event_simulation(workers, grid):
    # a few hot keys, 70% reads, load near 0.9 per worker; on a grid of 1/4 s arrivals,
    # departures and service times often coincide, which exercises the tie rules
    rng = np.random.default_rng(100 + workers)
    n = 5000
    arrivals = poisson_arrivals(rng, 0.9 * workers, n)
    service = rng.exponential(1.0, n)
    if grid:
        arrivals, service = np.round(arrivals * 4) / 4, np.round(service * 4) / 4
    keys = rng.integers(0, 6, n)
    reads = rng.random(n) < 0.7
    served = serve(arrivals, service, workers, keys=keys, coalesce=reads)
    start, finish, joined = reference_fifo(arrivals.tolist(), service.tolist(), workers,
                                           keys.tolist(), reads.tolist())
    assert joined.sum() > n // 10  # coalescing happened a lot
    np.testing.assert_array_equal(served.coalesced, joined)
    np.testing.assert_array_equal(served.start, start)
    np.testing.assert_array_equal(served.finish, finish)


@pytest.mark.parametrize("workers", [1, 4])
def test_workers_match_event_simulation(workers):
    rng = np.random.default_rng(7)
    n = 5000
    arrivals = poisson_arrivals(rng, 0.95 * workers, n)
    service = rng.exponential(1.0, n)
    served = serve(arrivals, service, workers)
    start, finish, _ = reference_fifo(arrivals.tolist(), service.tolist(), workers)
    np.testing.assert_allclose(served.start, start, rtol=0, atol=n * 2.0**-53 * finish.max())
    np.testing.assert_allclose(served.finish, finish, rtol=0, atol=n * 2.0**-53 * finish.max())


def test_coalescing_dictionary_sweep_keeps_results():
    # many distinct keys force the key -> leader dictionary to be swept of finished leaders
    rng = np.random.default_rng(5)
    n = 20_000
    arrivals = poisson_arrivals(rng, 1.8, n)
    service = rng.exponential(1.0, n)
    keys = np.where(rng.random(n) < 0.5, rng.integers(0, 3, n), np.arange(n) + 10)
    served = serve(arrivals, service, 2, keys=keys)
    start, finish, joined = reference_fifo(arrivals.tolist(), service.tolist(), 2,
                                           keys.tolist(), [True] * n)
    np.testing.assert_array_equal(served.coalesced, joined)
    np.testing.assert_array_equal(served.finish, finish)


def brute_queue_lengths(served, duration):
    """N(t) and the waiting count evaluated on every interval between events, by counting."""
    a, s, f = served.arrival, served.start, served.finish
    times = np.unique(np.concatenate([[0.0, duration], a, s, f]))
    times = times[times <= duration]
    area_sys = area_wait = 0.0
    max_sys = max_wait = 0
    for t0, t1 in zip(times, np.append(times[1:], duration), strict=True):
        n_sys = int(np.sum(a <= t0) - np.sum(f <= t0))
        n_wait = int(np.sum(a <= t0) - np.sum(s <= t0))
        area_sys += n_sys * (t1 - t0)
        area_wait += n_wait * (t1 - t0)
        max_sys, max_wait = max(max_sys, n_sys), max(max_wait, n_wait)
    return area_sys / duration, max_sys, area_wait / duration, max_wait


@pytest.mark.parametrize("workers", [1, 2])
def test_queue_lengths_match_counting(workers):
    rng = np.random.default_rng(9)
    n = 400
    arrivals = np.round(poisson_arrivals(rng, 0.9 * workers, n) * 8) / 8
    service = np.round(rng.exponential(1.0, n) * 8) / 8
    served = serve(arrivals, service, workers, keys=rng.integers(0, 3, n))
    for duration in (arrivals[n // 2], arrivals[-1] + 0.01, served.finish.max() + 5):
        stats = served.queue_length_stats(float(duration))
        mean_sys, max_sys, mean_wait, max_wait = brute_queue_lengths(served, duration)
        assert stats.mean_in_system == pytest.approx(mean_sys, rel=1e-12)
        assert stats.mean_waiting == pytest.approx(mean_wait, rel=1e-12)
        assert (stats.max_in_system, stats.max_waiting) == (max_sys, max_wait)


# ---------------------------------------------------------------- closed forms


@pytest.fixture(scope="module", params=[0.5, 0.8], ids=["rho0.5", "rho0.8"])
def mm1(request):
    """(rho, lambda, mu, steady waits, steady sojourns) of a long M/M/1 run (mu = 1).

    Lengths: 1e7 requests at rho 0.5 and 2e7 at rho 0.8 (relative variances grow about like
    1/(1 - rho)^2), enough for 2% to be >= 4 SE of every check, the p99s included.
    """
    rho = request.param
    lam, mu = rho, 1.0
    n = 10_000_000 if rho == 0.5 else 20_000_000
    rng = np.random.default_rng(20261202)
    served = serve(poisson_arrivals(rng, lam, n), rng.exponential(1 / mu, n))
    return rho, lam, mu, steady(served.wait()), steady(served.sojourn())


def test_mm1_mean_wait(mm1):
    rho, lam, mu, wait, _ = mm1
    assert_close(*mean_se(wait), rho / (mu - lam))


@pytest.mark.parametrize("p", [0.9, 0.99])
def test_mm1_wait_percentiles(mm1, p):
    # P(W > t) = rho exp(-(mu - lambda) t), so for p > 1 - rho: t_p = ln(rho / (1 - p))/(mu-lam)
    rho, lam, mu, wait, _ = mm1
    assert_close(*quantile_se(wait, p), math.log(rho / (1 - p)) / (mu - lam))


def test_mm1_wait_survival(mm1):
    # the probability of waiting at all, and of waiting longer than the mean 1/(mu - lambda)
    # (further out the probability is small and 2% of it needs far longer runs: the
    # percentiles above check the tail)
    rho, lam, mu, wait, _ = mm1
    for t in (0.0, 1.0 / (mu - lam)):
        assert_close(*mean_se((wait > t).astype(np.float64)), rho * math.exp(-(mu - lam) * t))


def test_mm1_sojourn_p99(mm1):
    # sojourn ~ Exp(mu - lambda): p99 = ln(100)/(mu - lambda)
    _, lam, mu, _, sojourn = mm1
    assert_close(*quantile_se(sojourn, 0.99), math.log(100) / (mu - lam))


@pytest.mark.parametrize("c", [2, 4])
def test_mmc_erlang_c(c):
    # M/M/c at rho = lambda/(c mu) = 0.75: P(wait > 0) = C(c, a), E[W] = C(c, a)/(c mu - lambda)
    rho, mu, n = 0.75, 1.0, 10_000_000
    lam = rho * c * mu
    rng = np.random.default_rng(30 + c)
    served = serve(poisson_arrivals(rng, lam, n), rng.exponential(1 / mu, n), workers=c)
    wait = steady(served.wait())
    waits_at_all = erlang_c(c, lam / mu)
    assert_close(*mean_se(wait), waits_at_all / (c * mu - lam))
    assert_close(*mean_se((wait > 0).astype(np.float64)), waits_at_all)


def test_md1_pollaczek_khinchine():
    # M/D/1 (service S = 1, cs^2 = 0) at rho = 0.8: E[W] = rho S / (2 (1 - rho))
    rho, n = 0.8, 10_000_000
    rng = np.random.default_rng(41)
    served = serve(poisson_arrivals(rng, rho, n), np.ones(n))
    assert_close(*mean_se(steady(served.wait())), rho / (2 * (1 - rho)))


@pytest.mark.parametrize("workers", [1, 3])
def test_single_hot_key_work_equals_leaders(workers):
    # Every request reads one key, service S = 1. A leader finds no read in flight, hence an
    # idle shard, and starts on arrival; the next leader is the first arrival after it
    # finishes. So cycles are iid: 1 leader + K followers, K ~ Poisson(lambda S), and the work
    # done is exactly S per leader. By the renewal CLT the number of leaders among n requests
    # is about n / E[R] with variance n Var(R) / E[R]^3, R = 1 + K: E[R] = 1 + m, Var R = m,
    # m = lambda S.
    lam, n = 2.0, 1_000_000
    rng = np.random.default_rng(50 + workers)
    served = serve(poisson_arrivals(rng, lam, n), np.ones(n), workers,
                   keys=np.zeros(n, dtype=np.int64))
    leaders = ~served.coalesced
    assert served.busy_time() == leaders.sum()
    assert (served.wait()[leaders] == 0).all()
    m = lam * 1.0
    expected, se = n / (1 + m), math.sqrt(n * m / (1 + m) ** 3)
    assert abs(leaders.sum() - expected) <= 4 * se
    # each follower finishes with the latest leader before it
    last_leader = np.maximum.accumulate(np.where(leaders, np.arange(n), 0))
    np.testing.assert_array_equal(served.finish, served.finish[last_leader])


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"arrivals": [0.0, 1.0], "service": [1.0]}, "service must have one time per arrival"),
        ({"arrivals": [0.0, 2.0, 1.0], "service": [1.0] * 3}, r"arrivals\[2\] = 1.0"),
        ({"arrivals": [-1.0, 2.0], "service": [1.0] * 2}, "arrivals must be finite and >= 0"),
        ({"arrivals": [0.0, np.nan], "service": [1.0] * 2}, "arrivals must be sorted"),
        ({"arrivals": [0.0, np.inf], "service": [1.0] * 2}, "arrivals must be finite"),
        ({"arrivals": [[0.0, 1.0]], "service": [1.0] * 2}, "arrivals must be a 1-D array"),
        ({"arrivals": ["a"], "service": [1.0]}, "arrivals must be numbers"),
        ({"arrivals": [0.0, 1.0], "service": [1.0, -2.0]}, r"service\[1\] = -2.0"),
        ({"arrivals": [0.0, 1.0], "service": [np.nan, 1.0]}, r"service\[0\] = nan"),
        ({"arrivals": [0.0, 1.0], "service": [np.inf, 1.0]}, r"service\[0\] = inf"),
        ({"arrivals": [0.0], "service": [1.0], "workers": 0}, "workers must be an integer >= 1"),
        ({"arrivals": [0.0], "service": [1.0], "workers": 1.5}, "workers must be an integer"),
        ({"arrivals": [0.0], "service": [1.0], "coalesce": [True]}, "coalesce needs keys"),
        ({"arrivals": [0.0], "service": [1.0], "keys": [1, 2]}, "keys must have one key per"),
        ({"arrivals": [0.0], "service": [1.0], "keys": [1.5]}, "keys must be integers"),
        ({"arrivals": [0.0], "service": [1.0], "keys": [1], "coalesce": [1]},
         "coalesce must be a boolean mask"),
        ({"arrivals": [0.0], "service": [1.0], "keys": [1], "coalesce": [True, False]},
         "coalesce must have one flag per arrival"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, message):
    with pytest.raises(InputError, match=message):
        serve(**kwargs)


@pytest.mark.parametrize("duration", [0.0, -1.0, float("inf"), float("nan"), "10"])
def test_bad_duration(duration):
    served = serve([0.0], [1.0])
    with pytest.raises(InputError, match="duration must be a finite number of seconds > 0"):
        served.queue_length_stats(duration)
    with pytest.raises(InputError, match="duration must be"):
        served.utilisation(duration)
