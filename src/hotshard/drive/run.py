"""Run a drive: open loop (arrivals on the schedule, each sent when due whether or not earlier
ones returned) or closed loop (U users, each waiting for its answer), in one or K processes.

Latency is measured from each request's *intended* time, so a stall counts for every request
scheduled during it (no coordinated omission); service time from the actual send; dispatch
lag is how late the driver sent. Time is injected: the loop's monotonic clock in production,
and every process of a run starts at one agreed wall-clock instant.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import multiprocessing
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from hotshard.drive.bound import cpu_times, host_cpu
from hotshard.drive.keys import KeySource, load_keys
from hotshard.drive.record import (
    INTERVAL_S,
    MAX_DISTINCT_SHARDS,
    MAX_SHARD_NAME,
    Recorder,
    value_at_percentile,
)
from hotshard.drive.schedule import BLOCK, Schedule
from hotshard.drive.transport import HttpTarget, TransportError
from hotshard.errors import HotshardError, InputError

__all__ = ["DriveConfig", "DriveResult", "drive", "target_stats"]

DEFAULT_HTTP_READ = "GET /channels/{key}/messages?limit=50"
DEFAULT_HTTP_WRITE = "POST /channels/{key}/messages"
DRAIN_S = 30.0         # after the schedule ends, wait this long for requests still out
STOP_GRACE_MIN_S = 1.0  # a run stopped early waits at least this long for requests still out
STATS_TIMEOUT_S = 2.0   # the target's /stats (CPU per shard), read before and after a run
# A run whose share of failed, dropped or unfinished requests exceeds this is not a measurement
# of the target under load: its summary says so first, its observations say valid: false and
# the command exits EXIT_INVALID_RUN. 1%: a healthy service fails far fewer, and above it the
# successes' percentiles describe a different system (the failing part is missing).
MAX_ERROR_RATE = 0.01
EXIT_INVALID_RUN = 3  # the run happened, but too many requests failed to call it a measurement
EXIT_INTERRUPTED = 130  # stopped early by Ctrl-C or SIGTERM (the shell's 128 + SIGINT)
# The most arrivals per second one driver process is allowed to be asked for. Measured on this
# project's 2-core machine against a loopback server: one process holds 20,000/s (dispatch lag
# p99 13 ms) and falls 30% behind at 40,000/s (its ceiling is about 30,000/s); the limit leaves
# room for a machine twice as fast and refuses what no process can schedule.
MAX_RATE_PER_PROCESS = 50_000
MAX_PROCESSES = 64


@dataclass(frozen=True)
class DriveConfig:
    """Everything a run needs; picklable, so every process rebuilds its own state from it."""

    url: str
    keys: str
    rate: float = 100.0
    duration: float = 10.0
    arrivals: str = "poisson"
    ramp: float = 0.0
    seed: int = 0
    read_ratio: float | None = None
    read: str | None = None    # None: the target's default (HTTP chat API, or Redis streams)
    write: str | None = None
    max_inflight: int = 10_000
    processes: int = 1
    closed_users: int | None = None
    timeout: float = 30.0
    partitioner: tuple[str, int] | None = None  # client-side shard breakdown (name, shards)
    max_error_rate: float = MAX_ERROR_RATE
    order: str = "auto"        # a profile's keys in production's order (keys.ORDERS)
    events: tuple = ()         # big events (workload.timing.HotEvent): a key made hot

    def __post_init__(self) -> None:
        if not 0 <= self.max_error_rate <= 1:
            raise InputError(f"max error rate must be a fraction in [0, 1], got "
                             f"{self.max_error_rate}")
        if self.max_inflight < 1:
            raise InputError(f"max_inflight must be >= 1, got {self.max_inflight}")
        if self.processes < 1:
            raise InputError(f"processes must be >= 1, got {self.processes}")
        if self.closed_users is not None and self.closed_users < 1:
            raise InputError(f"closed users must be >= 1, got {self.closed_users}")
        if self.timeout <= 0:
            raise InputError(f"timeout must be > 0 s, got {self.timeout}")
        self.schedule()  # validates rate, duration, arrivals, ramp
        if self.events:
            from hotshard.workload.timing import check_overlaps

            if self.closed_users is not None:
                raise InputError("${hot_events} needs the open loop (${rate}): a closed loop's "
                                 "requests have no schedule to put the event in")
            for e in self.events:
                if e.start >= self.duration:
                    raise InputError(f"the event on {e.key} starts at {e.start:g} s, after "
                                     f"the {self.duration:g} s run: start it earlier, or "
                                     "run longer")
            check_overlaps(tuple(self.events))

    def check_schedulable(self) -> None:
        """InputError when the rate is more than this many driver processes can schedule
        (a Locust run checks per worker instead: its worker count is known only later)."""
        if self.closed_users is None and self.rate > MAX_RATE_PER_PROCESS * self.processes:
            need = math.ceil(self.rate / MAX_RATE_PER_PROCESS)
            fix = (f"use ${{processes}} {need} (or lower ${{rate}})" if need <= MAX_PROCESSES else
                   f"at most {MAX_RATE_PER_PROCESS * MAX_PROCESSES:,.0f}/s from one machine "
                   f"({MAX_PROCESSES} processes): lower ${{rate}}, or spread it over machines with "
                   "Locust (hotshard.drive.locust)")
            raise InputError(f"rate {self.rate:,.0f}/s is more than {self.processes} driver "
                             f"process(es) can schedule (at most {MAX_RATE_PER_PROCESS:,}/s "
                             f"each): {fix}")

    def schedule(self) -> Schedule:
        model = None
        if self.arrivals == "profile":
            model = _profile_arrivals(self.keys)
        return Schedule(self.rate, self.duration, self.arrivals, self.ramp, self.seed, model)

    def key_source(self) -> KeySource:
        """The keys of this run: in a profile's locality order laid out for the run's
        expected length (the same in every process), or independent draws."""
        source = load_keys(self.keys, seed=self.seed, read_ratio=self.read_ratio,
                           order=self.order, events=self.schedule().expected,
                           shaped=self.arrivals == "profile")
        source.hot_events = tuple(self.events)
        return source

    @property
    def is_redis(self) -> bool:
        return self.url.startswith(("redis-cluster://", "redis://"))

    def target(self) -> Any:
        """The transport for this URL: HTTP(S), or native commands to a Redis Cluster."""
        if self.is_redis:
            from hotshard.drive.redis_target import RedisClusterTarget

            return RedisClusterTarget(self.url, read=self.read, write=self.write,
                                      timeout=self.timeout)
        return HttpTarget(self.url, read=self.read or DEFAULT_HTTP_READ,
                          write=self.write or DEFAULT_HTTP_WRITE, timeout=self.timeout,
                          max_connections=min(self.max_inflight, 1024))

    @property
    def model(self) -> str:
        return "open" if self.closed_users is None else "closed"


_ARRIVAL_MODELS: dict[str, Any] = {}


def _profile_arrivals(keys: str) -> Any:
    """The arrivals section of the profile ``keys`` names (read once per process)."""
    if keys not in _ARRIVAL_MODELS:
        from hotshard.profile.document import Profile

        if not keys.endswith(".json"):
            raise InputError("${arrivals} profile takes its shape from a profile: give a "
                             "PROFILE.json (made by hotshard profile ... --time COL)")
        profile = Profile.load(keys)
        if profile.arrivals is None:
            raise InputError(f"{keys} has no arrivals section: profile the events with "
                             "--time COL to record when they came")
        _ARRIVAL_MODELS[keys] = profile.arrivals
    return _ARRIVAL_MODELS[keys]


@dataclass(frozen=True)
class DriveResult:
    """A finished (or interrupted) run: the merged recorder and what the run was."""

    config: DriveConfig
    recorder: Recorder
    wall_s: float
    sent: int
    start_epoch: float
    key_generator: str
    interrupted: bool = False
    server_stats: tuple[dict | None, dict | None] = (None, None)
    notes: tuple[str, ...] = ()
    key_order: str = "irm"     # the keys' order: locality (a profile's) or irm
    host_cpu: dict | None = None  # the driver's machine's CPU over the run (bound.host_cpu)
    # the target's per-shard CPU seconds read every window during the run (series.CpuSample)
    cpu_samples: tuple = ()


class _Shards:
    """Client-side shard of a key, when the service does not say (X-Shard)."""

    def __init__(self, spec: tuple[str, int] | None) -> None:
        self.router = None
        if spec is not None:
            from hotshard.service.router import Router

            self.router = Router(spec[0], spec[1])

    def of(self, key: str, header: str | None) -> str | None:
        if header is not None:
            return header
        return str(self.router.shard_of(key)) if self.router is not None else None


@dataclass(frozen=True)
class Pace:
    """The driver's time, injected: ``clock()`` is seconds since the run's start (negative
    before it), ``sleep(s)`` waits that long, ``stamp(t)`` turns a transport's send instant
    (on the event loop's clock) into the driver's. A run uses the event loop's monotonic
    clock (``on_loop``); a test gives virtual time, so pacing is checked exactly."""

    clock: Callable[[], float]
    sleep: Callable[[float], Awaitable[Any]]
    stamp: Callable[[float], float]

    @classmethod
    def on_loop(cls, loop: asyncio.AbstractEventLoop, start_epoch: float) -> Pace:
        """Time 0 at the wall-clock instant ``start_epoch`` that every process agreed on,
        measured on this loop's monotonic clock."""
        t0 = loop.time() + (start_epoch - time.time())
        return cls(clock=lambda: loop.time() - t0, sleep=asyncio.sleep,
                   stamp=lambda written: written - t0)


async def _one(target: Any, recorder: Recorder, shards: _Shards, data: bytes, key: str,
               is_read: bool, intended: float, pace: Pace, state: dict) -> None:
    sent = pace.clock()
    try:
        status, header, written = await target.send(data)
        sent = pace.stamp(written)
        # a redirect is not an answer: drive does not follow it, so the run did not measure
        # the target it was pointed at
        error = None if 200 <= status < 300 else f"http {status}"
    except TransportError as e:
        header, error = e.shard, e.kind
    done = pace.clock()
    state["inflight"] -= 1
    recorder.record(intended=intended, sent=sent, done=done, shard=shards.of(key, header),
                    error=error, is_read=is_read, key=key, payload=len(data))


async def _open_loop(config: DriveConfig, process: int, keys: KeySource, target: Any,
                     recorder: Recorder, start_epoch: float, stop: Any,
                     progress: Callable[[dict], None] | None, pace: Pace | None = None) -> int:
    """Send each arrival of this process's share of the schedule when it is due, whether or
    not earlier ones returned; an arrival due while ``max_inflight`` are out is dropped and
    counted. Latency counts from the due instant, so a late send (the driver behind
    schedule) or a stalled target shows in every request it delays."""
    loop = asyncio.get_running_loop()
    pace = pace or Pace.on_loop(loop, start_epoch)
    clock = pace.clock
    shards = _Shards(config.partitioner)
    state = {"inflight": 0}
    tasks: set[asyncio.Task] = set()
    sent = 0
    next_report = 0.5
    for indices, times in config.schedule().for_process(process, config.processes):
        batch_keys, reads, sizes = keys.batch(indices, times)
        for j in range(indices.size):
            due = float(times[j])
            delay = due - clock()
            if delay > 0.0005:
                await pace.sleep(delay)
            elif not j % 8:
                await asyncio.sleep(0)  # behind schedule: still let replies be handled
            if stop.is_set():
                recorder.stopped_at = clock()
                await _drain_after_stop(tasks, recorder, config)
                return sent
            if state["inflight"] >= config.max_inflight:
                recorder.drop(due)
                continue
            key = batch_keys[j]
            data = target.build(bool(reads[j]), key, int(sizes[j]), int(indices[j]))
            state["inflight"] += 1
            task = loop.create_task(_one(target, recorder, shards, data, key, bool(reads[j]),
                                         due, pace, state))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            sent += 1
            if progress is not None and due >= next_report:
                next_report = due + 0.5
                progress({"t": due, "sent": sent, "inflight": state["inflight"],
                          "recorder": recorder})
    if tasks:
        await asyncio.wait(tasks, timeout=DRAIN_S)
    return sent


async def _closed_loop(config: DriveConfig, process: int, keys: KeySource, target: Any,
                       recorder: Recorder, start_epoch: float, stop: Any,
                       progress: Callable[[dict], None] | None, pace: Pace | None = None
                       ) -> int:
    """U users (split over processes), each sending its next request when the last returns;
    latency from the actual send, as a closed-loop tool reports it."""
    pace = pace or Pace.on_loop(asyncio.get_running_loop(), start_epoch)
    clock = pace.clock
    await pace.sleep(max(0.0, -clock()))
    shards = _Shards(config.partitioner)
    users = [u for u in range(config.closed_users or 1) if u % config.processes == process]
    counter = {"sent": 0}
    state = {"inflight": 0}

    async def user(u: int) -> None:
        n = 0
        while clock() < config.duration and not stop.is_set():
            index = (n * (config.closed_users or 1) + u)  # a user's own arrival sequence
            n += 1
            block_keys, reads, sizes = keys._block(index // BLOCK)
            j = index % BLOCK
            key = block_keys[j]
            data = target.build(bool(reads[j]), key, int(sizes[j]), index)
            state["inflight"] += 1
            counter["sent"] += 1
            await _one(target, recorder, shards, data, key, bool(reads[j]), clock(), pace,
                       state)

    async def report() -> None:
        while progress is not None:
            await pace.sleep(0.5)
            progress({"t": clock(), "sent": counter["sent"], "inflight": state["inflight"],
                      "recorder": recorder})

    reporter = asyncio.create_task(report())
    running = {asyncio.create_task(user(u)) for u in users}
    while running and not stop.is_set():
        _, running = await asyncio.wait(running, timeout=0.1)
    if stop.is_set():
        recorder.stopped_at = min(clock(), config.duration)
        await _drain_after_stop(running, recorder, config)
    reporter.cancel()
    return counter["sent"]


def stop_grace(recorder: Recorder, timeout: float) -> float:
    """How long requests still out when a run is stopped early may take to come back: three
    times the successes' p99 so far, at least STOP_GRACE_MIN_S, at most the request timeout.
    What is still out after it counts as unfinished, a failure: a frozen shard's requests,
    outstanding for seconds when the user presses Ctrl-C, must not vanish from the run."""
    p99 = (value_at_percentile(recorder.latency, 99) / 1e6
           if recorder.latency.get_total_count() else 0.0)
    return min(timeout, max(STOP_GRACE_MIN_S, 3.0 * p99))


async def _drain_after_stop(tasks: set, recorder: Recorder, config: DriveConfig) -> None:
    if tasks:
        _, pending = await asyncio.wait(set(tasks), timeout=stop_grace(recorder,
                                                                       config.timeout))
        for task in pending:
            task.cancel()


class _LocalStop:
    def __init__(self) -> None:
        self.flag = False

    def is_set(self) -> bool:
        return self.flag

    def set(self) -> None:
        self.flag = True


async def _run_process(config: DriveConfig, process: int,
                       when_ready: Callable[[], Any], stop: Any,
                       progress: Callable[[dict], None] | None) -> tuple[dict, int, float]:
    """Prepare everything that costs time (keys' first block, connections, slot map, the
    hash kernels), then ask ``when_ready`` for the start instant (an awaitable of epoch
    seconds), so no arrival is late because of setup."""
    keys = config.key_source()
    target = config.target()
    recorder = Recorder()
    loop_fn = _open_loop if config.closed_users is None else _closed_loop
    try:
        keys._block(0)
        await target.check()  # a connection (and a Redis Cluster's slot map) before the start
        if hasattr(target, "prewarm") and config.closed_users is None:
            # about 20 ms of arrivals' worth of connections, open before the first is due
            share = config.rate / config.processes
            await target.prewarm(min(config.max_inflight, max(8, int(share * 0.02))))
        if hasattr(target, "warm"):
            target.warm(keys._block(0)[0][:64])
        # what exists now (tables, sampler, modules) is never garbage: take it out of the
        # collector's scans, so a full collection mid-run is short and does not show as lag
        gc.collect()
        gc.freeze()
        start_epoch = await when_ready()
        sent = await loop_fn(config, process, keys, target, recorder, start_epoch, stop,
                             progress)
    finally:
        gc.unfreeze()
        await target.aclose()
    return recorder.encode(), sent, start_epoch


class _ChildStop:
    """The parent's stop event, or the parent's death: a driver process whose parent was
    killed must not go on sending load nobody will count."""

    def __init__(self, event: Any, parent: int) -> None:
        self.event = event
        self.parent = parent
        self.calls = 0

    def is_set(self) -> bool:
        self.calls += 1
        if not self.calls % 256 and os.getppid() != self.parent:
            return True
        return self.event.is_set()


def _child(config: DriveConfig, process: int, start: Any, stop: Any, results: Any,
           parent: int) -> None:
    """One driver process: get ready (imports, keys, connections), say so, wait for the
    agreed start instant, run its share."""
    for signum in (signal.SIGINT, signal.SIGTERM):  # the parent decides when to stop
        signal.signal(signum, signal.SIG_IGN)
    stop = _ChildStop(stop, parent)

    async def when_ready() -> float:
        results.put(("ready", process))
        while start.value == 0.0 and not stop.is_set():
            await asyncio.sleep(0.005)
        return start.value

    try:
        encoded, sent, _ = asyncio.run(_run_process(config, process, when_ready, stop, None))
        results.put((process, encoded, sent, None))
    except HotshardError as e:  # reported by the parent as one line
        results.put((process, None, 0, str(e)))
    except Exception as e:
        results.put((process, None, 0, f"{type(e).__name__}: {e}"))


def target_stats(url: str, timeout: float = 5.0) -> dict | None:
    """The reference service's /stats, when the target is `hotshard serve`, or each Redis
    node's CPU from INFO (else None): read before and after a run, by ``drive`` and by the
    Locust runner alike."""
    if url.startswith(("redis-cluster://", "redis://")):
        from hotshard.drive.redis_target import node_stats

        return node_stats(url, timeout=timeout)
    from hotshard._http import FetchError, fetch, loads_bounded

    try:
        answer = fetch(url.rstrip("/") + "/stats", timeout=timeout, max_bytes=MAX_STATS_BYTES)
        if answer.status != 200:
            return None
        doc = loads_bounded(answer.body)
    except (FetchError, ValueError, UnicodeDecodeError):
        return None
    return sane_stats(doc)


# the largest /stats read (the reference service's is kilobytes even at 1,024 shards)
MAX_STATS_BYTES = 8 * 1024 * 1024
_SHARD_NUMBERS = ("cpu_seconds", "cpu_percent", "requests", "cache_hits", "coalesced",
                  "restarts", "pid", "commands")


def sane_stats(doc: Any) -> dict | None:
    """A target's ``/stats`` as the breakdown reads it, or None: a dict whose ``shards`` is a
    list of objects with an id (at most ``MAX_DISTINCT_SHARDS``), their numbers finite (an
    odd one dropped, so the run keeps what was measured and loses only that), replicas the
    same. Whatever else the document holds is read by its own checked reader."""
    if not isinstance(doc, dict) or not isinstance(doc.get("shards"), list):
        return None
    shards = []
    for raw in doc["shards"][:MAX_DISTINCT_SHARDS]:
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str | int) \
                or isinstance(raw.get("id"), bool) or len(str(raw["id"])) > MAX_SHARD_NAME:
            continue
        shard = {k: v for k, v in raw.items() if k not in _SHARD_NUMBERS and k != "replicas"}
        for name in _SHARD_NUMBERS:
            value = raw.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool) \
                    and math.isfinite(value) and value >= 0:
                shard[name] = value
        replicas = raw.get("replicas")
        if isinstance(replicas, list):
            shard["replicas"] = [
                {k: v for k, v in r.items() if k in ("replica", "pid", "cpu_seconds")
                 and isinstance(v, int | float) and not isinstance(v, bool)
                 and math.isfinite(v)}
                for r in replicas[:64] if isinstance(r, dict) and "replica" in r]
        shards.append(shard)
    return {**doc, "shards": shards}


def drive(config: DriveConfig, *, progress: Callable[[dict], None] | None = None,
          clock: Callable[[], float] = time.time) -> DriveResult:
    """Run the drive; Ctrl-C stops it early and still returns what was measured. ``clock``:
    the wall clock in Unix seconds (the instant every process starts from).

    Raises
    ------
    InputError
        The target is unreachable (checked before the run starts) or the keys are bad.
    """
    config.check_schedulable()
    keys = config.key_source()
    target = config.target()

    async def reachable() -> None:
        await target.check()
        await target.aclose()

    asyncio.run(reachable())
    if config.partitioner is not None:
        _Shards(config.partitioner)  # a bad partitioner fails now, not in every process
    before = target_stats(config.url, min(STATS_TIMEOUT_S, config.timeout))
    sampler = None
    if before is not None:  # a target that reports its shards' CPU: read it every window
        from hotshard.drive.series import CpuSampler

        sampler = CpuSampler(lambda: target_stats(config.url, min(1.0, config.timeout)),
                             every_s=INTERVAL_S).start()
    host_before = cpu_times()
    recorder = Recorder()
    run = _in_process if config.processes == 1 else _in_processes
    encoded_runs, sent, start_epoch, interrupted = run(config, progress, clock)
    for encoded in encoded_runs:
        recorder.merge(encoded)
    # an interrupted run lasted until it stopped sending (the drain after it is not load)
    stopped = recorder.stopped_at
    wall = max(1e-9, min(clock() - start_epoch, config.duration) if not interrupted
               else stopped if stopped is not None else clock() - start_epoch)
    host = host_cpu(host_before, cpu_times())
    if sampler is not None:
        sampler.stop()
    after = target_stats(config.url, min(STATS_TIMEOUT_S, config.timeout))
    return DriveResult(config, recorder, wall, sent, start_epoch, keys.generator,
                       interrupted, (before, after), key_order=keys.order, host_cpu=host,
                       cpu_samples=sampler.relative(start_epoch) if sampler else ())


def _in_process(config: DriveConfig, progress, clock) -> tuple[list[dict], int, float, bool]:
    """The run in this process: (encoded recorders, requests sent, start instant (Unix s),
    interrupted). SIGINT and SIGTERM stop it early, what was measured kept."""
    stop = _LocalStop()

    async def main() -> tuple[dict, int, float]:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):  # stop early, keep the results
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, stop.set)

        async def when_ready() -> float:
            return clock() + 0.02

        try:
            return await _run_process(config, 0, when_ready, stop, progress)
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(signum)

    encoded, sent, start_epoch = asyncio.run(main())
    return [encoded], sent, start_epoch, stop.is_set()


def _in_processes(config: DriveConfig, progress, clock
                  ) -> tuple[list[dict], int, float, bool]:
    """The run over ``config.processes`` spawned processes, started together once every one
    is ready: (encoded recorders, requests sent, start instant, interrupted)."""
    import queue

    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    start = ctx.Value("d", 0.0)
    results = ctx.Queue()
    children = [ctx.Process(target=_child, args=(config, k, start, stop, results, os.getpid()),
                            daemon=True) for k in range(config.processes)]
    stopped_by: list[int] = []
    start_epoch = clock()   # replaced by the instant the run really starts
    interrupted = False

    def on_signal(signum: int, _frame: Any) -> None:  # Ctrl-C or SIGTERM: stop, keep
        stopped_by.append(signum)
        stop.set()

    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread: no handlers
            previous[signum] = signal.signal(signum, on_signal)
    for child in children:
        child.start()
    got: dict[int, tuple] = {}
    ready = 0
    try:
        while len(got) < len(children):
            if stopped_by:
                interrupted = True
            try:
                message = results.get(timeout=0.5)
            except queue.Empty:   # check the children are alive
                if all(not c.is_alive() for c in children) and results.empty():
                    break
                if progress is not None:
                    progress({"t": clock() - start_epoch, "sent": None, "inflight": None,
                              "recorder": None})
                continue
            if message[0] == "ready":
                ready += 1
                if ready == len(children):  # all imported and loaded: go together
                    start_epoch = clock() + 0.2
                    start.value = start_epoch
                continue
            process, encoded, n, error = message
            got[process] = (encoded, n, error)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    interrupted = interrupted or bool(stopped_by)
    for child in children:
        child.join(5)
    if interrupted and start.value == 0.0:
        # stopped before every process was ready: nothing was sent, and the children's
        # clocks never had a start to count from (an epoch of 0 made a 57-year run)
        return [], 0, clock(), True
    errors = [e for _, _, e in got.values() if e]
    if not interrupted and (errors or len(got) < len(children)):
        raise HotshardError(f"a driver process failed: {errors[0] if errors else 'died'}")
    done = [(encoded, n) for encoded, n, error in got.values()
            if encoded is not None and not error]
    return [e for e, _ in done], sum(n for _, n in done), start_epoch, interrupted
