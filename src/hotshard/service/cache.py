"""The gateway's cache of recent-history pages: a short TTL in front of the shards.

A hot channel's history is read far more often than it changes, so the gateway can answer most
of those reads from memory and spare the shard that owns the channel. The price is staleness: a
cached page can be up to ``ttl_s`` old, so a message appended just after the page was cached is
missing from reads for up to ``ttl_s`` seconds. That is the trade the mitigation makes, and why
the TTL is short and settable at runtime (``configure``): an experiment can turn it up, down, or
compare with and without.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass
from typing import Any

from hotshard.errors import InputError

__all__ = ["CacheStats", "PageCache"]


@dataclass(frozen=True)
class CacheStats:
    """The cache's counters at one moment, as /stats shows them.

    ``hit_rate`` is ``hits / (hits + misses)``, or None before the first lookup.
    """

    hits: int
    misses: int
    size: int
    ttl_s: float
    max_entries: int
    hit_rate: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_ttl(ttl_s: float) -> float:
    """``ttl_s`` as a float, refused unless finite and > 0."""
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float):
        raise InputError(f"ttl_s must be a number of seconds, got {ttl_s!r}")
    if not math.isfinite(ttl_s) or ttl_s <= 0:
        raise InputError(f"ttl_s must be > 0 seconds, got {ttl_s}")
    return float(ttl_s)


def _check_max_entries(max_entries: int) -> int:
    """``max_entries`` as an int, refused unless an integer >= 1."""
    if isinstance(max_entries, bool) or not isinstance(max_entries, int):
        raise InputError(f"max_entries must be an integer, got {max_entries!r}")
    if max_entries < 1:
        raise InputError(f"max_entries must be >= 1, got {max_entries}")
    return max_entries


class PageCache:
    """A bounded LRU cache whose entries expire ``ttl_s`` seconds after they were stored.

    Parameters
    ----------
    ttl_s : float
        How long a stored page may be served, in seconds (> 0). A cached page can be up to
        ``ttl_s`` stale: that is the price of the mitigation.
    max_entries : int
        Most pages kept (>= 1); beyond it the least recently used page is evicted, so memory
        stays bounded however many distinct channels are read.
    clock : callable
        Monotonic seconds; injected so tests control time instead of sleeping.

    Raises
    ------
    InputError
        If ``ttl_s`` is not > 0 or ``max_entries`` is not an integer >= 1.

    Notes
    -----
    Entries remember when they were stored, not when they expire, so ``configure(ttl_s=...)``
    applies at once to pages already cached: shortening the TTL immediately bounds staleness by
    the new value. Expired pages are dropped when a lookup finds them (and opportunistically
    from the LRU end on ``put``); until then they count in ``size`` and are evicted like any
    other. ``None`` cannot be cached, since ``get`` returns it for a miss.

    Not thread-safe: the gateway uses it from its one event loop.
    """

    def __init__(self, ttl_s: float = 1.0, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s = _check_ttl(ttl_s)
        self._max_entries = _check_max_entries(max_entries)
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._hits = 0
        self._misses = 0

    @property
    def ttl_s(self) -> float:
        """Seconds a stored page may be served."""
        return self._ttl_s

    @property
    def max_entries(self) -> int:
        """Most pages kept before the least recently used is evicted."""
        return self._max_entries

    @property
    def hits(self) -> int:
        """Lookups answered from the cache."""
        return self._hits

    @property
    def misses(self) -> int:
        """Lookups that found nothing, or only an expired page."""
        return self._misses

    @property
    def size(self) -> int:
        """Pages held now (including expired ones no lookup has found yet)."""
        return len(self._entries)

    def configure(self, *, ttl_s: float | None = None, max_entries: int | None = None) -> None:
        """Change the TTL and/or the bound while serving; the counters are kept.

        A shorter TTL applies to pages already cached; a smaller bound evicts the least
        recently used pages at once.

        Raises
        ------
        InputError
            If a given value breaks the rule the constructor checks.
        """
        ttl = self._ttl_s if ttl_s is None else _check_ttl(ttl_s)
        bound = self._max_entries if max_entries is None else _check_max_entries(max_entries)
        self._ttl_s, self._max_entries = ttl, bound
        self._evict_beyond_bound()

    def get(self, key: Hashable) -> Any | None:
        """The page stored under ``key`` if younger than ``ttl_s``, else None (a miss).

        A hit makes the page the most recently used; an expired page is dropped.
        """
        entry = self._entries.get(key)
        if entry is None:
            self._misses += 1
            return None
        stored_at, value = entry
        if self._clock() - stored_at >= self._ttl_s:
            del self._entries[key]
            self._misses += 1
            return None
        self._entries.move_to_end(key)
        self._hits += 1
        return value

    def put(self, key: Hashable, value: Any) -> None:
        """Store ``value`` under ``key`` as of now, replacing any older page for it.

        Raises
        ------
        InputError
            If ``value`` is None (it would read back as a miss).
        """
        if value is None:
            raise InputError("value must not be None: get returns None for a miss")
        now = self._clock()
        self._entries[key] = (now, value)
        self._entries.move_to_end(key)
        self._drop_expired_lru(now)
        self._evict_beyond_bound()

    def clear(self) -> None:
        """Drop every page (the counters are kept: they describe the run, not the contents)."""
        self._entries.clear()

    def stats(self) -> CacheStats:
        """The counters and settings now."""
        lookups = self._hits + self._misses
        return CacheStats(hits=self._hits, misses=self._misses, size=len(self._entries),
                          ttl_s=self._ttl_s, max_entries=self._max_entries,
                          hit_rate=self._hits / lookups if lookups else None)

    def _drop_expired_lru(self, now: float) -> None:
        """Pop expired pages from the least recently used end (amortised O(1) per put)."""
        while self._entries:
            stored_at, _ = next(iter(self._entries.values()))
            if now - stored_at < self._ttl_s:
                return
            self._entries.popitem(last=False)

    def _evict_beyond_bound(self) -> None:
        """Evict least recently used pages until at most ``max_entries`` remain."""
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
