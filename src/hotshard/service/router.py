"""Which shard holds a partition key: the real partitioner of a real store, as `hotshard shard`.

The service places a channel exactly where ``hotshard shard CHANNEL -p P -n N`` says, with the
same key-type rule (``hotshard.shards.resolve_key_type``): a channel id that is a decimal 64-bit
integer is an 8-byte integer to stores that type keys, anything else is text. So a prediction
made before the test and the ``X-Shard`` header seen during it always agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from hotshard.errors import InputError
from hotshard.shards import (
    LAYOUT_OPTION,
    PARTITIONERS,
    TEXT_KEYED,
    keys_look_integer,
    resolve_key_type,
)

__all__ = ["CHANNEL_PATTERN", "DEFAULT_PARTITIONER", "Router", "check_channel"]

DEFAULT_PARTITIONER = "kafka"
# Channels are URL path segments: letters, digits and . _ : - (no '#', which names a
# time-bucket sub-partition, no '/', no spaces); at most 128 characters.
CHANNEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$"
_CHANNEL = re.compile(CHANNEL_PATTERN)
_CACHE_LIMIT = 1 << 20


def check_channel(channel: object) -> str:
    """``channel`` if it is a valid channel id, else InputError saying the rule."""
    if not isinstance(channel, str) or not _CHANNEL.match(channel):
        raise InputError(f"channel must be 1-128 characters of letters, digits and . _ : - "
                         f"starting with a letter or digit, got {str(channel)[:140]!r}")
    return channel


class Router:
    """Key -> shard for one store's partitioner and shard count.

    Parameters
    ----------
    partitioner : a name from ``hotshard.shards.PARTITIONERS``.
    shards : the shard count (or None when a layout file gives it).
    key_type : "text" or "bigint" to type every key so; None: the rule.
    layout : layout options of ``make_partitioner`` (``slots_map``, ``ring_file``,
        ``num_tokens``...).
    """

    def __init__(self, partitioner: str = DEFAULT_PARTITIONER, shards: int | None = None, *,
                 key_type: str | None = None, **layout: Any) -> None:
        from hotshard.shards.partitioners import make_partitioner

        if partitioner not in PARTITIONERS:
            raise InputError(f"partitioner must be one of {', '.join(PARTITIONERS)}, "
                             f"got {partitioner!r}")
        if key_type not in (None, "text", "bigint"):
            raise InputError(f"key_type must be text or bigint, got {key_type!r}")
        self.name = partitioner
        self.requested_key_type = key_type
        self.layout = {k: v for k, v in layout.items() if v is not None}
        if "slot_node" in self.layout:  # a live Redis Cluster map: not a file to show
            self.live_map = True
        self._by_type = {
            kind: make_partitioner(partitioner, shards, key_type=kind, **self.layout)
            for kind in ("text", "bigint")}
        self.shards = int(self._by_type["text"].n_shards)
        self._cache: dict[str, int] = {}

    def key_type(self, key: str) -> str:
        """How the store types ``key``: bigint or text (the one rule)."""
        return resolve_key_type(self.name, self.requested_key_type,
                                integer_keys=keys_look_integer([key]))

    def partitioner(self, key_type: str):
        """The store's partitioner typing every key as ``key_type`` ("text" or "bigint")."""
        return self._by_type[key_type]

    def shard_of(self, key: str) -> int:
        """The shard of one key (cached: the partitioners are vectorised, calls are not)."""
        shard = self._cache.get(key)
        if shard is None:
            kind = self.key_type(key)
            shard = int(self._by_type[kind].shard_of([key])[0])
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = shard
        return shard

    def shards_of(self, keys: Sequence[str]) -> np.ndarray:
        """The shard of each key, vectorised (bulk load): each distinct key once (a bulk
        load's rows repeat their hot channels), integer-looking keys and text keys each
        through their partitioner in one call."""
        first: dict[str, int] = {}
        where = np.fromiter((first.setdefault(str(k), len(first)) for k in keys),
                            dtype=np.int64, count=len(keys))
        distinct = list(first)
        out = np.empty(len(distinct), dtype=np.int64)
        is_int = np.fromiter((keys_look_integer([k]) for k in distinct), dtype=bool,
                             count=len(distinct))
        for flag in (True, False):
            index = np.flatnonzero(is_int == flag)
            if index.size:
                kind = resolve_key_type(self.name, self.requested_key_type, integer_keys=flag)
                out[index] = self._by_type[kind].shard_of([distinct[i] for i in index])
        return out[where]

    def placement(self) -> dict[str, Any]:
        """How channels are placed, for a client that places them itself: ``partitioner``,
        ``shard_count``, ``key_type`` ("text", "bigint", or "auto": the key-type rule, a
        decimal 64-bit integer channel id typed bigint, anything else text) and ``layout``
        (the layout options, so ``Router(partitioner, shard_count, key_type=None if auto,
        **layout)`` places every channel as this one does; ``live_slot_map``: True when the
        placement is a live Redis Cluster's slot map, which ``layout`` cannot carry)."""
        key_type = "text" if self.name in TEXT_KEYED else self.requested_key_type or "auto"
        layout = {k: v if isinstance(v, int | float | bool) else str(v)
                  for k, v in self.layout.items() if k != "slot_node"}
        return {"partitioner": self.name, "shard_count": self.shards, "key_type": key_type,
                "layout": layout, "live_slot_map": "slot_node" in self.layout}

    def describe(self) -> dict[str, Any]:
        """The placement, as /stats and the data directory's layout record show it."""
        if getattr(self, "live_map", False):
            return {"partitioner": self.name, "shards": self.shards, "layout": "live slot map"}
        files = {LAYOUT_OPTION[self.name]: self.layout[LAYOUT_OPTION[self.name]]} \
            if self.name in LAYOUT_OPTION and LAYOUT_OPTION[self.name] in self.layout else {}
        return {"partitioner": self.name, "shards": self.shards, **files}
