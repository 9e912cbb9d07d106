"""Compiled kernel of the arrival summary (numba): requests per window of sorted times.

``measure_arrivals`` counts a trace's requests in windows of a dozen widths (its rate's bins,
the index of dispersion at seven scales, four cascade levels). Done with numpy, each width is
a floor division of every time, a cast and a ``bincount``: three passes over memory and a
division per time, ~0.2 s per width at 10 M requests. The times are sorted, so a window's
requests are one run of them: ``window_counts`` divides once per window and finds where the
run ends by comparisons alone.

The counts are numpy's to the bit. Float floor division, in numpy as in Python and numba (the
same algorithm, from CPython's float divmod), is the exact floor of the real quotient
``t / width``; so a time below ``(k + 1) * width`` (the real product) is in window ``k`` if
it is not below an earlier time of window ``k``. The float product is within a relative 2^-53
of the real one, so times below it less a relative 1e-15 are certainly in window ``k``; a
time in that thin band is divided exactly, as the first of every window is.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["window_counts"]

_BELOW = 1.0 - 1e-15


@njit(cache=True, nogil=True)
def window_counts(rel: np.ndarray, width: float, n_windows: int) -> np.ndarray:
    """``np.bincount(np.minimum(rel // width, n_windows - 1), minlength=n_windows)`` of
    ascending times ``rel >= 0`` (every time at or past the last window counts in it)."""
    counts = np.zeros(n_windows, np.int64)
    last = n_windows - 1
    n = rel.size
    i = 0
    while i < n:
        k = rel[i] // width
        if k >= last:
            counts[last] += n - i  # sorted: every later time is at or past it too
            break
        bound = (k + 1.0) * width * _BELOW
        j = i + 1
        while j < n and rel[j] < bound:
            j += 1
        counts[int(k)] += j - i
        i = j
    return counts
