"""The hot-key mitigations of the reference service, and which channels they apply to.

Each is off by default and can be switched at start (``hotshard serve`` flags) or at run time
(``POST /admin/mitigations``). They apply to a given list of channels, or (``channels: "hot"``)
to the channels the hot-key sketch currently reports above ``hot_share`` of recent requests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from hotshard.errors import InputError
from hotshard.service.router import check_channel

__all__ = ["DEFAULT_BUCKET_MS", "DEFAULT_CACHE_TTL_S", "DEFAULT_HOT_SHARE", "Mitigations"]

DEFAULT_BUCKET_MS = 1000
DEFAULT_CACHE_TTL_S = 1.0
# A channel is hot when its guaranteed share of the last window's requests is at least this:
# 5% is several times a fair share on any service of 4+ shards, and far above sketch noise.
DEFAULT_HOT_SHARE = 0.05
MAX_REPLICAS = 8
MAX_BUCKETS = 64


@dataclass(frozen=True)
class Mitigations:
    """What is switched on.

    Attributes
    ----------
    split : time-bucket sub-partitions per hot channel (0: off; else 2..64).
    split_bucket_ms : slot length of a split channel's buckets, in ms.
    replicas : read replicas per shard serving hot channels' reads (0: off).
    cache_ttl_s : gateway page cache for hot channels' reads, TTL in seconds (0: off).
    coalesce : merge identical in-flight reads of hot channels into one backend call.
    channels : the channels they apply to; None means the hot ones from the sketch.
    hot_share : with ``channels`` None, the guaranteed share of recent requests that makes a
        channel hot.
    """

    split: int = 0
    split_bucket_ms: int = DEFAULT_BUCKET_MS
    replicas: int = 0
    cache_ttl_s: float = 0.0
    coalesce: bool = False
    channels: tuple[str, ...] | None = None
    hot_share: float = DEFAULT_HOT_SHARE

    def __post_init__(self) -> None:
        if not (self.split == 0 or 2 <= self.split <= MAX_BUCKETS):
            raise InputError(f"split must be 0 (off) or 2..{MAX_BUCKETS}, got {self.split}")
        if self.split_bucket_ms < 1:
            raise InputError(f"split_bucket_ms must be >= 1, got {self.split_bucket_ms}")
        if not 0 <= self.replicas <= MAX_REPLICAS:
            raise InputError(f"replicas must be 0..{MAX_REPLICAS}, got {self.replicas}")
        if not 0 <= self.cache_ttl_s <= 3600:
            raise InputError(f"cache_ttl_s must be 0 (off) to 3600, got {self.cache_ttl_s}")
        if not 0 < self.hot_share <= 1:
            raise InputError(f"hot_share must be in (0, 1], got {self.hot_share}")
        if self.channels is not None:
            for channel in self.channels:
                check_channel(channel)

    @property
    def any(self) -> bool:
        return bool(self.split or self.replicas or self.cache_ttl_s or self.coalesce)

    def updated(self, changes: dict[str, Any]) -> Mitigations:
        """These mitigations with ``changes`` applied (the body of POST /admin/mitigations).

        Unknown fields and wrong types are refused with the field named, so a typo never
        silently leaves a mitigation off.
        """
        if not isinstance(changes, dict):
            raise InputError("mitigations must be a JSON object")
        fields = {"split": int, "split_bucket_ms": int, "replicas": int,
                  "cache_ttl_s": (int, float), "coalesce": bool, "channels": (list, str),
                  "hot_share": (int, float)}
        unknown = sorted(set(changes) - set(fields))
        if unknown:
            raise InputError(f"unknown mitigation field(s) {', '.join(unknown)}; known: "
                             f"{', '.join(fields)}")
        clean: dict[str, Any] = {}
        for name, value in changes.items():
            kinds = fields[name]
            if isinstance(value, bool) and kinds is not bool:
                raise InputError(f"{name} must be a number, got {value!r}")
            if kinds is int and isinstance(value, float) and value.is_integer():
                value = int(value)  # JSON does not tell 3 from 3.0
            if not isinstance(value, kinds):
                raise InputError(f"{name} has the wrong type: {value!r}")
            if name == "channels":
                if isinstance(value, str):
                    if value != "hot":
                        raise InputError('channels must be "hot" or a list of channel ids, '
                                         f"got {value!r}")
                    value = None
                else:
                    value = tuple(value)
            clean[name] = value
        return replace(self, **clean)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["channels"] = "hot" if self.channels is None else list(self.channels)
        return out
