"""Redis 7's eviction policies (``maxmemory-policy``): the ``lfu`` ones keep the per-key access
counters ``redis-cli --hotkeys`` reads. A module of its own so the CLI can offer the choices
without importing the cluster's client."""

from __future__ import annotations

__all__ = ["MAXMEMORY_POLICIES"]

MAXMEMORY_POLICIES = ("noeviction", "allkeys-lru", "allkeys-lfu", "volatile-lru",
                      "volatile-lfu", "allkeys-random", "volatile-random", "volatile-ttl")
