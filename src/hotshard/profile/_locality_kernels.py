"""Compiled kernels of the locality summary (numba): dense key ids, and Mattson's stack pass.

``dense_ids`` turns 64-bit key hashes into ids 0..K-1 in order of first appearance with an
open-addressing table (one pass, no sort). ``stack_pass`` is Mattson's LRU stack algorithm with
a Fenwick tree over last-access positions: at each reference, the keys touched since the
previous reference to the same key are exactly the live markers after its old position, so the
stack distance is one prefix sum, and the marker moves to the newest position (two updates).
The tree is kept to 2K positions by compaction (when the positions run out, the live markers,
at most K, are renumbered 0..L-1 in order): the tree then fits in cache whatever the stream's
length, which is what makes the pass run at tens of millions of references a second.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["dense_ids", "stack_pass", "value_bin"]

_TABLE = 1 << 16


@njit(cache=True, inline="always")
def value_bin(value: int, per_octave: int) -> int:
    """Log bin of ``value`` >= 1: floor(per_octave * log2(value))."""
    return int(math.floor(per_octave * math.log2(value) + 1e-9))


@njit(cache=True)
def dense_ids(hashes: np.ndarray) -> tuple[np.ndarray, int]:
    """(ids, K): each distinct hash gets the next id at its first appearance."""
    n = hashes.size
    cap = 1024
    while cap < 2 * n + 2:
        cap *= 2
    cap = min(cap, 1 << 31)
    mask = cap - 1
    table_key = np.zeros(cap, dtype=np.uint64)
    table_id = np.full(cap, -1, dtype=np.int64)
    ids = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(n):
        h = hashes[i]
        slot = (h * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(33)
        j = np.int64(slot) & mask
        while True:
            if table_id[j] < 0:
                table_key[j] = h
                table_id[j] = k
                ids[i] = k
                k += 1
                break
            if table_key[j] == h:
                ids[i] = table_id[j]
                break
            j = (j + 1) & mask
    return ids, k


@njit(cache=True)
def _add(tree: np.ndarray, i: int, delta: int) -> None:
    i += 1
    size = tree.size
    while i < size:
        tree[i] += delta
        i += i & (-i)


@njit(cache=True)
def _prefix(tree: np.ndarray, i: int) -> int:
    """Sum of markers at positions 0..i inclusive."""
    i += 1
    total = 0
    while i > 0:
        total += tree[i]
        i -= i & (-i)
    return total


@njit(cache=True)
def stack_pass(ids: np.ndarray, n_keys: int, key_class: np.ndarray, n_classes: int,
               n_bins: int, per_octave: int, exact_cap: int, scale: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One pass over ``ids`` (dense, 0..n_keys-1, in stream order).

    Returns (stack[c, b], reuse[c, b], first[c], exact[d]): per popularity class c (of the
    referenced key), the log-binned histogram of stack distances (distinct other keys since
    the key's previous reference, plus one) and of reuse times (references since it, in
    requests); first references counted apart; and the exact whole-stream histogram of stack
    distances capped at ``exact_cap`` (for the LRU hit-rate curve). ``scale`` multiplies both
    distances before binning (1 for an exact pass, 1/R for a SHARDS sample at rate R).
    """
    table = np.empty(_TABLE, dtype=np.int64)  # bins of small values without a log2
    for v in range(1, _TABLE):
        table[v] = value_bin(v, per_octave)
    table[0] = 0
    stack = np.zeros((n_classes, n_bins), dtype=np.int64)
    reuse = np.zeros((n_classes, n_bins), dtype=np.int64)
    first = np.zeros(n_classes, dtype=np.int64)
    exact = np.zeros(exact_cap + 1, dtype=np.int64)
    cap = 2 * n_keys + 2
    tree = np.zeros(cap + 1, dtype=np.int32)
    last_pos = np.full(n_keys, -1, dtype=np.int64)   # marker position in the tree
    last_ref = np.zeros(n_keys, dtype=np.int64)      # index of the previous reference
    live = 0
    pos = 0
    top = n_bins - 1
    for i in range(ids.size):
        key = ids[i]
        c = key_class[key]
        if pos == cap:  # renumber the live markers 0..live-1, in order
            order = np.argsort(last_pos)
            tree[:] = 0
            r = 0
            for j in range(order.size):
                kk = order[j]
                if last_pos[kk] >= 0:
                    last_pos[kk] = r
                    _add(tree, r, 1)
                    r += 1
            pos = r
        old = last_pos[key]
        if old < 0:
            first[c] += 1
            live += 1
        else:
            distance = live - _prefix(tree, old)  # live markers after ``old``
            d = int(distance * scale)
            exact[min(d, exact_cap)] += 1
            b = table[d + 1] if d + 1 < _TABLE else value_bin(d + 1, per_octave)
            stack[c, min(b, top)] += 1
            gap = max(int((i - last_ref[key]) * scale), 1)
            b = table[gap] if gap < _TABLE else value_bin(gap, per_octave)
            reuse[c, min(b, top)] += 1
            _add(tree, old, -1)
        _add(tree, pos, 1)
        last_pos[key] = pos
        last_ref[key] = i
        pos += 1
    return stack, reuse, first, exact


@njit(cache=True)
def joint_pass(ids: np.ndarray, n_keys: int, key_class: np.ndarray, n_classes: int,
               n_bins: int, per_octave: int) -> np.ndarray:
    """joint[c, r, s]: re-references of class c with reuse-time bin r and stack-distance bin
    s, the same pass as ``stack_pass``: how a stream turns reuse times into distances."""
    table = np.empty(_TABLE, dtype=np.int64)
    for v in range(1, _TABLE):
        table[v] = value_bin(v, per_octave)
    table[0] = 0
    joint = np.zeros((n_classes, n_bins, n_bins), dtype=np.int32)
    cap = 2 * n_keys + 2
    tree = np.zeros(cap + 1, dtype=np.int32)
    last_pos = np.full(n_keys, -1, dtype=np.int64)
    last_ref = np.zeros(n_keys, dtype=np.int64)
    live = 0
    pos = 0
    top = n_bins - 1
    for i in range(ids.size):
        key = ids[i]
        if pos == cap:
            order = np.argsort(last_pos)
            tree[:] = 0
            r = 0
            for j in range(order.size):
                kk = order[j]
                if last_pos[kk] >= 0:
                    last_pos[kk] = r
                    _add(tree, r, 1)
                    r += 1
            pos = r
        old = last_pos[key]
        if old < 0:
            live += 1
        else:
            d = live - _prefix(tree, old)
            s = table[d + 1] if d + 1 < _TABLE else value_bin(d + 1, per_octave)
            gap = i - last_ref[key]
            rb = table[gap] if gap < _TABLE else value_bin(gap, per_octave)
            joint[key_class[key], min(rb, top), min(s, top)] += 1
            _add(tree, old, -1)
        _add(tree, pos, 1)
        last_pos[key] = pos
        last_ref[key] = i
        pos += 1
    return joint
