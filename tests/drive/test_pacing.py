"""The open loop's pacing in virtual time (``Pace`` injected): exact, no wall clock.

Each test runs the real ``_open_loop`` (or ``_closed_loop``) against a target whose replies
take virtual time, so what is asserted (every arrival sent at its due instant, a stall counted
from the due instant of every request it delays, drops at --max-inflight, a driver that fell
behind sending at once and saying how late) follows from the schedule alone, whatever the
machine's load.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

import numpy as np

from hotshard.drive.keys import load_keys
from hotshard.drive.record import Recorder
from hotshard.drive.run import DriveConfig, Pace, _closed_loop, _LocalStop, _open_loop


class VirtualTime:
    """Virtual seconds: a sleeper wakes when every runnable task has run and its instant is
    the earliest pending one, so time moves only when the program waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list = []
        self._order = itertools.count()
        self.jumps: dict[float, float] = {}   # at virtual instant t, the clock leaps by s

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        wake = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + max(seconds, 0.0), next(self._order),
                                        wake))
        await wake

    def pace(self) -> Pace:
        return Pace(clock=self.clock, sleep=self.sleep, stamp=lambda written: written)

    async def run(self, coro):
        task = asyncio.ensure_future(coro)
        while not task.done():
            for _ in range(50):     # let everything runnable run
                await asyncio.sleep(0)
            if task.done() or not self._sleepers:
                continue
            wake_at, _, wake = heapq.heappop(self._sleepers)
            for at, leap in list(self.jumps.items()):   # a pause of the driver itself
                if self.now <= at < wake_at:
                    self.now = at + leap
                    del self.jumps[at]
            self.now = max(self.now, wake_at)
            wake.set_result(None)
        return task.result()


class Target:
    """Answers after ``service(sent)`` virtual seconds; records every send instant."""

    def __init__(self, time: VirtualTime, service) -> None:
        self.time, self.service, self.sent = time, service, []

    def build(self, is_read: bool, key: str, size: int, index: int) -> bytes:
        return key.encode()

    async def send(self, data: bytes):
        written = self.time.now
        self.sent.append(written)
        await self.time.sleep(self.service(written))
        return 200, "0", written


def _drive(config: DriveConfig, service, *, jumps=None, loop_fn=_open_loop):
    time = VirtualTime()
    time.jumps.update(jumps or {})
    target = Target(time, service)
    recorder = Recorder()
    keys = load_keys(config.keys, seed=config.seed)
    sent = asyncio.run(time.run(loop_fn(config, 0, keys, target, recorder, 0.0, _LocalStop(),
                                        None, time.pace())))
    return sent, target, recorder


def _due(config: DriveConfig) -> np.ndarray:
    return np.concatenate([t for _, t in config.schedule().for_process(0, 1)])


def _ms(hist, percentile: float) -> float:
    return hist.get_value_at_percentile(percentile) / 1000.0


def test_every_arrival_is_sent_at_its_due_instant():
    config = DriveConfig(url="http://127.0.0.1:1", keys="uniform:100", rate=200, duration=3,
                         arrivals="poisson", seed=4)
    sent, target, recorder = _drive(config, lambda at: 0.002)
    due = _due(config)
    assert sent == due.size == recorder.ok
    # sent at the due instant, or within the 0.5 ms the loop does not sleep for
    assert np.all(np.asarray(target.sent) >= due - 0.0005)
    assert np.all(np.asarray(target.sent) <= due + 1e-9)
    assert _ms(recorder.lag, 100) <= 0.5 + 0.01   # histogram resolution
    assert 1.99 <= _ms(recorder.latency, 50) <= 2.51


def test_a_stall_counts_from_the_due_instant_of_every_request_it_delays():
    """The target stops answering for 1 s at t = 1: the open loop keeps sending on schedule,
    and a request due at t waits until 2 + service, so latency is 2 - t + service for every
    t in [1, 2): about half the run's requests above 1 s at p50 of that window, p99 of the
    whole run near the full second (no coordinated omission)."""
    config = DriveConfig(url="http://127.0.0.1:1", keys="uniform:100", rate=100, duration=4,
                         arrivals="constant", seed=1)
    service = 0.001
    sent, target, recorder = _drive(config, lambda at: (2.0 - at + service)
                                    if 1.0 <= at < 2.0 else service)
    due = _due(config)
    assert sent == due.size and np.allclose(target.sent, due, atol=0.0005)
    stalled = (due >= 1.0) & (due < 2.0)
    expected = np.where(stalled, 2.0 - due + service, service) * 1000.0
    for q in (50, 90, 99):
        want = float(np.percentile(expected, q))
        assert abs(_ms(recorder.latency, q) - want) <= 0.01 * want + 0.02
    assert _ms(recorder.lag, 100) <= 0.51   # the driver itself was never late


def test_arrivals_due_while_max_inflight_are_out_are_dropped_and_counted():
    config = DriveConfig(url="http://127.0.0.1:1", keys="uniform:100", rate=100, duration=2,
                         arrivals="constant", max_inflight=10, seed=1)
    # nothing answers before t = 1.5: arrivals 0..9 fill the window, 10..149 are dropped
    sent, target, recorder = _drive(config, lambda at: 1.5 - at + 0.001 if at < 1.5
                                    else 0.001)
    due = _due(config)
    assert sent == 10 + int((due >= 1.5 + 0.001).sum())
    assert recorder.dropped == due.size - sent
    assert recorder.ok == sent


def test_a_driver_that_falls_behind_sends_at_once_and_counts_the_lag():
    """The driver's own clock leaps 0.3 s at t = 1 (a pause of the process): arrivals due in
    the gap are sent at once, not skipped, and their latency and lag count from their due
    instants."""
    config = DriveConfig(url="http://127.0.0.1:1", keys="uniform:100", rate=100, duration=3,
                         arrivals="constant", seed=1)
    sent, target, recorder = _drive(config, lambda at: 0.001, jumps={1.0: 0.3})
    due = _due(config)
    assert sent == due.size == recorder.ok
    late = (due > 1.0) & (due < 1.3)
    assert late.sum() == 29
    assert _ms(recorder.lag, 100) >= 290          # the first one due after the leap: ~0.3 s late
    assert abs(_ms(recorder.lag, 100) - 1000 * (1.3 - due[late].min())) <= 3
    assert np.all(np.asarray(target.sent)[late] >= 1.3 - 1e-9)


def test_closed_loop_users_wait_for_their_answers():
    """U users, each sending when its last answer came: at 10 ms a request, 4 users send
    4 / 0.01 = 400 requests a second, whatever the machine."""
    config = DriveConfig(url="http://127.0.0.1:1", keys="uniform:100", rate=1, duration=2,
                         closed_users=4, seed=1)
    sent, target, recorder = _drive(config, lambda at: 0.010, loop_fn=_closed_loop)
    assert sent == recorder.ok == 4 * 200
    assert abs(_ms(recorder.latency, 50) - 10.0) <= 0.02
