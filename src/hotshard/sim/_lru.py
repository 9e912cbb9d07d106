"""The compiled LRU of ``sim.cache.lru_hits`` (numba): a doubly linked list over dense ids."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def lru_kernel(ids, n_keys, capacity):
    """Hit flags of ``ids`` (dense, 0..n_keys-1) through an LRU of ``capacity`` entries:
    ``prev``/``nxt`` link the cached ids from most (head) to least (tail) recent."""
    hits = np.zeros(ids.size, dtype=np.bool_)
    prev = np.full(n_keys, -1, dtype=np.int64)
    nxt = np.full(n_keys, -1, dtype=np.int64)
    cached = np.zeros(n_keys, dtype=np.bool_)
    head = -1
    tail = -1
    size = 0
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
    return hits
