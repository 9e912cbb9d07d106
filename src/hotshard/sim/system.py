"""The sharded service, simulated: requests -> keys -> shards -> caches -> FIFO queues.

One run draws every request (arrival time from an arrival process, key from a sampler, read
or write), places each key on a shard as the store does, lets the caches and the mitigations
take what they take, and serves what is left through each shard's FIFO queue in virtual time
(``hotshard.sim.queues``). The result is the same ``hotshard.observations/1`` that the driver
and the reference service write, labelled "simulation", so ``diagnose`` reads all three
alike.

A run streams, so a day at production's rate (2.6e8 requests) needs no more memory than a
few minutes: the arrivals come in blocks of time (``arrivals.arrival_blocks``), every
request of a block is drawn from the block's own seed, and a window of blocks passes through
the caches and the queues, whose state carries to the next window exactly
(``queues.ShardQueue``: requests in service or waiting at the edge finish when they would
have; ``cache.LRUCache``). Latencies are counted into per-shard histograms
(``histogram.LatencyHistogram``: percentiles within 0.2%, max and mean exact), utilisation,
queue lengths, cache hits and coalesced reads are summed as the windows pass. The result is
the same whatever the window.

Placement follows ``hotshard predict``'s model: head keys (real IDs) are placed exactly by the
store's partitioner; synthetic tail keys (and every key of a classic distribution, which has no
real IDs) land on shards at random in proportion to each shard's ownership of the key space,
each key always on the same shard (a hash of its position). The mitigations
(``hotshard.mitigations``) mean what they mean in predict: ``split_keys``/``split_into`` spread
each of the top K keys over S time-bucket sub-partitions placed as keys of their own;
``replicas`` spreads a shard's reads over R nodes in total, each doing every write;
``cache_hit`` serves that fraction of the top keys' reads from a client-side cache; and
``coalesce`` makes a read that arrives while an identical read is in flight wait for it instead of
queueing (exactly, in the event loop).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from hotshard._format import pct
from hotshard.detect.policy import Detection
from hotshard.errors import InputError
from hotshard.mitigations import MODEL_FIELDS, Mitigations
from hotshard.observations import Observations, ShardObservation
from hotshard.sim.arrivals import ArrivalProcess, PoissonArrivals
from hotshard.sim.histogram import LatencyHistogram, bucket_of
from hotshard.sim.series import SeriesRecorder, WindowSeries, series_interval
from hotshard.sim.service_times import Exponential, ServiceTime

__all__ = ["ServiceModel", "SimResult", "simulate"]

_MIX = np.uint64(0x9E3779B97F4A7C15)
# A run streams, so its length costs time, not memory. This many requests is refused: at a
# few million simulated requests a second (bench_sim.py) it is more than a day of computing.
MAX_REQUESTS = 3e11
# A window holds about this many requests by default: ~150 MB of per-request arrays (~160
# bytes each at the peak), and the per-window overhead (a Python loop over the shards) under
# a percent of the window's work.
WINDOW_REQUESTS = 1 << 20
# One block of the arrivals is drawn whole (a profile's arrivals: one bin, a minute): more
# than this many requests in one block is refused (~3 GB at ~160 bytes each).
MAX_BLOCK_REQUESTS = 2e7


@dataclass(frozen=True)
class ServiceModel:
    """The service being simulated: its shards, their workers and service times, the arrival
    process, and an optional LRU cache in front of each shard."""

    shards: int = 64
    partitioner: str = "kafka"
    workers: int = 1
    service: ServiceTime = field(default_factory=lambda: Exponential(0.005))
    arrivals: ArrivalProcess = field(default_factory=PoissonArrivals)
    cache_size: int = 0  # LRU entries in front of each shard (0: no cache)
    hit_seconds: float = 0.0005  # latency of a cache hit

    def __post_init__(self):
        for name in ("shards", "workers"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.cache_size < 0:
            raise InputError(f"cache_size must be >= 0, got {self.cache_size}")
        if not self.hit_seconds >= 0:
            raise InputError(f"hit time must be >= 0, got {self.hit_seconds}")

    def to_dict(self) -> dict:
        return {"shards": self.shards, "partitioner": self.partitioner, "workers": self.workers,
                "service": self.service.to_dict(), "arrivals": self.arrivals.to_dict(),
                "cache_size": self.cache_size, "hit_ms": self.hit_seconds * 1000}


@dataclass(frozen=True)
class ShardResult:
    """One shard's simulated numbers (CPU: mean utilisation over its replicas); ``latency``
    is the histogram its percentiles come from."""

    requests: int
    cpu: float
    cpu_max_replica: float
    p50_ms: float | None  # None: no request reached the shard
    p90_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    cache_hit_rate: float | None
    mean_queue: float
    max_queue: int
    latency: LatencyHistogram | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SimResult:
    """A simulated window: the latency histogram of every request (ms), per-shard results,
    and the inputs."""

    label: str
    rps: float
    duration: float
    requests: int
    latency: LatencyHistogram
    shards: tuple[ShardResult, ...]
    cache_hit_rate: float | None
    coalesced: int
    key_generator: str
    distinct_keys: int | None
    model: ServiceModel
    mitigations: Mitigations
    seed: int | None
    reads: str = ""  # how reads were chosen: by key from the profile, or a flat share
    events: tuple = ()  # the big events applied (workload.timing.HotEvent)
    key_order: str = "irm"  # locality: the keys came in production's order
    # the run's time axis (sim.series.WindowSeries): per window each shard's requests, CPU
    # and p99, and the window's latency; None when not asked for
    windows: WindowSeries | None = field(default=None, repr=False, compare=False)
    # serve's hot-key rule when the mitigations followed it (``sim.detection``), and what it
    # did: each action's ``t`` (seconds into the run), ``key``, ``shard``, ``action``, ``share``
    detection: Detection | None = None
    actions: tuple[dict, ...] = field(default=(), repr=False, compare=False)

    def percentiles(self) -> dict[str, float]:
        """p50, p90, p99, p99.9 (from the histogram: within 0.2%), the exact max and mean."""
        lat = self.latency
        if lat.count == 0:
            return {}
        qs = lat.percentile([50, 90, 99, 99.9])
        return {"p50": float(qs[0]), "p90": float(qs[1]), "p99": float(qs[2]),
                "p999": float(qs[3]), "max": lat.max, "mean": lat.mean}

    def to_observations(self) -> Observations:
        shards = tuple(
            ShardObservation(id=str(i), cpu=min(1.0, s.cpu), requests=s.requests,
                             p50_ms=s.p50_ms, p99_ms=s.p99_ms,
                             cache_hit_rate=s.cache_hit_rate, queue_depth=s.mean_queue,
                             extra={"p90_ms": s.p90_ms, "p999_ms": s.p999_ms,
                                    "max_queue": s.max_queue, "cpu_unbounded": s.cpu})
            for i, s in enumerate(self.shards))
        extra = {"simulation": {"model": self.model.to_dict(),
                                "mitigations": self.mitigations.to_dict(MODEL_FIELDS),
                                "coalesced_reads": self.coalesced, "seed": self.seed,
                                "reads": self.reads, "key_order": self.key_order,
                                "events": [{"key": e.key, "share": e.share, "start_s": e.start,
                                            "end_s": e.end} for e in self.events]}}
        if self.windows is not None:
            extra["simulation"]["saturation"] = _saturation_dict(self.windows)
        if self.detection is not None:
            extra["simulation"]["detection"] = self.detection.to_dict()
        windows = () if self.windows is None else self.windows.to_time_windows()
        return Observations(label=self.label, rate_rps=self.rps,
                            achieved_rps=self.requests / self.duration,
                            duration_s=self.duration, model="open",
                            key_generator=self.key_generator,
                            latency_ms=self.percentiles() or None, shards=shards,
                            cache_hit_rate=self.cache_hit_rate,
                            distinct_keys=self.distinct_keys, windows=windows,
                            actions=self.actions, extra=extra)


def _saturation_dict(windows: WindowSeries) -> dict:
    """The offered load against capacity (``series.saturation``) for the observations."""
    from hotshard.sim.series import saturation

    sat = saturation(windows)

    def row(x):
        return {"shard": str(x.shard), "start_s": x.start_s, "end_s": x.end_s,
                "share": x.share, "rate_rps": x.rate_rps, "load": x.load}

    return {"mean_service_s": windows.mean_service_s, "capacity_per_shard": windows.capacity,
            "service_load": sat.service.load, "whole_run": [row(x) for x in sat.whole_run],
            "in_a_window": [row(x) for x in sat.windows],
            "peak": None if sat.peak is None else row(sat.peak)}


# -- placement ------------------------------------------------------------------------------
def _hash_unit(positions: NDArray[np.int64], salt: int) -> NDArray[np.float64]:
    """A fixed uniform in [0, 1) per key position (splitmix64), the same in every run."""
    with np.errstate(over="ignore"):
        z = positions.astype(np.uint64) + np.uint64(salt) * _MIX + _MIX
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


class _Placement:
    """Key position -> shard: head keys by the real partitioner, the rest by ownership."""

    def __init__(self, partitioner, head_ids: tuple[str, ...]):
        self.partitioner = partitioner
        self.n = partitioner.n_shards
        own = np.asarray(partitioner.ownership(), dtype=np.float64)
        self.cdf = np.cumsum(own / own.sum())
        self.guide = np.minimum(np.searchsorted(self.cdf, np.arange(4096) / 4096, side="right"),
                                self.n - 1).astype(np.int64)
        self.head = _head_shards(partitioner, head_ids)

    def shards(self, positions: NDArray[np.int64]) -> NDArray[np.int64]:
        """Each position's shard (positions >= 0): ``_hash_unit`` and a search of the
        ownership CDF, in one compiled pass (numpy's took ten passes over the requests)."""
        out = np.empty(positions.size, dtype=np.int64)
        _compiled_place()(np.ascontiguousarray(positions, dtype=np.int64), self.cdf,
                          self.guide, self.head, out)
        return out

    def of_ids(self, ids: list[str]) -> NDArray[np.int64]:
        return np.asarray(self.partitioner.shard_of(ids), dtype=np.int64)


def _head_shards(partitioner, head_ids: tuple[str, ...]) -> NDArray[np.int64]:
    """The real partitioner's shard of each head key, remembered for the last few
    (partitioner, head) pairs: a calibration simulates ~1,000 short replicates of one
    service, and serialising a profile's head keys again for each was a quarter of its time.
    A partitioner holding arrays (a ring, a slot map) is not hashable: computed each time."""
    try:
        return _head_shards_cached(partitioner, head_ids)
    except TypeError:
        return _head_shards_of(partitioner, head_ids)


def _head_shards_of(partitioner, head_ids: tuple[str, ...]) -> NDArray[np.int64]:
    # shared by every run that asks, so never written to (not marked read-only: the compiled
    # placement would be compiled again for read-only arrays)
    return (partitioner.shard_of(list(head_ids)) if head_ids
            else np.zeros(0, dtype=np.int64)).astype(np.int64)


_head_shards_cached = functools.lru_cache(maxsize=8)(_head_shards_of)


@functools.cache
def _compiled_place():
    from numba import njit

    return njit(cache=True, nogil=True)(_place)


def _place(positions, cdf, guide, head, out):  # pragma: no cover - runs compiled
    """``out[i]``: head key ``positions[i]``'s shard, or the first CDF entry above the
    position's ``_hash_unit`` (salt 1), bit for bit as numpy computes it; ``guide[g]``, the
    first entry above g / guide.size, starts the search (a binary search's branches
    mispredict: 35 ns a request)."""
    n_head = head.size
    last = cdf.size - 1
    salted = np.uint64(1) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x9E3779B97F4A7C15)
    scale = 1.0 / float(1 << 53)
    for i in range(positions.size):
        p = positions[i]
        if p < n_head:
            out[i] = head[p]
            continue
        z = np.uint64(p) + salted
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        u = float(z >> np.uint64(11)) * scale
        lo = guide[int(u * guide.size)]   # side="right": the first entry above u
        while lo < last and cdf[lo] <= u:
            lo += 1
        out[i] = lo


# -- the run --------------------------------------------------------------------------------
def simulate(sampler, *, rps: float, duration: float, model: ServiceModel | None = None,
             mitigations: Mitigations | None = None, read_share: float = 0.9,
             op_mix=None, hot_events=(), rng: np.random.Generator | int | None = None,
             label: str = "simulation", key_generator: str | None = None,
             partitioner=None, key_order=None, window: float | None = None,
             interval: float | None = None, series: bool = True,
             detection: Detection | None = None, progress=None) -> SimResult:
    """Simulate ``duration`` seconds of traffic at ``rps`` requests/s through the service.

    Parameters
    ----------
    sampler : a key sampler (``hotshard.workload``): a profile sampler (head keys keep their
        real IDs and are placed exactly) or a classic one (uniform, zipf, ...).
    rps, duration : mean request rate and window length (seconds).
    model : the service (shards, workers, service times, arrivals, cache).
    mitigations : hot-key mitigations (default: none).
    read_share : share of reads when ``op_mix`` is not given.
    op_mix : ``profile_sampler.op_mix_by_key`` output (read/write given the key), optional.
    hot_events : ``workload.timing.HotEvent`` overlays (a channel taking a share of traffic).
    rng : seed or Generator: same seed, same result.
    partitioner : a built partitioner; default ``partitioner_for(model.partitioner, shards)``.
    key_order : ``(arrival times, duration, seed) -> key positions`` with a ``name``
        (``scenarios.KeyOrder``: production's locality order, or draws whose head keys follow
        their timelines), or None for independent draws. With one, ``model.cache_size``
        caches are simulated request by request on each shard's own stream
        (``cache.LRUCache``); without, by Che's approximation. One that is not ``windowed``
        (the locality order: a key's reuse may span the run) is made for the whole run at
        once, the run's arrival times with it: 16 bytes a request held for the run.
    window : simulated seconds handled at once, in whole blocks of the arrivals (at least
        one); default about ``WINDOW_REQUESTS`` requests. Only memory and speed depend on
        it: the result is the same for every window.
    interval : the width of the result's time windows (``SimResult.windows``), seconds;
        default the profile's timeline window as ``key_order`` lays it on the run
        (``key_order.interval(duration)``), else 1/20 of the run (``series.series_interval``).
    series : keep the time windows (False: ``windows`` is None, for runs whose series no
        one reads, such as a calibration's replicates).
    detection : serve's hot-key rule (``detect.policy.Detection``): the mitigations then
        apply to a key only while it is hot by that rule (a split from its first detection
        on), as the service applies them, instead of to the top keys by rank from the start;
        the result's ``actions`` say when (``sim.detection``). None: by rank.
    progress : ``progress(stage, fraction)`` after each window of blocks (the CLI's bar).

    Returns
    -------
    SimResult
    """
    model = model or ServiceModel()
    mitigations = (mitigations or Mitigations()).only(MODEL_FIELDS, "simulate")
    if not (np.isfinite(rps) and rps > 0):
        raise InputError(f"rps must be > 0, got {rps}")
    if not (np.isfinite(duration) and duration > 0):
        raise InputError(f"duration must be > 0 seconds, got {duration}")
    if not 0.0 <= read_share <= 1.0:
        raise InputError(f"read_share must be in [0, 1], got {read_share}")
    if rps * duration < 1:
        raise InputError(f"{rps:g} req/s for {duration:g} s is less than one request: raise "
                         "the rate or the duration")
    if rps * duration > MAX_REQUESTS:
        raise InputError(f"{rps:,g} req/s for {duration:,g} s is {rps * duration:.3g} "
                         f"requests, more than the {MAX_REQUESTS:.0e} the simulator takes "
                         "on: at a few million simulated requests a second that is more than "
                         "a day of computing; simulate a shorter window or a lower rate "
                         "(percentiles settle within minutes of simulated time)")
    if window is not None and not (np.isfinite(window) and window > 0):
        raise InputError(f"window must be > 0 seconds, got {window}")
    if interval is not None and not (np.isfinite(interval) and interval > 0):
        raise InputError(f"interval must be > 0 seconds, got {interval}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    seed = rng if isinstance(rng, int) else None
    if partitioner is None:
        from hotshard.shards.partitioners import partitioner_for

        integer = sampler.integer_keys
        partitioner = partitioner_for(model.partitioner, model.shards, integer_keys=integer)
    by_key = op_mix is not None and "read" in op_mix[0]
    recorder = None
    if series:
        if interval is None:
            laid = getattr(key_order, "interval", None)
            interval = series_interval(duration, laid(float(duration)) if laid else None)
        recorder = SeriesRecorder(series_interval(duration, interval), duration,
                                  model.shards, model.workers * mitigations.replicas,
                                  float(model.service.mean))
    run = _Run(sampler, float(rps), float(duration), model, mitigations, read_share,
               op_mix if by_key else None, tuple(hot_events), partitioner, key_order,
               int(gen.integers(0, 2**63 - 1)), recorder, detection)
    run.go(window, progress)
    reads = "by key, from the profile's operations" if by_key else f"{pct(read_share)} of requests"
    return SimResult(label=label, rps=float(rps), duration=float(duration),
                     requests=run.requests, latency=run.latency(), shards=run.shard_results(),
                     cache_hit_rate=run.cache_hit_rate(), coalesced=run.coalesced(),
                     key_generator=key_generator or _describe(sampler),
                     distinct_keys=int(sampler.n_keys) or None, model=model,
                     mitigations=mitigations, seed=seed, reads=reads, events=tuple(hot_events),
                     key_order="irm" if key_order is None else key_order.name,
                     windows=None if recorder is None else recorder.result(),
                     detection=detection, actions=run.actions())


_ARRIVALS, _REQUESTS, _ORDER = 1, 2, 3   # the run's independent streams (spawn keys)


def _child(root: int, *key: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(root, spawn_key=key)


class _Run:
    """One simulation: its fixed tables and its running state (queues, caches, counts).

    Every request of block b is drawn from the block's own seed in one fixed order
    (``_draw``), so the draws do not depend on how the blocks are grouped into windows, and
    the queues' and caches' state carries from one window to the next exactly: the result
    is the same whatever the window."""

    def __init__(self, sampler, rps, duration, model, mitigations, read_share, op_mix,
                 events, partitioner, key_order, root, series=None, detection=None):
        from hotshard.sim.arrivals import arrival_blocks
        from hotshard.sim.cache import LRUCache
        from hotshard.sim.queues import ShardQueue

        self.sampler, self.rps, self.duration = sampler, rps, duration
        self.model, self.mit = model, mitigations
        self.read_share, self.op_mix = read_share, op_mix
        self.events, self.key_order, self.root = events, key_order, root
        self.series = series   # the time windows' recorder, or None
        self.head_ids = tuple(sampler.head_ids)
        self.place = _Placement(partitioner, self.head_ids)
        self.blocks = arrival_blocks(model.arrivals, rps, duration,
                                     int(_child(root, _ARRIVALS).generate_state(1)[0]))
        most = self.blocks.seconds * rps
        if most > MAX_BLOCK_REQUESTS:
            raise InputError(f"these arrivals are drawn {self.blocks.seconds:g} s at a time: "
                             f"{most:.3g} requests at {rps:,g} req/s, more than the "
                             f"{MAX_BLOCK_REQUESTS:.0e} the simulator holds at once (~160 "
                             "bytes each); lower the rate")
        self.event_targets = [self._event_target(i, e) for i, e in enumerate(events)]
        self.sub_shards = self._sub_shards()
        self.detected_split = None   # (followed keys, S) sub-partitions' shards, or None
        self.replay = self._replay(detection)
        self.hot = min(mitigations.hot_keys, len(self.head_ids))
        self.che = (_che_table(sampler, self.place, model, rps)
                    if model.cache_size > 0 and key_order is None else None)
        shards = model.shards
        self.queues = [[ShardQueue(duration, model.workers) for _ in range(mitigations.replicas)]
                       for _ in range(shards)]
        self.lru = ([LRUCache(model.cache_size) for _ in range(shards)]
                    if model.cache_size > 0 and key_order is not None else None)
        self.hist = [LatencyHistogram.empty() for _ in range(shards)]
        self.by_shard = np.zeros(shards, dtype=np.int64)
        self.reads_reaching = np.zeros(shards, dtype=np.int64)   # reads past the local cache
        self.cache_hits = np.zeros(shards, dtype=np.int64)
        self.requests = 0

    # -- fixed tables -----------------------------------------------------------------------
    def _event_target(self, index: int, event) -> tuple[int, int]:
        """(key position, shard) of a big event's channel: a head key's own, or a channel
        outside the head as a key of its own, placed by the store."""
        if event.key in self.head_ids:
            position = self.head_ids.index(event.key)
            return position, int(self.place.head[position])
        try:
            return -(index + 1), int(self.place.of_ids([event.key])[0])
        except InputError:   # a channel name among integer keys: the store places it as text
            from hotshard.shards.partitioners import partitioner_for

            text = partitioner_for(self.model.partitioner, self.model.shards,
                                   integer_keys=False)
            return -(index + 1), int(text.shard_of([event.key])[0])

    def _sub_shards(self) -> NDArray[np.int64] | None:
        """The shards of the top K keys' S sub-partitions, (K, S), or None (no split)."""
        m = self.mit
        k = min(m.split_keys, len(self.head_ids)) if m.split_into > 1 else 0
        if k == 0:
            return None
        from hotshard.shards.split import split_shards

        return split_shards(self.place.partitioner, self.head_ids[:k], m.split_into).shards

    def _replay(self, detection):
        """serve's hot-key rule over this run (``sim.detection``), with the followed keys'
        sub-partitions when detected keys are split; or None."""
        if detection is None:
            return None
        from hotshard.sim.detection import CANDIDATES, HotKeyReplay

        ids, names, shards = [], [], []
        for i, (event, (position, shard)) in enumerate(zip(self.events, self.event_targets,
                                                            strict=True)):
            if position < 0 or position >= CANDIDATES:
                ids.append(position if position >= 0 else -(i + 1))
                names.append(event.key)
                shards.append(shard)
        for position in range(min(CANDIDATES, len(self.head_ids))):
            ids.append(position)
            names.append(self.head_ids[position])
            shards.append(int(self.place.head[position]))
        replay = HotKeyReplay(detection, ids, names, shards)
        if self.mit.split_into > 1 and names:   # the followed keys' sub-partitions
            from hotshard.shards.split import split_shards

            self.detected_split = split_shards(self.place.partitioner, tuple(replay.names),
                                               self.mit.split_into).shards
        return replay

    def actions(self) -> tuple[dict, ...]:
        """What the replayed rule did (``sim.detection``), in time order."""
        if self.replay is None:
            return ()
        self.replay.finish(self.duration)
        return tuple(self.replay.actions)

    # -- the run ----------------------------------------------------------------------------
    def go(self, window: float | None, progress=None) -> None:
        """Every window of blocks, drawn then served, in order; ``progress(stage, fraction)``
        after each."""
        seconds = self.blocks.seconds
        per = WINDOW_REQUESTS / (self.rps * seconds) if window is None else window / seconds
        per = max(1, int(per))
        times = iter(self.blocks)
        positions = None
        if self.key_order is not None and not getattr(self.key_order, "windowed", False):
            if progress is not None:   # seconds before the first window: say what they are
                progress("ordering the keys over the whole run", None)
            kept = list(times)   # an order over the whole run needs all its instants
            whole = np.concatenate(kept)
            seed = int(_child(self.root, _ORDER).generate_state(1)[0] & 0x7FFFFFFF)
            positions = np.asarray(self.key_order(whole, self.duration, seed), dtype=np.int64)
            del whole
            times = iter(kept)
        b = done = 0
        exhausted = False
        while not exhausted:
            parts = []
            for _ in range(per):
                arrival = next(times, None)
                if arrival is None:
                    exhausted = True
                    break
                mine = None if positions is None else positions[done:done + arrival.size]
                if arrival.size:
                    parts.append(self._draw(b, arrival, mine))
                b += 1
                done += arrival.size
            if parts:
                self._serve(_concat(parts))
            if progress is not None:
                progress("simulating", min(b / max(self.blocks.count, 1), 1.0))

    def _draw(self, b: int, arrival: NDArray[np.float64], positions) -> dict:
        """Block ``b``'s requests: every draw from the block's own generator, in one order."""
        g = np.random.default_rng(_child(self.root, _REQUESTS, b))
        n = arrival.size
        mit = self.mit
        if positions is None and self.key_order is not None:   # windowed: the block's keys
            positions = self.key_order(arrival, self.duration, int(g.integers(0, 2**31 - 1)))
        elif positions is None:
            positions = self.sampler.sample(n, g)
        positions = np.asarray(positions, dtype=np.int64)
        is_read = _reads(positions, n, self.read_share, self.op_mix, g)
        shard = self.place.shards(positions)
        key_id = positions
        if self.events:
            shard, key_id = _apply_events(self.events, self.event_targets, arrival, shard,
                                          key_id, g)
        targeted = None   # the requests whose key is hot now (None: by rank)
        if self.replay is not None:
            until = min((b + 1) * self.blocks.seconds, self.duration)
            targeted, split = self.replay.mark(arrival, key_id, max(until, float(arrival[-1])))
            if self.detected_split is not None and split.any():
                # their ids follow those of the top keys split by rank (``_split``), if any
                offset = 0 if self.sub_shards is None else self.sub_shards.shape[0]
                shard, key_id = _split_detected(self.replay.columns(key_id), split,
                                                self.detected_split, offset, shard, key_id, g)
        if self.sub_shards is not None:
            shard, key_id = _split(self.sub_shards, shard, key_id, g)
        local = None   # served by the gateway's local cache (none without one)
        if mit.cache_hit > 0:
            hot = targeted if targeted is not None else (key_id >= 0) & (key_id < self.hot)
            local = is_read & hot & (g.random(n) < mit.cache_hit)
        che = None
        if self.che is not None:
            table, sizes = self.che
            hit_p = table[shard, _class_index(self.sampler, positions, sizes)]
            che = is_read & (g.random(n) < hit_p)
            if local is not None:
                che &= ~local
        service = self.model.service.sample(n, g)
        replica = None
        if mit.replicas > 1:   # by rank every read is spread; detected, a hot key's reads
            spread = is_read if targeted is None else is_read & targeted
            replica = np.where(spread, g.integers(0, mit.replicas, n), 0)
        merge = None if targeted is None or not mit.coalesce else is_read & targeted
        return {"arrival": arrival, "shard": shard, "key_id": key_id, "is_read": is_read,
                "local": local, "che": che, "service": service, "replica": replica,
                "merge": merge}

    def _serve(self, w: dict) -> None:
        """One window: the shards' caches, then their queues, then the counts. The window's
        requests are put in shard order once (time order kept within a shard), so each
        shard's are one contiguous slice."""
        model, mit = self.model, self.mit
        shard = w["shard"]
        n = shard.size
        shards = model.shards
        self.requests += n
        order = np.argsort(shard.astype(np.int16 if shards < 2**15 else np.int64),
                           kind="stable")   # a radix sort
        counts = np.bincount(shard, minlength=shards)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        self.by_shard += counts
        # reads that reach the shard, counted before reordering (counts need no order)
        reaching = w["is_read"] if w["local"] is None else w["is_read"] & ~w["local"]
        self.reads_reaching += np.bincount(shard[reaching], minlength=shards)
        arrival, service = w["arrival"][order], w["service"][order]
        # the per-request columns below are reordered only when something reads them
        per_key = mit.coalesce or self.lru is not None
        key_id = w["key_id"][order] if per_key else None
        replica = None if w["replica"] is None else w["replica"][order]
        is_read = w["is_read"][order] if per_key or replica is not None else None
        merge = is_read if w["merge"] is None else w["merge"][order]
        local = None if w["local"] is None else w["local"][order]
        hits = None if w["che"] is None else w["che"][order]
        if self.lru is not None:   # every request that reaches the cache references its key
            hits = np.zeros(n, dtype=bool)
            for s in range(shards):
                lo, hi = bounds[s], bounds[s + 1]
                rows = lo + (np.arange(hi - lo) if local is None
                             else np.flatnonzero(~local[lo:hi]))
                if rows.size:
                    hits[rows] = self.lru[s].hits(key_id[rows])
            hits &= is_read
        quick = local if hits is None else (hits if local is None else local | hits)
        everyone = quick is None or not quick.any()
        latency = np.empty(n)
        if not everyone:
            latency[quick] = model.hit_seconds * 1000.0
        if hits is not None:
            self.cache_hits += np.bincount(np.repeat(np.arange(shards), counts)[hits],
                                           minlength=shards)
        for s in range(shards):
            lo, hi = int(bounds[s]), int(bounds[s + 1])
            if lo == hi:
                continue
            mine = slice(lo, hi) if everyone else lo + np.flatnonzero(~quick[lo:hi])
            for r, queue in enumerate(self.queues[s]):
                # a replica serves its reads and every write of the shard (writes go
                # everywhere); the first answers the writes
                take = mine
                if replica is not None:
                    rows = np.arange(lo, hi) if everyone else mine
                    take = rows[(replica[rows] == r) | ~is_read[rows]]
                    if take.size == 0:
                        continue
                kwargs = {}
                if mit.coalesce:
                    kwargs = {"keys": key_id[take], "coalesce": merge[take]}
                done = queue.serve(arrival[take], service[take], **kwargs)
                if self.series is not None:   # its work, window by window
                    self.series.work(s, done.arrival, done.start, done.finish,
                                     done.coalesced)
                sojourn = (done.finish - done.arrival) * 1000.0
                if replica is None:
                    latency[take] = sojourn
                else:
                    answers = (replica[take] == r) & is_read[take] | (~is_read[take] & (r == 0))
                    latency[take[answers]] = sojourn[answers]
        buckets = bucket_of(latency)   # once for the shards' histograms and the series
        for s in range(shards):
            lo, hi = int(bounds[s]), int(bounds[s + 1])
            if lo < hi:
                self.hist[s].record(latency[lo:hi], buckets=buckets[lo:hi])
        if self.series is not None:
            self.series.record(arrival, latency, counts, buckets)

    # -- results ----------------------------------------------------------------------------
    def latency(self) -> LatencyHistogram:
        total = LatencyHistogram.empty()
        for h in self.hist:
            total.merge(h)
        return total.frozen()

    def coalesced(self) -> int:
        return int(sum(q.coalesced for queues in self.queues for q in queues))

    def cache_hit_rate(self) -> float | None:
        if self.model.cache_size == 0:
            return None
        return float(self.cache_hits.sum()) / max(int(self.reads_reaching.sum()), 1)

    def shard_results(self) -> tuple[ShardResult, ...]:
        out = []
        replicas = self.mit.replicas
        for s, queues in enumerate(self.queues):
            cpu = [q.utilisation() for q in queues]
            stats = [q.queue_length_stats() for q in queues]
            h = self.hist[s]
            p50, p90, p99, p999 = ([float(v) for v in h.percentile([50, 90, 99, 99.9])]
                                   if h.count else (None, None, None, None))
            hit_rate = (float(self.cache_hits[s]) / max(int(self.reads_reaching[s]), 1)
                        if self.model.cache_size > 0 else None)
            out.append(ShardResult(
                requests=int(self.by_shard[s]), cpu=float(np.mean(cpu)),
                cpu_max_replica=float(np.max(cpu)), p50_ms=p50, p90_ms=p90, p99_ms=p99,
                p999_ms=p999, cache_hit_rate=hit_rate,
                mean_queue=float(sum(st.mean_in_system for st in stats)) / replicas,
                max_queue=int(max(st.max_in_system for st in stats)), latency=h.frozen()))
        return tuple(out)


def _concat(parts: list[dict]) -> dict:
    """One window's requests from its blocks'."""
    if len(parts) == 1:
        return parts[0]
    return {k: (None if parts[0][k] is None else np.concatenate([p[k] for p in parts]))
            for k in parts[0]}


def _describe(sampler) -> str:
    return str(sampler.describe().get("distribution", "keys"))


def _reads(positions, n, read_share, op_mix, gen) -> NDArray[np.bool_]:
    """Which requests are reads: given the key (``op_mix``) or at the flat ``read_share``."""
    u = gen.random(n)
    if op_mix is None:
        return u < read_share
    names, head_cum, tail_cum = op_mix
    j = list(names).index("read")
    head = head_cum.shape[0]
    # each head key's [lo, hi) band of the read operation, then the tail's at index ``head``
    lo = np.append(head_cum[:, j - 1] if j else np.zeros(head), tail_cum[j - 1] if j else 0.0)
    hi = np.append(head_cum[:, j], tail_cum[j])
    row = np.minimum(positions, head)
    return (u >= lo[row]) & (u < hi[row])


def _apply_events(events, targets, arrival, shard, key_id, gen):
    """Big events: during its window, each takes its share of all requests for its channel
    (simultaneous events take disjoint slices of one uniform, as ``generate`` does)."""
    u = gen.random(arrival.size)
    taken = np.zeros(arrival.size)
    shard, key_id = shard.copy(), key_id.copy()
    for event, (position, target) in zip(events, targets, strict=True):
        hit, taken = event.apply(arrival, u, taken)
        shard[hit] = target
        key_id[hit] = position
    return shard, key_id


def _split(sub_shards, shard, key_id, gen):
    """Top K keys spread over S time-bucket sub-partitions, each placed as a key of its own."""
    k, s_count = sub_shards.shape
    mine = (key_id >= 0) & (key_id < k)  # the key a request is for, an event's included
    bucket = gen.integers(0, s_count, int(mine.sum()))
    shard = shard.copy()
    target = key_id[mine]
    shard[mine] = sub_shards[target, bucket]
    key_id = key_id.copy()
    key_id[mine] = -(1000 + target * s_count + bucket)
    return shard, key_id


def _split_detected(col, split, sub_shards, offset, shard, key_id, gen):
    """Requests for keys the replayed rule has found hot (``split``; ``col`` the followed
    key's row of ``sub_shards``), spread over their S sub-partitions, each placed as a key of
    its own, as the service splits the channels it targets."""
    mine = split & (col >= 0)
    s_count = sub_shards.shape[1]
    bucket = gen.integers(0, s_count, int(mine.sum()))
    shard, key_id = shard.copy(), key_id.copy()
    shard[mine] = sub_shards[col[mine], bucket]
    key_id[mine] = -(1000 + (offset + col[mine]) * s_count + bucket)
    return shard, key_id


def _che_table(sampler, place, model, rps) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(hit probability by shard and class, the classes' sizes): each shard's LRU cache by
    Che's approximation, solved once for the run.

    Every shard solves its own cache: head keys with their exact rates, tail classes with their
    keys spread over shards by ownership (each class contributes ownership x its keys).
    """
    from hotshard.sim.cache import che_hit_rates

    weights, sizes = _class_table(sampler)
    probs = weights * sizes / np.sum(weights * sizes)
    per_key_rate = rps * probs / np.maximum(sizes, 1)
    head = place.head.size
    own = np.diff(np.concatenate([[0.0], place.cdf]))
    table = np.zeros((model.shards, sizes.size))
    for s in range(model.shards):
        on = np.zeros(sizes.size)
        on[:head] = place.head == s
        on[head:] = sizes[head:] * own[s]
        table[s] = che_hit_rates(per_key_rate, on, model.cache_size).hit_prob
    return table, sizes


def _class_table(sampler) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(per-key weight, keys) per class: a sampler with classes (a profile's, or uniform keys:
    one class) gives them; another lists every key's weight (``KeySampler``)."""
    classes = sampler.classes
    if classes is not None:
        return (np.asarray(classes.key_weight, dtype=np.float64),
                np.asarray(classes.sizes, dtype=np.float64))
    weights = np.asarray(sampler.weights(), dtype=np.float64)
    return weights, np.ones(weights.size)


def _class_index(sampler, positions, sizes) -> NDArray[np.int64]:
    classes = sampler.classes
    if classes is None and sizes.size == 1:
        return np.zeros(positions.size, dtype=np.int64)
    if classes is None:
        return positions
    ends = np.cumsum(np.asarray(classes.sizes, dtype=np.int64))
    return np.searchsorted(ends, positions, side="right").astype(np.int64)
