"""Compiled kernel of the time sections' counts over a stream read in time order (numba).

``profile.time_counts`` defines the arrivals' and timelines' windows as SQL an engine runs
over a file. When the DuckDB engine reads the file in time order anyway (its locality
pass), ``count_windows`` counts the same windows from the same doubles as it goes: every
request's 10 ms window of the epoch, ``floor(t / 0.01)``, and a head key's sub-window,
``floor(double(w - first) * bins / n_fine)``, the statements' operations in their order
(IEEE division and multiplication are exact-rounded, no fast-math here), so each request
lands in the window the statements put it in. Times never go back, so each window's
requests are one run: the kernel writes runs, a few per 10 ms, not requests.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from hotshard.profile._locality_kernels import _probe

__all__ = ["count_windows"]


@njit(cache=True, nogil=True)
def count_windows(t: np.ndarray, hashes: np.ndarray, fine_s: float, head_table: np.ndarray,
                  head_shift: int, head_index: np.ndarray, first: int, n_fine: int,
                  bins: int, head_counts: np.ndarray, w_out: np.ndarray, c_out: np.ndarray,
                  lo_out: np.ndarray, hi_out: np.ndarray) -> int:
    """Runs of equal 10 ms windows of times ``t`` (seconds, never going back) into
    (w_out, c_out, lo_out, hi_out): each run's window, requests, first and last time; its
    number is returned (at most ``t.size``). The requests whose key hash is in
    ``head_table`` (``key_table``'s, empty for none) are counted into
    ``head_counts[head_index[id] * bins + sub-window]``, the span being ``n_fine`` 10 ms
    windows from the window ``first``."""
    n = 0
    heads = head_index.size > 0
    for j in range(t.size):
        x = t[j]
        w = np.int64(math.floor(x / fine_s))
        if n == 0 or w != w_out[n - 1]:
            w_out[n] = w
            c_out[n] = 0
            lo_out[n] = x
            n += 1
        c_out[n - 1] += 1
        hi_out[n - 1] = x
        if heads:
            k = head_table[2 * _probe(head_table, head_shift, hashes[j]) + 1] - 1
            if k >= 0:
                sub = np.int64(math.floor(np.float64(w - first) * bins / n_fine))
                head_counts[head_index[k] * bins + min(sub, bins - 1)] += 1
    return n
