"""PageCache: TTL expiry on an injected clock, LRU eviction, counters and input checks."""

from __future__ import annotations

import pytest

from hotshard.errors import InputError
from hotshard.service.cache import PageCache


class FakeClock:
    """Settable monotonic seconds."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_hit_within_ttl(clock):
    cache = PageCache(ttl_s=1.0, clock=clock)
    cache.put(("general", 50), ["m1", "m2"])
    clock.now += 0.999
    assert cache.get(("general", 50)) == ["m1", "m2"]
    assert (cache.hits, cache.misses, cache.size) == (1, 0, 1)


def test_miss_on_unknown_key(clock):
    cache = PageCache(clock=clock)
    assert cache.get("nope") is None
    assert (cache.hits, cache.misses) == (0, 1)


def test_expired_entry_is_a_miss_and_dropped(clock):
    cache = PageCache(ttl_s=1.0, clock=clock)
    cache.put("k", "page")
    clock.now += 1.0  # age == ttl: no longer served
    assert cache.get("k") is None
    assert cache.size == 0
    assert (cache.hits, cache.misses) == (0, 1)


def test_put_refreshes_the_age(clock):
    cache = PageCache(ttl_s=1.0, clock=clock)
    cache.put("k", "old")
    clock.now += 0.8
    cache.put("k", "new")
    clock.now += 0.8
    assert cache.get("k") == "new"


def test_lru_eviction_keeps_recently_used(clock):
    cache = PageCache(ttl_s=10.0, max_entries=2, clock=clock)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recently used
    cache.put("c", 3)  # evicts b
    assert cache.size == 2
    assert cache.get("b") is None
    assert cache.get("a") == 1
    assert cache.get("c") == 3


def test_put_drops_expired_pages_at_the_lru_end(clock):
    cache = PageCache(ttl_s=1.0, clock=clock)
    cache.put("a", 1)
    cache.put("b", 2)
    clock.now += 2.0
    cache.put("c", 3)
    assert cache.size == 1


def test_shorter_ttl_applies_to_pages_already_cached(clock):
    cache = PageCache(ttl_s=5.0, clock=clock)
    cache.put("k", "page")
    clock.now += 0.5
    cache.configure(ttl_s=0.25)
    assert cache.ttl_s == 0.25
    assert cache.get("k") is None


def test_configure_smaller_bound_evicts_at_once(clock):
    cache = PageCache(ttl_s=10.0, max_entries=5, clock=clock)
    for i in range(5):
        cache.put(i, i)
    cache.configure(max_entries=2)
    assert cache.size == 2
    assert cache.get(3) == 3 and cache.get(4) == 4


def test_clear_keeps_counters(clock):
    cache = PageCache(clock=clock)
    cache.put("k", 1)
    cache.get("k")
    cache.clear()
    assert cache.size == 0
    assert cache.get("k") is None
    assert (cache.hits, cache.misses) == (1, 1)


def test_stats_to_dict(clock):
    cache = PageCache(ttl_s=2.0, max_entries=3, clock=clock)
    assert cache.stats().hit_rate is None
    cache.put("k", 1)
    cache.get("k")
    cache.get("x")
    cache.get("k")
    assert cache.stats().to_dict() == {"hits": 2, "misses": 1, "size": 1, "ttl_s": 2.0,
                                       "max_entries": 3, "hit_rate": 2 / 3}


@pytest.mark.parametrize("ttl_s", [0, -1.0, float("nan"), float("inf"), "1", True])
def test_bad_ttl_refused_naming_it(ttl_s):
    with pytest.raises(InputError, match="ttl_s"):
        PageCache(ttl_s=ttl_s)
    with pytest.raises(InputError, match="ttl_s"):
        PageCache().configure(ttl_s=ttl_s)


@pytest.mark.parametrize("max_entries", [0, -3, 1.5, True])
def test_bad_max_entries_refused_naming_it(max_entries):
    with pytest.raises(InputError, match="max_entries"):
        PageCache(max_entries=max_entries)


def test_failed_configure_changes_nothing(clock):
    cache = PageCache(ttl_s=1.0, max_entries=4, clock=clock)
    with pytest.raises(InputError):
        cache.configure(ttl_s=2.0, max_entries=0)
    assert (cache.ttl_s, cache.max_entries) == (1.0, 4)


def test_none_value_refused(clock):
    with pytest.raises(InputError, match="value"):
        PageCache(clock=clock).put("k", None)
