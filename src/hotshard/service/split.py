"""Time-bucket sub-partitions: a hot channel's history spread over S shards by time slot.

From the moment a channel is split (``since_ms``), a message written at time t goes to
sub-partition ``(t // bucket_ms) % S``, whose partition key is ``"<channel>#<s>"`` placed by
the service's partitioner (``hotshard shard 'CHANNEL#s'`` reports the same shard). Sub-partition
keys are placed by ``hotshard.shards.split.split_shards``, the placement ``predict`` and
``simulate`` use (``CHANNEL#s``, ``CHANNEL#s.1``, ... until each lands on a shard no earlier
sub-partition uses), so S <= N sub-partitions really are on S different shards, and the ones
the models predicted. Messages written before the split stay on the channel's home shard.

Why slots rotate instead of hashing each message: a page of recent history then lives in one
sub-partition almost always (the current slot's), so a read costs one shard, and which shard
takes the channel's load moves every ``bucket_ms``: over a window longer than S slots, the
channel's writes and reads land evenly on S shards.

A split is one-way: its history lives in the buckets, so turning the mitigation off stops new
splits but keeps existing ones (un-splitting is a data migration, not a switch). The registry
is saved in the data directory, so a restarted service reads split channels correctly.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hotshard.errors import InputError
from hotshard.service.router import Router
from hotshard.service.store import SEQUENCE_BITS
from hotshard.shards.split import split_shards

__all__ = ["SPLITS_FILE", "SplitPlan", "SplitRegistry"]

SPLITS_FILE = "splits.json"


@dataclass(frozen=True)
class SplitPlan:
    """Where a split channel's messages live."""

    channel: str
    home: int                  # shard of the channel's messages before since_ms
    buckets: int               # S
    bucket_ms: int             # slot length
    since_ms: int              # first millisecond written to the buckets
    keys: tuple[str, ...]      # partition key of sub-partition s
    shards: tuple[int, ...]    # shard of sub-partition s

    def bucket_of(self, ts_ms: int) -> int:
        """The sub-partition a message written at ``ts_ms`` goes to."""
        return (ts_ms // self.bucket_ms) % self.buckets

    def slot_start_ms(self, ts_ms: int) -> int:
        """The first millisecond of the slot holding ``ts_ms``."""
        return ts_ms - ts_ms % self.bucket_ms

    def newest_location(self, before: int | None, now_ms: int) -> tuple[int, int]:
        """(sub-partition, earliest ms it must cover) for a page of ids below ``before``: the
        slot holding ``before``'s time (or now), bounded below by the split's start."""
        ts = (before >> SEQUENCE_BITS) if before is not None else now_ms
        ts = max(ts, self.since_ms)
        return self.bucket_of(ts), max(self.slot_start_ms(ts), self.since_ms)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_split(router: Router, channel: str, buckets: int, bucket_ms: int,
               since_ms: int) -> SplitPlan:
    """Place ``buckets`` sub-partitions of ``channel`` on distinct shards where possible."""
    if buckets < 2:
        raise InputError(f"split buckets must be >= 2, got {buckets}")
    if bucket_ms < 1:
        raise InputError(f"split bucket_ms must be >= 1, got {bucket_ms}")
    placed = split_shards(router.partitioner("text"), [channel], buckets)
    keys, shards = placed.keys[0], tuple(int(x) for x in placed.shards[0])
    return SplitPlan(channel, router.shard_of(channel), buckets, bucket_ms, since_ms,
                     keys, shards)


class SplitRegistry:
    """The split channels of one data directory, saved in ``splits.json`` there."""

    def __init__(self, data_dir: str | Path, router: Router) -> None:
        self.path = Path(data_dir) / SPLITS_FILE
        self.router = router
        self._plans: dict[str, SplitPlan] = {}
        if self.path.exists():
            with contextlib.suppress(OSError):   # written 0644 by an older version
                os.chmod(self.path, 0o600)
            try:
                saved = json.loads(self.path.read_text())
                for item in saved["splits"]:
                    plan = SplitPlan(**{**item, "keys": tuple(item["keys"]),
                                        "shards": tuple(item["shards"])})
                    self._plans[plan.channel] = plan
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise InputError(f"{self.path} is not a split registry ({e}): restore it "
                                 "or serve a new data directory") from e

    def get(self, channel: str) -> SplitPlan | None:
        return self._plans.get(channel)

    def __len__(self) -> int:
        return len(self._plans)

    def add(self, channel: str, buckets: int, bucket_ms: int, since_ms: int) -> SplitPlan:
        """Split ``channel`` from ``since_ms`` on (no change if it is split already)."""
        plan = self._plans.get(channel)
        if plan is None:
            plan = plan_split(self.router, channel, buckets, bucket_ms, since_ms)
            self._plans[channel] = plan
            self._save()
        return plan

    def _save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        # 0600 whatever the umask, as every other file of the data directory
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)   # a .tmp left by a crash keeps its old mode otherwise
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps({"splits": [p.to_dict() for p in self._plans.values()]}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
