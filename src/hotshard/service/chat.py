"""The request path of the chat-history service: place, call the shard, apply mitigations.

Everything HTTP-free lives here, so the gateway is a thin FastAPI shell and tests can drive the
service logic directly. Per-shard counters are kept where the calls are made: the gateway sees
each shard's requests, latency (queueing included), in-flight depth and the hop's own cost.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hotshard.detect.policy import (
    DEFAULT_HOT_WINDOW_S,
    HOT_REFRESH_S,
    MAX_HOT_WINDOW_S,
    MIN_HOT_WINDOW_REQUESTS,
    check_hot_window,
)
from hotshard.detect.sketch import SlidingHotKeys
from hotshard.errors import InputError
from hotshard.mitigations import Mitigations
from hotshard.service.cache import PageCache
from hotshard.service.coalesce import Coalescer
from hotshard.service.mitigations import for_service
from hotshard.service.router import Router, check_channel
from hotshard.service.split import SplitPlan, SplitRegistry
from hotshard.service.stats import BucketHistogram, LatencyHistogram, WindowedLatency
from hotshard.service.store import (
    DEFAULT_MAX_BODY_BYTES,
    MAX_ID,
    MAX_LIMIT,
    check_idempotency_key,
    check_message,
    system_clock_ms,
)
from hotshard.service.supervisor import (
    ShardError,
    ShardTimeout,
    ShardUnavailable,
    Supervisor,
)

__all__ = ["DEFAULT_HOT_WINDOW_S", "DEFAULT_SHARD_TIMEOUT_S", "HOT_REFRESH_S",
           "MAX_HOT_WINDOW_S", "MIN_HOT_WINDOW_REQUESTS", "ChatService", "PostResult",
           "ReadResult", "ShardCounters", "check_hot_window"]

# Mitigation actions kept for /stats (the newest; /metrics counts them all)
MAX_ACTIONS = 1000
# Keyed writes whose shard the gateway remembers, so a retry reaches its first try's shard
# (a split channel's bucket follows the time): ~100 bytes each
MAX_KEYED_WRITES = 100_000
# How long the gateway waits for a shard's answer before it answers 504 itself: well above any
# healthy call (milliseconds, or a few seconds of queue on a saturated shard), below the 30 s a
# load driver waits by default, so a frozen or hopelessly backed-up shard shows as its own
# failures instead of client timeouts nobody can attribute.
DEFAULT_SHARD_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class PostResult:
    id: int
    shard: int


@dataclass(frozen=True)
class ReadResult:
    messages: tuple[dict[str, Any], ...]
    shards: tuple[int, ...]          # the shards the page came from
    source: str = "shard"            # shard | cache | coalesced


@dataclass
class ShardCounters:
    """What the gateway counts for one shard."""

    requests: int = 0
    reads: int = 0
    writes: int = 0
    errors: int = 0
    unavailable: int = 0
    timeouts: int = 0
    cache_hits: int = 0
    coalesced: int = 0
    latency: WindowedLatency = field(default_factory=WindowedLatency)
    hop: LatencyHistogram = field(default_factory=LatencyHistogram)
    since_start: BucketHistogram = field(default_factory=BucketHistogram)  # /metrics' histogram


class ChatService:
    """Post and read messages over a supervisor's shards, with the configured mitigations.

    Parameters
    ----------
    supervisor : the running shard workers.
    router : key -> shard placement (the same as ``hotshard shard``).
    splits : the data directory's split registry.
    mitigations : what is on at start.
    clock_ms : wall clock in Unix ms (message times, time buckets); injected for tests.
    hotkeys : the sketch behind ``/hotkeys`` and ``channels: "hot"``.
    shard_timeout_s : the longest wait for a shard's answer; past it the call raises
        ``ShardTimeout`` (the gateway's 504).

    Every failure of a shard call raises with the shard it concerned (``exc.shard``).
    """

    def __init__(self, supervisor: Supervisor, router: Router, splits: SplitRegistry, *,
                 mitigations: Mitigations | None = None,
                 clock_ms: Callable[[], int] = system_clock_ms,
                 hotkeys: SlidingHotKeys | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 shard_timeout_s: float = DEFAULT_SHARD_TIMEOUT_S) -> None:
        if not (isinstance(shard_timeout_s, int | float) and 0 < shard_timeout_s < 1e6):
            raise InputError(f"shard_timeout_s must be > 0 seconds, got {shard_timeout_s!r}")
        self.shard_timeout_s = float(shard_timeout_s)
        self.max_body_bytes = max_body_bytes
        self.supervisor = supervisor
        self.router = router
        self.splits = splits
        self.mitigations = for_service(mitigations or Mitigations())
        self._clock_ms = clock_ms
        self._last_ms = 0
        self.hotkeys = hotkeys or SlidingHotKeys()
        self.cache = PageCache(ttl_s=self.mitigations.cache_ttl_s or 1.0)
        self.coalescer = Coalescer()
        self.counters = [ShardCounters() for _ in range(router.shards)]
        self._hot: dict[str, float] = {}     # the hot channels, with their share then
        self._hot_at = -1.0
        # what the mitigations did and when (``actions``; ``action_counts`` by kind, all)
        self.actions: deque[dict[str, Any]] = deque(maxlen=MAX_ACTIONS)
        # idempotency key -> (shard, stored key, time) of its first try, the newest kept
        self._keyed_writes: OrderedDict[str, tuple[int, str, int]] = OrderedDict()
        self.action_counts: Counter[str] = Counter()

    # -- mitigations ----------------------------------------------------------------------------

    async def set_mitigations(self, mitigations: Mitigations) -> None:
        """Switch mitigations at run time (replica workers are started or stopped here)."""
        mitigations = for_service(mitigations)
        if mitigations.replicas != self.supervisor.replicas:
            await self.supervisor.set_replicas(mitigations.replicas)
        if mitigations.cache_ttl_s:
            self.cache.configure(ttl_s=mitigations.cache_ttl_s)
        if mitigations.cache_ttl_s != self.mitigations.cache_ttl_s:
            self.cache.clear()
        self.mitigations = mitigations
        self._hot_at = -1.0
        if not (mitigations.active and mitigations.channels is None):
            self._rehot({}, {})   # no longer chosen by heat: every hot channel is lifted

    def targeted(self, channel: str) -> bool:
        """Whether the mitigations apply to ``channel`` (listed, or hot right now)."""
        m = self.mitigations
        if not m.active:
            return False
        if m.channels is not None:
            return channel in m.channels
        self.refresh_hot()
        return channel in self._hot

    def refresh_hot(self) -> None:
        """Read the hot channels from the sketch again when the last reading is older than
        ``HOT_REFRESH_S`` (a request calls it, and so do /stats, /metrics and /hotkeys, so a
        channel whose traffic stopped is lifted when it is, not at the next request)."""
        m = self.mitigations
        if not m.active or m.channels is not None:
            return
        now = time.monotonic()
        if now - self._hot_at > HOT_REFRESH_S:
            shares = self.hotkeys.shares(min_total=MIN_HOT_WINDOW_REQUESTS)
            self._rehot({k: v for k, v in shares.items() if v >= m.hot_share}, shares)
            self._hot_at = now

    def hot_channels(self) -> tuple[str, ...]:
        """The channels the mitigations target for their heat now."""
        self.refresh_hot()
        return tuple(self._hot)

    def _rehot(self, hot: dict[str, float], shares: dict[str, float]) -> None:
        """The hot channels are now ``hot`` (channel: share): log each that became hot (the
        read mitigations apply to it from now) and each lifted (its share, ``shares``, fell
        below ``hot_share``, or the mitigations stopped choosing by heat)."""
        m = self.mitigations
        applies = [name for name, on in (("replicas", m.replicas > 1),
                                          ("cache", m.cache_ttl_s > 0),
                                          ("coalesce", m.coalesce)) if on]
        for channel in [c for c in self._hot if c not in hot]:
            self._log("lifted", channel, shares.get(channel, 0.0))
        for channel, share in hot.items():
            if channel not in self._hot:
                self._log("hot", channel, share, applies=applies)
        self._hot = hot

    def _log(self, action: str, channel: str, share: float, **extra: Any) -> None:
        """One mitigation action: when (Unix seconds), on which channel and shard, why."""
        self.actions.append({"at": round(self._clock_ms() / 1000.0, 3), "key": channel,
                             "shard": self.router.shard_of(channel), "action": action,
                             "share": round(float(share), 4), **extra})
        self.action_counts[action] += 1

    def _now_ms(self) -> int:
        """Wall-clock ms, never going backwards (time buckets and ids rely on order)."""
        self._last_ms = max(self._last_ms, int(self._clock_ms()))
        return self._last_ms

    # -- calls -------------------------------------------------------------------------------

    async def _call(self, shard: int, op: str, args: dict[str, Any], *,
                    use_replicas: bool | None = None) -> Any:
        """``op`` on ``shard``: its primary (``use_replicas`` None, for writes) or its reader.
        Counted, timed, bounded by ``shard_timeout_s``; a failure names the shard."""
        counters = self.counters[shard]
        counters.requests += 1
        if op == "history":
            counters.reads += 1
        else:
            counters.writes += 1
        started = time.perf_counter()
        try:
            client = self.supervisor.primary(shard) if use_replicas is None else \
                self.supervisor.reader(shard, use_replicas=use_replicas)
            async with asyncio.timeout(self.shard_timeout_s):
                result, service_s = await client.call(op, args, timeout=self.shard_timeout_s)
        except TimeoutError:  # ours, or the client's own ShardTimeout
            counters.timeouts += 1
            raise ShardTimeout(f"shard {shard} did not answer within "
                               f"{self.shard_timeout_s:g} s", shard=shard) from None
        except ShardUnavailable as e:
            counters.unavailable += 1
            if e.shard is None:  # a backend that does not know its shard numbers
                raise ShardUnavailable(str(e), retry_after=e.retry_after, shard=shard,
                                       outcome_unknown=e.outcome_unknown) from e
            raise
        except ConnectionError:
            counters.unavailable += 1
            raise
        except ShardError as e:
            counters.errors += 1
            if e.shard is None:
                raise ShardError(str(e), shard=shard) from e
            raise
        except Exception:
            counters.errors += 1
            raise
        elapsed = time.perf_counter() - started
        counters.latency.record(elapsed)
        counters.since_start.record(elapsed)
        counters.hop.record(max(0.0, elapsed - service_s))
        return result

    # -- writes ------------------------------------------------------------------------------

    async def post(self, channel: str, user: str, body: str, *,
                   idempotency_key: str | None = None) -> PostResult:
        """Store one message; returns once its shard has committed it.

        ``idempotency_key`` (the client's, for a write it may retry): the shard stores the
        message once per key and answers a retry with the first id; a retry this gateway
        sees goes to the shard (and time bucket, for a split channel) of the first try.
        A failure after the write was handed to its shard raises with ``outcome_unknown``.
        """
        check_channel(channel)
        check_message(user, body, max_body_bytes=self.max_body_bytes)
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key)
            placed = self._keyed_writes.get(idempotency_key)
            if placed is not None:   # a retry: where the first try went
                self._keyed_writes.move_to_end(idempotency_key)
                shard, key, ts = placed
                message_id = await self._call(shard, "append", {
                    "channel": key, "user": user, "body": body, "now_ms": ts,
                    "idempotency_key": idempotency_key})
                return PostResult(int(message_id), shard)
        self.hotkeys.add(channel)
        ts = self._now_ms()
        plan = self.splits.get(channel)
        if plan is None and self.mitigations.splits and self.targeted(channel):
            plan = self.splits.add(channel, self.mitigations.split_into,
                                   self.mitigations.split_bucket_ms, since_ms=ts)
            self._log("split", channel, self._hot.get(channel, 1.0),
                      into=self.mitigations.split_into,
                      bucket_ms=self.mitigations.split_bucket_ms)
        if plan is not None and ts >= plan.since_ms:
            bucket = plan.bucket_of(ts)
            shard, key = plan.shards[bucket], plan.keys[bucket]
        else:
            shard, key = self.router.shard_of(channel), channel
        args = {"channel": key, "user": user, "body": body, "now_ms": ts}
        if idempotency_key is not None:
            args["idempotency_key"] = idempotency_key
            self._keyed_writes[idempotency_key] = (shard, key, ts)
            while len(self._keyed_writes) > MAX_KEYED_WRITES:
                self._keyed_writes.popitem(last=False)
        message_id = await self._call(shard, "append", args)
        return PostResult(int(message_id), shard)

    # -- reads -------------------------------------------------------------------------------

    async def read(self, channel: str, *, limit: int = 50, before: int | None = None
                   ) -> ReadResult:
        """A page of ``channel``'s history, newest first, through the mitigations."""
        check_channel(channel)
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InputError(f"limit must be in 1..{MAX_LIMIT}, got {limit!r}")
        if before is not None and (not isinstance(before, int) or not 1 <= before <= MAX_ID):
            raise InputError(f"before must be a message id in 1..{MAX_ID}, got {before!r}")
        self.hotkeys.add(channel)
        hot = self.targeted(channel)
        m = self.mitigations
        key = (channel, limit, before)
        if hot and m.cache_ttl_s:
            cached = self.cache.get(key)
            if cached is not None:
                for shard in cached.shards:
                    self.counters[shard].cache_hits += 1
                return ReadResult(cached.messages, cached.shards, "cache")

        async def fetch() -> ReadResult:
            return await self._fetch(channel, limit, before, use_replicas=hot and m.replicas > 1)

        if hot and m.coalesce:
            result, shared = await self.coalescer.run(key, fetch)
            if shared:
                for shard in result.shards:
                    self.counters[shard].coalesced += 1
                result = ReadResult(result.messages, result.shards, "coalesced")
        else:
            result = await fetch()
        if hot and m.cache_ttl_s and result.source == "shard":
            self.cache.put(key, result)
        return result

    async def _history(self, shard: int, key: str, limit: int, before: int | None,
                       use_replicas: bool) -> list[list[Any]]:
        return await self._call(shard, "history",
                                {"channel": key, "limit": limit, "before": before},
                                use_replicas=use_replicas)

    async def _fetch(self, channel: str, limit: int, before: int | None, *,
                     use_replicas: bool) -> ReadResult:
        plan = self.splits.get(channel)
        if plan is None:
            shard = self.router.shard_of(channel)
            rows = await self._history(shard, channel, limit, before, use_replicas)
            return ReadResult(_messages(channel, rows), (shard,))
        return await self._fetch_split(plan, limit, before, use_replicas)

    async def _fetch_split(self, plan: SplitPlan, limit: int, before: int | None,
                           use_replicas: bool) -> ReadResult:
        """Newest first across buckets: the current slot's bucket alone when it holds the
        whole page, else every bucket and the home shard, merged by id (ids are unique
        across shards, so paging by ``before`` stays exact)."""
        bucket, covers_from = plan.newest_location(before, self._now_ms())
        shard = plan.shards[bucket]
        rows = await self._history(shard, plan.keys[bucket], limit, before, use_replicas)
        if len(rows) == limit and rows[-1][3] >= covers_from:
            return ReadResult(_messages(plan.channel, rows), (shard,))
        places = sorted({(plan.keys[b], plan.shards[b]) for b in range(plan.buckets)}
                        | {(plan.channel, plan.home)}, key=lambda p: p[1])
        pages = await asyncio.gather(*(self._history(s, k, limit, before, use_replicas)
                                       for k, s in places))
        merged = sorted((row for page in pages for row in page), key=lambda r: -r[0])[:limit]
        return ReadResult(_messages(plan.channel, merged),
                          tuple(sorted({s for _, s in places})))


def _messages(channel: str, rows: list[list[Any]]) -> tuple[dict[str, Any], ...]:
    return tuple({"id": r[0], "channel": channel, "user": r[1], "body": r[2], "ts_ms": r[3]}
                 for r in rows)
