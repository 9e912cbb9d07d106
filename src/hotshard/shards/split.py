"""Where a split key's time-bucket sub-partitions live: one placement for every command.

A hot key split into S sub-partitions is only relieved if the sub-partitions land on S
different shards. Hashing ``KEY#0`` .. ``KEY#S-1`` alone does not promise that (two of eight
sub-keys share a shard more often than not on 16 shards: the birthday problem), so a
sub-partition whose key collides with an earlier one's shard probes ``KEY#s.1``,
``KEY#s.2``, ... until it finds a shard no earlier sub-partition uses. With S <= N the S
sub-partitions are on S distinct shards; with S > N every shard gets one before any gets two.

``predict``, ``simulate`` and ``serve`` all call ``split_shards``, so the shard a what-if
relieves onto is the shard the service writes to (``hotshard shard 'KEY#s.j'`` names it too).
Sub-partition keys are text to every store: a (key, bucket) composite is hashed as bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import InputError
from hotshard.shards.partitioners import Partitioner

__all__ = ["MAX_PROBES", "SplitPlacement", "split_shards", "text_partitioner"]

# candidates per sub-partition (its own key and 63 probes): on N shards with S - 1 taken, all
# 64 miss with probability ((S-1)/N)^64, under 1e-8 even at S = N = 256
MAX_PROBES = 64


@dataclass(frozen=True)
class SplitPlacement:
    """``keys[i][s]`` is key i's sub-partition s's partition key, on shard ``shards[i, s]``."""

    keys: tuple[tuple[str, ...], ...]
    shards: NDArray[np.int64]


def text_partitioner(partitioner: Partitioner) -> Partitioner:
    """``partitioner`` typing every key as text (sub-partition keys are composites)."""
    if getattr(partitioner, "key_type", "text") == "text":
        return partitioner
    return replace(partitioner, key_type="text")


def split_shards(partitioner: Partitioner, keys: Sequence[str], buckets: int
                 ) -> SplitPlacement:
    """Place ``buckets`` sub-partitions of each key, on distinct shards where possible.

    Every first candidate (``KEY#s``) is hashed in one call; only a collision probes further,
    for that sub-partition alone, so placing the top keys of a profile costs one vectorised
    hash. A key's sub-partitions are placed in bucket order, each taking the first candidate
    whose shard holds the fewest of the key's earlier sub-partitions (none, while S <= N).
    """
    if buckets < 1:
        raise InputError(f"split buckets must be >= 1, got {buckets}")
    text = text_partitioner(partitioner)
    n = int(text.n_shards)
    keys = [str(k) for k in keys]
    if not keys:
        return SplitPlacement((), np.zeros((0, buckets), dtype=np.int64))
    first = np.asarray(text.shard_of([f"{k}#{s}" for k in keys for s in range(buckets)]),
                       dtype=np.int64).reshape(len(keys), buckets)
    names: list[tuple[str, ...]] = []
    shards = first.copy()
    for i, key in enumerate(keys):
        load = np.zeros(n, dtype=np.int64)   # this key's sub-partitions on each shard so far
        chosen = []
        for s in range(buckets):
            name, shard = f"{key}#{s}", int(first[i, s])
            least = load.min()
            if load[shard] > least:
                probes = [f"{key}#{s}.{j}" for j in range(1, MAX_PROBES)]
                placed = np.asarray(text.shard_of(probes), dtype=np.int64)
                free = np.flatnonzero(load[placed] == least)
                if free.size:  # else the partitioner kept colliding: keep the first candidate
                    name, shard = probes[int(free[0])], int(placed[free[0]])
            chosen.append(name)
            shards[i, s] = shard
            load[shard] += 1
        names.append(tuple(chosen))
    return SplitPlacement(tuple(names), shards)
