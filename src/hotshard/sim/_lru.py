"""The compiled LRU of ``sim.cache.LRUCache`` (numba): a doubly linked list over dense ids."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def lru_kernel(ids, n_keys, capacity, initial):
    """Hit flags of ``ids`` (dense, 0..n_keys-1) through an LRU of ``capacity`` entries that
    holds ``initial`` at first (dense ids, most recent first, at most ``capacity``):
    ``prev``/``nxt`` link the cached ids from most (head) to least (tail) recent. Returns the
    flags and what the cache holds at the end, most recent first (the next call's
    ``initial``)."""
    hits = np.zeros(ids.size, dtype=np.bool_)
    prev = np.full(n_keys, -1, dtype=np.int64)
    nxt = np.full(n_keys, -1, dtype=np.int64)
    cached = np.zeros(n_keys, dtype=np.bool_)
    head = -1
    tail = -1
    size = 0
    for i in range(initial.size):   # rebuild the list as the last call left it
        k = initial[i]
        cached[k] = True
        prev[k] = tail
        if tail >= 0:
            nxt[tail] = k
        else:
            head = k
        tail = k
        size += 1
    for i in range(ids.size):
        k = ids[i]
        if cached[k]:
            hits[i] = True
            if k == head:
                continue
            # unlink k, then put it in front
            p = prev[k]
            q = nxt[k]
            nxt[p] = q
            if q >= 0:
                prev[q] = p
            else:
                tail = p
        else:
            if size == capacity:  # evict the least recent
                old = tail
                tail = prev[old]
                if tail >= 0:
                    nxt[tail] = -1
                else:
                    head = -1
                cached[old] = False
                size -= 1
            cached[k] = True
            size += 1
        prev[k] = -1
        nxt[k] = head
        if head >= 0:
            prev[head] = k
        head = k
        if tail < 0:
            tail = k
    final = np.empty(size, dtype=np.int64)
    k = head
    for j in range(size):
        final[j] = k
        k = nxt[k]
    return hits, final
