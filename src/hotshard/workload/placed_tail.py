"""Synthetic tail keys that land where production's tail did.

A profile recorded with ``--partitioner`` holds each shard's total tail events. To reproduce it
in a generated workload, the tail's keys (count classes) are first allotted to shards so each
shard's tail weight matches its recorded share, then every tail key gets a synthetic name that
this partitioner places on its allotted shard: candidate names are enumerated in a fixed order,
hashed in vectorized rounds and filed per shard ("name books").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import InputError

__all__ = ["MAX_PLACED_KEYS", "PlacedTail", "allot_classes", "place_tail"]

# Every placed tail key is hashed and stored once: beyond this, names are not placed.
MAX_PLACED_KEYS = 50_000_000
_BATCH = 1 << 16


def allot_classes(weights: NDArray[np.float64], keys: NDArray[np.int64],
                  targets: NDArray[np.float64]) -> NDArray[np.int64]:
    """Keys of each class per shard (classes x shards), heaviest class first, each class's keys
    spread over the shards in proportion to what they still lack (largest remainder)."""
    n_shards = targets.size
    total = float(np.dot(weights, keys))
    deficit = targets / targets.sum() * total if targets.sum() > 0 else np.full(
        n_shards, total / n_shards)
    alloc = np.zeros((weights.size, n_shards), dtype=np.int64)
    for c in np.argsort(-weights, kind="stable"):
        k = int(keys[c])
        need = np.maximum(deficit, 0.0)
        if need.sum() <= 0:
            need = np.ones(n_shards)
        share = need / need.sum() * k
        base = np.floor(share).astype(np.int64)
        short = k - int(base.sum())
        if short > 0:
            base[np.argsort(-(share - base), kind="stable")[:short]] += 1
        alloc[c] = base
        deficit -= base * weights[c]
    return alloc


@dataclass(frozen=True)
class PlacedTail:
    """Tail position -> synthetic name index that lands on the position's allotted shard."""

    seg_start: NDArray[np.int64]
    seg_book: NDArray[np.int64]
    book: NDArray[np.int64]
    spec: str

    def names(self, tail_positions: NDArray[np.int64]) -> NDArray[np.int64]:
        seg = np.searchsorted(self.seg_start, tail_positions, side="right") - 1
        return self.book[self.seg_book[seg] + tail_positions - self.seg_start[seg]]


def place_tail(weights: NDArray[np.float64], keys: NDArray[np.int64],
               targets: NDArray[np.float64], partitioner, candidate_name, taken: set[str],
               spec: str) -> PlacedTail:
    """Allot the tail classes (in sampler order) to shards and name every key accordingly.

    ``candidate_name(indices) -> list[str]`` gives the i-th candidate names; names in
    ``taken`` (the head keys) are skipped.
    """
    total_keys = int(keys.sum())
    if total_keys > MAX_PLACED_KEYS:
        raise InputError(f"{total_keys:,} tail keys are too many to place by name (at most "
                         f"{MAX_PLACED_KEYS:,}); generate without following a placement")
    n_shards = targets.size
    alloc = allot_classes(weights, keys, targets)
    need = alloc.sum(axis=0)
    books: list[list[NDArray[np.int64]]] = [[] for _ in range(n_shards)]
    have = np.zeros(n_shards, dtype=np.int64)
    start = 0
    while np.any(have < need):
        idx = np.arange(start, start + _BATCH, dtype=np.int64)
        names = candidate_name(idx)
        shards = partitioner.shard_of(names)
        if taken:
            free = np.fromiter((n not in taken for n in names), dtype=bool, count=len(names))
            idx, shards = idx[free], shards[free]
        order = np.argsort(shards, kind="stable")
        idx, shards = idx[order], shards[order]
        bounds = np.searchsorted(shards, np.arange(n_shards + 1))
        for s in np.flatnonzero(have < need):
            got = idx[bounds[s]:bounds[s + 1]][: need[s] - have[s]]
            books[s].append(got)
            have[s] += got.size
        start += _BATCH
        if start > 64 * (total_keys + _BATCH):
            raise InputError(f"{spec} never places names on some shards: cannot follow it")
    book_start = np.concatenate([[0], np.cumsum(need)[:-1]])
    book = np.concatenate([np.concatenate(b) if b else np.zeros(0, np.int64) for b in books])
    seg_start, seg_book = [], []
    used = np.zeros(n_shards, dtype=np.int64)
    pos = 0
    for c in range(weights.size):
        for s in np.flatnonzero(alloc[c]):
            seg_start.append(pos)
            seg_book.append(book_start[s] + used[s])
            used[s] += alloc[c, s]
            pos += int(alloc[c, s])
    return PlacedTail(np.array(seg_start, dtype=np.int64), np.array(seg_book, dtype=np.int64),
                      book.astype(np.int64), spec)
