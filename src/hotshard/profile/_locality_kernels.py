"""Compiled kernels of the locality summary (numba): dense key ids, and Mattson's stack pass.

``dense_ids`` turns 64-bit key hashes into ids 0..K-1 in order of first appearance with an
open-addressing table (one pass, no sort). ``stack_pass`` is Mattson's LRU stack algorithm with
a Fenwick tree over last-access positions: at each reference, the keys touched since the
previous reference to the same key are exactly the live markers after its old position, so the
stack distance is one prefix sum, and the marker moves to the newest position (two updates).
The positions are kept to 2K by compaction (when they run out, the live markers, at most K,
are renumbered 0..L-1 in order), and the markers are a bitmap (64 positions to a word) under a
Fenwick tree of the words' counts, 64 times smaller than a tree over positions: a count up to
a position is one tree prefix over whole words plus one popcount. So the structure stays in
cache whatever the stream's length, which is what makes the pass fast.
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
    """(ids, K): each distinct hash gets the next id at its first appearance. The table
    starts small and doubles at half full, so it stays the size of the key set (in cache for
    most), not of the stream."""
    n = hashes.size
    cap = 1 << 16
    mask = cap - 1
    table_key = np.zeros(cap, dtype=np.uint64)
    table_id = np.full(cap, -1, dtype=np.int64)
    ids = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(n):
        h = hashes[i]
        j = np.int64((h * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
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
        if 2 * k > cap:  # grow: re-insert every key
            old_key, old_id = table_key, table_id
            cap *= 2
            mask = cap - 1
            table_key = np.zeros(cap, dtype=np.uint64)
            table_id = np.full(cap, -1, dtype=np.int64)
            for s in range(old_id.size):
                if old_id[s] >= 0:
                    j = np.int64((old_key[s] * np.uint64(0x9E3779B97F4A7C15))
                                 >> np.uint64(40)) & mask
                    while table_id[j] >= 0:
                        j = (j + 1) & mask
                    table_key[j] = old_key[s]
                    table_id[j] = old_id[s]
    return ids, k


@njit(cache=True, inline="always")
def _popcount(x: np.uint64) -> int:
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return int((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(cache=True, inline="always")
def _marks_upto(bits: np.ndarray, tree: np.ndarray, p: int) -> int:
    """Live markers at positions 0..p inclusive."""
    w = p >> 6
    below = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(63 - (p & 63))
    inside = _popcount(bits[w] & below)
    if w == 0:
        return inside
    return _prefix(tree, w - 1) + inside


@njit(cache=True, inline="always")
def _mark(bits: np.ndarray, tree: np.ndarray, p: int, on: bool) -> None:
    w = p >> 6
    bit = np.uint64(1) << np.uint64(p & 63)
    if on:
        bits[w] |= bit
        _add(tree, w, 1)
    else:
        bits[w] &= ~bit
        _add(tree, w, -1)


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
    cap = 2 * n_keys + 64
    bits = np.zeros(cap // 64 + 2, dtype=np.uint64)
    tree = np.zeros(bits.size + 1, dtype=np.int32)
    # per key, side by side (one cache line a reference): marker position, previous reference
    last = np.empty((n_keys, 2), dtype=np.int64)
    last[:, 0] = -1
    live = 0
    pos = 0
    top = n_bins - 1
    for i in range(ids.size):
        key = ids[i]
        c = key_class[key]
        if pos == cap:  # renumber the live markers 0..live-1, in order
            order = np.argsort(last[:, 0])
            tree[:] = 0
            bits[:] = 0
            r = 0
            for j in range(order.size):
                kk = order[j]
                if last[kk, 0] >= 0:
                    last[kk, 0] = r
                    _mark(bits, tree, r, True)
                    r += 1
            pos = r
        old = last[key, 0]
        if old < 0:
            first[c] += 1
            live += 1
        else:
            distance = live - _marks_upto(bits, tree, old)  # live markers after ``old``
            d = int(distance * scale)
            exact[min(d, exact_cap)] += 1
            b = table[d + 1] if d + 1 < _TABLE else value_bin(d + 1, per_octave)
            stack[c, min(b, top)] += 1
            gap = max(int((i - last[key, 1]) * scale), 1)
            b = table[gap] if gap < _TABLE else value_bin(gap, per_octave)
            reuse[c, min(b, top)] += 1
            _mark(bits, tree, old, False)
        _mark(bits, tree, pos, True)
        last[key, 0] = pos
        last[key, 1] = i
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
    cap = 2 * n_keys + 64
    bits = np.zeros(cap // 64 + 2, dtype=np.uint64)
    tree = np.zeros(bits.size + 1, dtype=np.int32)
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
            bits[:] = 0
            r = 0
            for j in range(order.size):
                kk = order[j]
                if last_pos[kk] >= 0:
                    last_pos[kk] = r
                    _mark(bits, tree, r, True)
                    r += 1
            pos = r
        old = last_pos[key]
        if old < 0:
            live += 1
        else:
            d = int(live - _marks_upto(bits, tree, old))
            s = table[d + 1] if d + 1 < _TABLE else value_bin(d + 1, per_octave)
            gap = i - last_ref[key]
            rb = table[gap] if gap < _TABLE else value_bin(gap, per_octave)
            joint[key_class[key], min(rb, top), min(s, top)] += 1
            _mark(bits, tree, old, False)
        _mark(bits, tree, pos, True)
        last_pos[key] = pos
        last_ref[key] = i
        pos += 1
    return joint
