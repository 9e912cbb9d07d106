"""The sharded service, simulated: requests -> keys -> shards -> caches -> FIFO queues.

One run draws every request of the window (arrival time from an arrival process, key from a
sampler, read or write), places each key on a shard as the store does, lets the caches and the
mitigations take what they take, and serves what is left through each shard's FIFO queue in
virtual time (``hotshard.sim.queues``). The result is the same ``hotshard.observations/1`` that
the driver and the reference service write, labelled "simulation", so ``diagnose`` reads all
three alike.

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

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from hotshard._format import pct
from hotshard.errors import InputError
from hotshard.mitigations import MODEL_FIELDS, Mitigations
from hotshard.observations import Observations, ShardObservation
from hotshard.sim.arrivals import ArrivalProcess, PoissonArrivals
from hotshard.sim.service_times import Exponential, ServiceTime

__all__ = ["ServiceModel", "SimResult", "simulate"]

_MIX = np.uint64(0x9E3779B97F4A7C15)
# Every request is held in memory: measured 75 (64 shards) to 160 (1 shard) bytes each over
# the arrays of a run, so 4e7 requests stay under ~6.5 GB on a 24 GB machine.
MAX_REQUESTS = 4e7


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
    """One shard's simulated numbers (CPU: mean utilisation over its replicas)."""

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


@dataclass(frozen=True)
class SimResult:
    """A simulated window: latency of every request (ms), per-shard results, and the inputs."""

    label: str
    rps: float
    duration: float
    requests: int
    latency_ms: NDArray[np.float64]
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

    def percentiles(self) -> dict[str, float]:
        lat = self.latency_ms
        if lat.size == 0:
            return {}
        qs = np.percentile(lat, [50, 90, 99, 99.9])
        return {"p50": float(qs[0]), "p90": float(qs[1]), "p99": float(qs[2]),
                "p999": float(qs[3]), "max": float(lat.max()), "mean": float(lat.mean())}

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
        return Observations(label=self.label, rate_rps=self.rps,
                            achieved_rps=self.requests / self.duration,
                            duration_s=self.duration, model="open",
                            key_generator=self.key_generator,
                            latency_ms=self.percentiles() or None, shards=shards,
                            cache_hit_rate=self.cache_hit_rate,
                            distinct_keys=self.distinct_keys, extra=extra)


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
        self.head = (partitioner.shard_of(list(head_ids)) if head_ids
                     else np.zeros(0, dtype=np.int64)).astype(np.int64)

    def shards(self, positions: NDArray[np.int64]) -> NDArray[np.int64]:
        out = np.searchsorted(self.cdf, _hash_unit(positions, 1), side="right")
        out = np.minimum(out, self.n - 1).astype(np.int64)
        in_head = positions < self.head.size
        out[in_head] = self.head[positions[in_head]]
        return out

    def of_ids(self, ids: list[str]) -> NDArray[np.int64]:
        return np.asarray(self.partitioner.shard_of(ids), dtype=np.int64)


# -- the run --------------------------------------------------------------------------------
def simulate(sampler, *, rps: float, duration: float, model: ServiceModel | None = None,
             mitigations: Mitigations | None = None, read_share: float = 0.9,
             op_mix=None, hot_events=(), rng: np.random.Generator | int | None = None,
             label: str = "simulation", key_generator: str | None = None,
             partitioner=None, key_order=None) -> SimResult:
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
        (``cache.lru_hits``); without, by Che's approximation.

    Returns
    -------
    SimResult
    """
    from hotshard.sim.queues import serve

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
        raise InputError(f"{rps:,g} req/s for {duration:,g} s is {rps * duration:.3g} requests; "
                         f"the simulator holds every request in memory (up to ~160 bytes each), at "
                         f"most {MAX_REQUESTS:.0e}: simulate a shorter window (percentiles "
                         "settle within minutes of simulated time)")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    seed = rng if isinstance(rng, int) else None
    if partitioner is None:
        from hotshard.shards.partitioners import partitioner_for

        integer = getattr(sampler, "key_type", "int64") == "int64"
        partitioner = partitioner_for(model.partitioner, model.shards, integer_keys=integer)
    head_ids = tuple(getattr(sampler, "head_ids", ()))
    place = _Placement(partitioner, head_ids)

    arrival = np.asarray(model.arrivals.times(rps, duration, gen), dtype=np.float64)
    n = arrival.size
    if key_order is not None:
        positions = np.asarray(key_order(arrival, duration, int(gen.integers(0, 2**31 - 1))),
                               dtype=np.int64)
    else:
        positions = np.asarray(sampler.sample(n, gen), dtype=np.int64)
    by_key = op_mix is not None and "read" in op_mix[0]
    is_read = _reads(positions, n, read_share, op_mix if by_key else None, gen)
    reads = "by key, from the profile's operations" if by_key else f"{pct(read_share)} of requests"
    shard = place.shards(positions)
    key_id = positions.copy()
    if hot_events:
        shard, key_id = _apply_events(hot_events, arrival, shard, key_id, head_ids, place, gen)
    shard, key_id = _split(mitigations, shard, key_id, head_ids, place, gen)
    latency = np.full(n, np.nan)
    served_by_shard = np.ones(n, dtype=bool)
    hot = (key_id >= 0) & (key_id < min(mitigations.hot_keys, len(head_ids)))
    local = np.zeros(n, dtype=bool)
    if mitigations.cache_hit > 0:
        local = is_read & hot & (gen.random(n) < mitigations.cache_hit)
        latency[local] = model.hit_seconds * 1000.0
        served_by_shard &= ~local
    cache_hits = np.zeros(n, dtype=bool)
    if model.cache_size > 0 and key_order is not None:
        cache_hits = served_by_shard & is_read & _shard_lru_hits(
            shard, key_id, served_by_shard, model)
        latency[cache_hits] = model.hit_seconds * 1000.0
        served_by_shard &= ~cache_hits
    elif model.cache_size > 0:
        hit_p = _shard_cache_hits(sampler, positions, shard, place, model, rps)
        cache_hits = served_by_shard & is_read & (gen.random(n) < hit_p)
        latency[cache_hits] = model.hit_seconds * 1000.0
        served_by_shard &= ~cache_hits
    service = model.service.sample(n, gen)
    replica = np.where(is_read, gen.integers(0, mitigations.replicas, n), 0)

    results, coalesced = [], 0
    order = np.argsort(shard, kind="stable")
    bounds = np.searchsorted(shard[order], np.arange(model.shards + 1))
    for s in range(model.shards):
        rows = order[bounds[s]:bounds[s + 1]]
        mine = rows[served_by_shard[rows]]
        cpu = []
        queue_mean, queue_max = 0.0, 0
        for r in range(mitigations.replicas):
            # a replica serves its reads and every write of the shard (writes go everywhere)
            take = mine[(replica[mine] == r) | ~is_read[mine]]
            if take.size == 0:
                cpu.append(0.0)
                continue
            kwargs = {}
            if mitigations.coalesce:
                kwargs = {"keys": key_id[take], "coalesce": is_read[take]}
            done = serve(arrival[take], service[take], model.workers, **kwargs)
            cpu.append(done.utilisation(duration))
            stats = done.queue_length_stats(duration)
            queue_mean += stats.mean_in_system / mitigations.replicas
            queue_max = max(queue_max, stats.max_in_system)
            coalesced += int(done.coalesced.sum())
            answers = (replica[take] == r) & is_read[take] | (~is_read[take] & (r == 0))
            latency[take[answers]] = done.sojourn()[answers] * 1000.0
        lat = latency[rows]
        reads_here = int((is_read[rows] & ~local[rows]).sum())  # reads that reached the cache
        hit_rate = (float(cache_hits[rows].sum()) / max(reads_here, 1)
                    if model.cache_size > 0 else None)
        p50, p90, p99, p999 = ([float(v) for v in np.percentile(lat, [50, 90, 99, 99.9])]
                               if lat.size else (None, None, None, None))
        results.append(ShardResult(requests=int(rows.size), cpu=float(np.mean(cpu)),
                                   cpu_max_replica=float(np.max(cpu)), p50_ms=p50,
                                   p90_ms=p90, p99_ms=p99, p999_ms=p999,
                                   cache_hit_rate=hit_rate,
                                   mean_queue=queue_mean, max_queue=int(queue_max)))
    overall_hit = (float(cache_hits.sum()) / max(int((is_read & ~local).sum()), 1)
                   if model.cache_size > 0 else None)
    return SimResult(label=label, rps=float(rps), duration=float(duration), requests=int(n),
                     latency_ms=latency, shards=tuple(results), cache_hit_rate=overall_hit,
                     coalesced=coalesced, key_generator=key_generator or _describe(sampler),
                     distinct_keys=int(getattr(sampler, "n_keys", 0)) or None, model=model,
                     mitigations=mitigations, seed=seed, reads=reads, events=tuple(hot_events),
                     key_order="irm" if key_order is None else key_order.name)


def _describe(sampler) -> str:
    describe = getattr(sampler, "describe", None)
    return str(describe().get("distribution", "keys")) if describe else type(sampler).__name__


def _reads(positions, n, read_share, op_mix, gen) -> NDArray[np.bool_]:
    """Which requests are reads: given the key (``op_mix``) or at the flat ``read_share``."""
    u = gen.random(n)
    if op_mix is None:
        return u < read_share
    names, head_cum, tail_cum = op_mix
    j = list(names).index("read")
    lo_h = head_cum[:, j - 1] if j else np.zeros(head_cum.shape[0])
    lo_t = tail_cum[j - 1] if j else 0.0
    in_head = positions < head_cum.shape[0]
    lo = np.full(n, lo_t)
    hi = np.full(n, tail_cum[j])
    lo[in_head] = lo_h[positions[in_head]]
    hi[in_head] = head_cum[positions[in_head], j]
    return (u >= lo) & (u < hi)


def _apply_events(events, arrival, shard, key_id, head_ids, place, gen):
    """Big events: during its window, each takes its share of all requests for its channel
    (simultaneous events take disjoint slices of one uniform, as ``generate`` does)."""
    u = gen.random(arrival.size)
    taken = np.zeros(arrival.size)
    shard, key_id = shard.copy(), key_id.copy()
    for index, event in enumerate(events):
        hit, taken = event.apply(arrival, u, taken)
        if event.key in head_ids:
            position = head_ids.index(event.key)
            target = int(place.head[position])
        else:  # a channel outside the head: its own key, placed by the store
            position = -(index + 1)
            target = int(place.of_ids([event.key])[0])
        shard[hit] = target
        key_id[hit] = position
    return shard, key_id


def _split(mitigations, shard, key_id, head_ids, place, gen):
    """Top K keys spread over S time-bucket sub-partitions, each placed as a key of its own."""
    k = min(mitigations.split_keys, len(head_ids)) if mitigations.split_into > 1 else 0
    if k == 0:
        return shard, key_id
    s_count = mitigations.split_into
    sub_ids = [f"{head_ids[i]}#{b}" for i in range(k) for b in range(s_count)]
    from hotshard.shards.predict import sub_key_shards

    sub_shards = sub_key_shards(place.partitioner, sub_ids).reshape(k, s_count)
    mine = (key_id >= 0) & (key_id < k)  # the key a request is for, an event's included
    bucket = gen.integers(0, s_count, int(mine.sum()))
    shard = shard.copy()
    target = key_id[mine]
    shard[mine] = sub_shards[target, bucket]
    key_id = key_id.copy()
    key_id[mine] = -(1000 + target * s_count + bucket)
    return shard, key_id


def _shard_cache_hits(sampler, positions, shard, place, model, rps) -> NDArray[np.float64]:
    """Each request's hit probability in its shard's LRU cache, by Che's approximation.

    Every shard solves its own cache: head keys with their exact rates, tail classes with their
    keys spread over shards by ownership (each class contributes ownership x its keys).
    """
    from hotshard.sim.cache import che_hit_rates

    weights, sizes = _class_table(sampler)
    probs = weights * sizes / np.sum(weights * sizes)
    per_key_rate = rps * probs / np.maximum(sizes, 1)
    head = place.head.size
    own = np.diff(np.concatenate([[0.0], place.cdf]))
    class_of = _class_index(sampler, positions, sizes)
    hit = np.zeros(positions.size)
    for s in range(model.shards):
        on = np.zeros(sizes.size)
        on[:head] = place.head == s
        on[head:] = sizes[head:] * own[s]
        cache = che_hit_rates(per_key_rate, on, model.cache_size)
        mine = shard == s
        hit[mine] = cache.hit_prob[class_of[mine]]
    return hit


def _shard_lru_hits(shard, key_id, reaches, model) -> NDArray[np.bool_]:
    """Each request's hit in its shard's LRU of ``model.cache_size`` entries, simulated on
    the shard's own stream (every request that reaches the cache references its key: a
    write refreshes it, as a write-through cache of recent history does)."""
    from hotshard.sim.cache import lru_hits

    hits = np.zeros(shard.size, dtype=bool)
    rows = np.flatnonzero(reaches)
    order = rows[np.argsort(shard[rows], kind="stable")]
    bounds = np.searchsorted(shard[order], np.arange(model.shards + 1))
    for s in range(model.shards):
        mine = order[bounds[s]:bounds[s + 1]]
        if mine.size:
            hits[mine] = lru_hits(key_id[mine], model.cache_size)
    return hits


def _class_table(sampler) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(per-key weight, keys) per class: profile samplers have classes; classic ones are
    uniform (one class) or list every key's weight."""
    classes = getattr(sampler, "classes", None)
    if classes is not None:
        return (np.asarray(classes.key_weight, dtype=np.float64),
                np.asarray(classes.sizes, dtype=np.float64))
    if type(sampler).__name__ == "UniformSampler":
        return np.ones(1), np.array([float(sampler.n_keys)])
    weights = np.asarray(sampler.weights(), dtype=np.float64)
    return weights, np.ones(weights.size)


def _class_index(sampler, positions, sizes) -> NDArray[np.int64]:
    classes = getattr(sampler, "classes", None)
    if classes is None and sizes.size == 1:
        return np.zeros(positions.size, dtype=np.int64)
    if classes is None:
        return positions
    ends = np.cumsum(np.asarray(classes.sizes, dtype=np.int64))
    return np.searchsorted(ends, positions, side="right").astype(np.int64)
