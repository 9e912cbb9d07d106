"""Acceptance tests of the open-loop driver against loopback servers in their own process.

1. Coordinated omission: a one-second stall shows in the open loop's p99 (latency from the
   intended send time) and all but vanishes from a closed loop's (latency from the actual send).
2. Rate: the driver sends exactly the scheduled arrivals, on time, at 1000 and 5000 req/s.
3. Reproducibility: one process or two, the same seed sends the same multiset of keys.
4. Ramp: a linear ramp over the first 2 s sends half as many requests as full rate would.

Every tolerance below is derived from the Poisson schedule: a count with mean m has standard
deviation sqrt(m), and we allow 4 of them (two-sided, a false alarm about 1 run in 16,000).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from hotshard.drive.breakdown import driver_warnings, to_observations
from hotshard.drive.run import DriveConfig, DriveResult, drive
from hotshard.drive.schedule import Schedule
from tests.drive._servers import reset, run_server, server_stats, shard_of

pytestmark = pytest.mark.slow
# timing: asserts rates, CPU shares or latencies of real processes; runs one at a time, the
# rest at idle priority (Makefile).
# Reproducibility (3.) asserts exact counts and keys only, so it runs in the parallel pass.
timing = pytest.mark.timing

SEED = 20261203
KEYS = "uniform:1000"
Z = 4.0  # standard deviations allowed on a Poisson count


def _drive(url: str, **kw) -> DriveResult:
    return drive(DriveConfig(url=url, keys=KEYS, seed=SEED, **kw))


def _count_at_least(hist, value_us: int) -> int:
    """Recorded values >= value_us (HdrHistogram buckets, 0.1% wide at 3 digits)."""
    return sum(item.count_at_value_iterated_to for item in hist.get_recorded_iterator()
               if item.value_iterated_to >= value_us)


def _schedule_times(rate: float, duration: float, ramp: float = 0.0) -> np.ndarray:
    """Every arrival time of the run's schedule, counted independently of the driver."""
    blocks = [t for _, t in Schedule(rate, duration, ramp=ramp, seed=SEED).blocks()]
    return np.concatenate(blocks) if blocks else np.empty(0)


# -- 1. coordinated omission ---------------------------------------------------------------------
STALL_AFTER_S = 1.5
STALL_S = 1.0
CO_DURATION = 4.0
CO_RATE = 500.0
CLOSED_USERS = 10


@timing
def test_a_stall_shows_in_open_loop_p99_and_hides_from_closed_loop():
    with run_server("stall", stall_after_s=STALL_AFTER_S, stall_s=STALL_S) as url:
        open_run = _drive(url, rate=CO_RATE, duration=CO_DURATION)
    with run_server("stall", stall_after_s=STALL_AFTER_S, stall_s=STALL_S) as url:
        closed_run = _drive(url, duration=CO_DURATION, closed_users=CLOSED_USERS)
    open_obs = to_observations(open_run, "open")
    closed_obs = to_observations(closed_run, "closed")
    assert (open_obs.model, closed_obs.model) == ("open", "closed")
    open_p99 = open_obs.latency_ms.p99
    closed_p99 = closed_obs.latency_ms.p99
    n_open = open_run.recorder.completed
    n_closed = closed_run.recorder.completed
    report = (f"open p99 {open_p99:.1f} ms over {n_open} requests; closed p99 "
              f"{closed_p99:.1f} ms over {n_closed} requests (max "
              f"{closed_obs.latency_ms.max:.1f} ms)")
    print(report)
    assert not open_run.recorder.errors and not closed_run.recorder.errors, report

    # Open loop. Arrivals due in the 1 s window [s, s+1) (s = 1.5 s after the first request)
    # are answered at s+1, so arrival t waits s+1-t: uniform on (0, 1 s]. They are
    # rate x 1 s = 500 of rate x 4 s = 2000 requests (25%); the rest take ~1 ms. The p99 is
    # the 20th longest wait (1% of 2000) = the top 4% of the stalled ones, ~1 - 0.04 = 0.96 s.
    # Its spread: the 20th stalled arrival comes Gamma(20, 500/s) after s, sd sqrt(20)/500 =
    # 9 ms, so 0.9 s is > 6 sd below; and no request can wait more than the window plus its
    # own dispatch and service time (the 500 held answers are read in well under 100 ms).
    assert 900.0 <= open_p99 <= STALL_S * 1000 + 100, report
    # Waits >= 0.5 s: arrivals in the first half of the window, Poisson(rate x 0.5 s = 250).
    long_waits = _count_at_least(open_run.recorder.latency, 500_000)
    mean = CO_RATE * STALL_S / 2
    assert abs(long_waits - mean) <= Z * math.sqrt(mean), (long_waits, report)

    # Closed loop. Each of the 10 users has exactly one request in flight when the window
    # opens, and sends nothing else until it is answered at the window's end: 10 requests
    # wait ~1 s, however long the run. Latency counts from the actual send, so the ~1 s of
    # requests a user *would* have sent during the stall are never recorded (coordinated
    # omission). The 10 are above the p99 rank once 10 < 1% of N, i.e. N > 1000 (a loopback
    # server answers thousands per second, so N is ~10^4); the p99 is then an ordinary
    # loopback service time, a few ms; 100 ms leaves room for a busy machine and is still
    # 9x under the open loop's 0.9 s floor.
    assert n_closed > 100 * CLOSED_USERS, report
    assert _count_at_least(closed_run.recorder.latency, 500_000) == CLOSED_USERS, report
    assert closed_obs.latency_ms.max >= 900.0, report  # the stall did happen, and was seen
    assert closed_p99 < 100.0, report
    assert open_p99 >= 9 * closed_p99, report


# -- 2. rate ---------------------------------------------------------------------------------------
RATE_DURATION = 5.0


@timing
@pytest.mark.parametrize(("rate", "processes"), [(1000.0, 1), (5000.0, 1)])
def test_the_driver_holds_the_rate(rate, processes):
    times = _schedule_times(rate, RATE_DURATION)
    scheduled, last_due = times.size, float(times[-1])
    with run_server("fast") as url:
        result = _drive(url, rate=rate, duration=RATE_DURATION, processes=processes)
        served = server_stats(url)["count"]
    rec = result.recorder
    lag_p99 = rec.lag.get_value_at_percentile(99) / 1000
    behind = max(0.0, rec.last_sent - last_due)
    # Achieved dispatch rate: what was sent over the time it took to send it. Sending ends
    # `behind` s after the last arrival was due, so the rate is sent / (duration + behind).
    achieved = result.sent / (RATE_DURATION + behind)
    target = scheduled / RATE_DURATION
    report = (f"{rate:.0f} req/s, {processes} process(es): sent {result.sent} of {scheduled} "
              f"scheduled, completed {rec.completed}, dropped {rec.dropped}, errors "
              f"{dict(rec.errors)}; dispatch lag p99 {lag_p99:.2f} ms, max "
              f"{rec.lag.get_max_value() / 1000:.2f} ms; last send {behind * 1000:.1f} ms after "
              f"the last due; achieved dispatch {achieved:.0f}/s of {target:.0f}/s; "
              f"warnings {driver_warnings(result)}")
    print(report)
    # The schedule itself: Poisson(rate x duration) arrivals, within Z sd of the mean.
    mean = rate * RATE_DURATION
    assert abs(scheduled - mean) <= Z * math.sqrt(mean), report
    # Every scheduled arrival sent (exact), answered without error, and seen by the server.
    assert result.sent == scheduled, report
    assert rec.completed == result.sent == served and not rec.errors, report
    # Completed per second against the target rate: the Poisson tolerance.
    assert abs(rec.completed / RATE_DURATION - rate) <= Z * math.sqrt(mean) / RATE_DURATION, \
        report
    # Dispatch within 1% of the schedule's rate (the acceptance), nothing dropped, no warning
    # that the driver fell behind its schedule. The dispatch-lag p99 is reported above; its
    # 5 ms bar is the benchmark's (bench_drive.py), not a unit test's: a 2-vCPU VM stalls a
    # process for tens of ms now and then, and a timed assertion would fail on the host.
    assert achieved >= 0.99 * target, report
    assert rec.dropped == 0, report
    assert not [w for w in driver_warnings(result) if "scheduled requests" in w], report


# -- 3. reproducibility ----------------------------------------------------------------------------
def test_one_or_two_processes_send_the_same_keys():
    rate, duration = 1000.0, 2.0
    scheduled = _schedule_times(rate, duration).size
    keys, shards, ops = [], [], []
    with run_server("fast") as url:
        for processes in (1, 2):
            reset(url)
            result = _drive(url, rate=rate, duration=duration, processes=processes)
            keys.append(Counter(server_stats(url)["keys"]))
            shards.append({s: t.requests for s, t in result.recorder.shards.items()})
            ops.append((result.recorder.reads, result.recorder.writes))
            assert result.sent == scheduled, (processes, result.sent, scheduled)
    assert keys[0] == keys[1]
    assert sum(keys[0].values()) == scheduled
    assert ops[0] == ops[1]
    # X-Shard as the driver recorded it agrees with the keys the server saw.
    from_keys = Counter()
    for key, n in keys[0].items():
        from_keys[str(shard_of(key))] += n
    assert shards[0] == shards[1] == dict(from_keys)


# -- 4. ramp ---------------------------------------------------------------------------------------
@timing
def test_a_ramp_sends_half_as_many_as_full_rate():
    rate, duration, ramp = 1000.0, 4.0, 2.0
    times = _schedule_times(rate, duration, ramp)
    with run_server("fast") as url:
        result = _drive(url, rate=rate, duration=duration, ramp=ramp)
    rec = result.recorder
    assert result.sent == times.size and not rec.errors
    per_second = Counter()
    for index, hist in rec.merged_intervals():
        per_second[min(index, 3)] += hist.get_total_count()  # late finishers go to the last
    in_ramp = per_second[0] + per_second[1]
    full = per_second[2] + per_second[3]
    report = f"per second {dict(sorted(per_second.items()))}; ramp {in_ramp}, full {full}"
    print(report)

    # The recorder counts a request in the second it finished: at most the latency after it
    # was due (or 0.5 ms before: the driver sends an arrival that close to due at once).
    # So the recorded ramp count differs from the schedule's by at most the arrivals due
    # within that margin of t = 2 s.
    latest = rec.latency.get_max_value() / 1e6
    due_in_ramp = int((times < ramp).sum())
    margin = int(((times >= ramp - latest) & (times < ramp + 0.0005)).sum())
    assert abs(in_ramp - due_in_ramp) <= margin, (due_in_ramp, margin, report)

    # Λ(t) = rate t^2 / (2 ramp) in the ramp, then rate (t - ramp/2): 250 arrivals expected in
    # second 0, 750 in second 1 (a linear ramp, not a step), 1000 in each full second.
    for second, mean in ((0, 250.0), (1, 750.0), (2, 1000.0), (3, 1000.0)):
        assert abs(per_second[second] - mean) <= Z * math.sqrt(mean) + margin, report
    # The ramp's 1000 against the full rate's 2000 over the same 2 s: ratio 1/2, with sd
    # 0.5 x sqrt(1/1000 + 1/2000) = 0.019 for two independent Poisson counts.
    sd = 0.5 * math.sqrt(1 / (rate * ramp / 2) + 1 / (rate * ramp))
    assert abs(in_ramp / full - 0.5) <= Z * sd, report
