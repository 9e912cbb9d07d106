"""Hot-key mitigations: one type, one meaning per field, in every command.

``predict`` and ``simulate`` take them as what-ifs, ``serve`` switches them on in the reference
service, ``diagnose`` proposes them and ``report`` reads them back from a run's record, so a
number means the same thing wherever it is written:

``split_keys``, ``split_into``
    The top K keys (by requests) each split into S time-bucket sub-partitions, placed as keys
    of their own; S = 1 is no split. The service splits the channels it targets (below) rather
    than a top K, over buckets of ``split_bucket_ms``.
``replicas``
    Read nodes per shard in total, the primary included, as a replication factor counts them:
    1 is no replica; R spreads a shard's reads over R nodes while its writes go to all R.
``cache_hit``
    The fraction of the top ``hot_keys`` keys' reads that a client-side cache serves: an
    assumption of predict and simulate. The reference service has a real cache instead, its
    gateway's page cache for ``cache_ttl_s`` seconds (0: off).
``coalesce``
    On or off: a read that arrives while an identical read is in flight waits for it instead of
    reaching the shard again. How many reads merge is an outcome, never a setting: simulate and
    serve measure it, predict counts the merges that must happen (see ``shards.predict``).
``channels``, ``hot_share``
    Which channels the service's mitigations apply to: a list, or (None) the channels its
    hot-key sketch reports above ``hot_share`` of recent requests. The models target by rank
    instead (``split_keys``, ``hot_keys``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from numbers import Integral
from typing import Any

from hotshard._format import pct
from hotshard.errors import InputError

__all__ = ["DEFAULT_BUCKET_MS", "DEFAULT_HOT_SHARE", "MAX_CACHE_TTL_S", "MAX_SERVICE_REPLICAS",
           "MAX_SPLIT_BUCKETS", "MODEL_FIELDS", "Mitigations"]

DEFAULT_BUCKET_MS = 1000
# A channel is hot when its guaranteed share of the last window's requests is at least this:
# 5% is several times a fair share on any service of 4+ shards, and far above sketch noise.
DEFAULT_HOT_SHARE = 0.05
# a cache entry older than an hour is not a mitigation but a stale copy
MAX_CACHE_TTL_S = 3600.0
# the reference service's limits (``service.mitigations.for_service`` refuses past them; serve's
# flags and the admin route's schema state them): read nodes per shard, the primary and up to
# 8 read-only replica workers; time-bucket sub-partitions of one split channel
MAX_SERVICE_REPLICAS = 9
MAX_SPLIT_BUCKETS = 64

# the fields predict and simulate model (the others are the live service's)
MODEL_FIELDS = ("split_keys", "split_into", "replicas", "cache_hit", "coalesce", "hot_keys")

# field -> the JSON types ``updated`` accepts for it
_JSON_TYPES: dict[str, Any] = {
    "split_keys": int, "split_into": int, "split_bucket_ms": int, "replicas": int,
    "cache_hit": (int, float), "cache_ttl_s": (int, float), "coalesce": bool,
    "hot_keys": int, "channels": (list, str), "hot_share": (int, float)}


@dataclass(frozen=True)
class Mitigations:
    """What is switched on; every field off by default (module notes give each one meaning).

    Raises
    ------
    InputError
        A value outside its range, named with the rule it breaks.
    """

    split_keys: int = 0
    split_into: int = 1
    split_bucket_ms: int = DEFAULT_BUCKET_MS
    replicas: int = 1
    cache_hit: float = 0.0
    cache_ttl_s: float = 0.0
    coalesce: bool = False
    hot_keys: int = 10
    channels: tuple[str, ...] | None = None
    hot_share: float = DEFAULT_HOT_SHARE

    def __post_init__(self) -> None:
        for name in ("split_keys", "split_into", "split_bucket_ms", "replicas", "hot_keys"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Integral):
                raise InputError(f"{name} must be a whole number, got {value!r}")
            object.__setattr__(self, name, int(value))
        if self.split_keys < 0:
            raise InputError(f"split_keys must be >= 0, got {self.split_keys}")
        if self.split_into < 1:
            raise InputError(f"split_into must be >= 1 (1: no split), got {self.split_into}")
        if self.split_bucket_ms < 1:
            raise InputError(f"split_bucket_ms must be >= 1, got {self.split_bucket_ms}")
        if self.replicas < 1:
            raise InputError(f"replicas counts a shard's read nodes, the primary included, so "
                             f"it must be >= 1 (1: no replica), got {self.replicas}")
        if not 0.0 <= self.cache_hit <= 1.0:
            raise InputError(f"cache_hit must be a fraction in [0, 1], got {self.cache_hit}")
        if not 0.0 <= self.cache_ttl_s <= MAX_CACHE_TTL_S:
            raise InputError(f"cache_ttl_s must be 0 (off) to {MAX_CACHE_TTL_S:g} seconds, got "
                             f"{self.cache_ttl_s}")
        if not isinstance(self.coalesce, bool):
            raise InputError(f"coalesce is on or off (True or False), got {self.coalesce!r}: "
                             "how many reads merge is an outcome, not a setting")
        if self.hot_keys < 1:
            raise InputError(f"hot_keys must be >= 1, got {self.hot_keys}")
        if not 0.0 < self.hot_share <= 1.0:
            raise InputError(f"hot_share must be in (0, 1], got {self.hot_share}")
        if self.channels is not None:
            channels = tuple(self.channels)
            if not all(isinstance(c, str) for c in channels):
                raise InputError(f"channels must be channel ids (text), got {channels!r}")
            object.__setattr__(self, "channels", channels)

    @property
    def splits(self) -> bool:
        """Whether keys are split: the top ``split_keys`` in a model, the targeted channels in
        the service."""
        return self.split_into > 1

    @property
    def active(self) -> bool:
        """Whether any mitigation is switched on."""
        return self.splits or self.replicas > 1 or self.cache_hit > 0 \
            or self.cache_ttl_s > 0 or self.coalesce

    def only(self, names: tuple[str, ...], where: str) -> Mitigations:
        """These mitigations, once checked that every field set is one of ``names``: a
        consumer refuses what it would otherwise silently leave off.

        Raises
        ------
        InputError
            A field outside ``names`` differs from its default.
        """
        default = Mitigations()
        extra = [f.name for f in fields(self)
                 if f.name not in names and getattr(self, f.name) != getattr(default, f.name)]
        if extra:
            raise InputError(f"{', '.join(extra)} do{'es' * (len(extra) == 1)} not apply to "
                             f"{where}; it takes {', '.join(names)}")
        return self

    def updated(self, changes: dict[str, Any], *, names: tuple[str, ...] | None = None
                ) -> Mitigations:
        """These mitigations with ``changes`` applied (a JSON object, e.g. the body of the
        service's ``POST /admin/mitigations``); ``names`` limits the fields it may set.

        Unknown fields and wrong types are refused with the field named, so a typo never
        silently leaves a mitigation off. ``channels`` is a list of ids or ``"hot"`` (None).
        """
        if not isinstance(changes, dict):
            raise InputError("mitigations must be a JSON object")
        known = names or tuple(_JSON_TYPES)
        unknown = sorted(set(changes) - set(known))
        if unknown:
            raise InputError(f"unknown mitigation field(s) {', '.join(unknown)}; known: "
                             f"{', '.join(known)}")
        clean: dict[str, Any] = {}
        for name, value in changes.items():
            kinds = _JSON_TYPES[name]
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

    def to_dict(self, names: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The fields (``names``, default all) in the one vocabulary of predict's JSON, a
        simulation's and a service's records; with ``split_keys``, ``split_hot`` too: the
        models' K:S (None when no key is split)."""
        out: dict[str, Any] = {}
        if names is None or "split_keys" in names:
            out["split_hot"] = (f"{self.split_keys}:{self.split_into}"
                                if self.splits and self.split_keys else None)
        out.update({f.name: getattr(self, f.name) for f in fields(self)
                    if names is None or f.name in names})
        if "channels" in out:
            out["channels"] = "hot" if self.channels is None else list(self.channels)
        return out

    def phrases(self) -> list[str]:
        """The mitigations switched on, one phrase each (unset ones are not mentioned)."""
        parts = []
        if self.splits:
            who = ("the top key" if self.split_keys == 1 else f"top {self.split_keys} keys"
                   if self.split_keys else "hot keys")
            parts.append(f"{who} split into {self.split_into} time-bucket sub-partitions")
        if self.replicas > 1:
            parts.append(f"reads spread over {self.replicas} replicas per shard (the primary "
                         f"and {self.replicas - 1} more)")
        if self.cache_hit > 0:
            parts.append(f"{pct(self.cache_hit)} of the top {self.hot_keys} keys' reads hit a "
                         "local cache")
        if self.cache_ttl_s > 0:
            parts.append(f"hot keys' reads cached for {self.cache_ttl_s:g} s")
        if self.coalesce:
            parts.append("identical in-flight reads coalesced")
        return parts

    def text(self) -> str:
        """The mitigations switched on, in words."""
        return "; ".join(self.phrases()) or "no mitigation"
