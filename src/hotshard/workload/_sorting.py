"""A compiled sort of one short run of an array in place, for orders that are already sorted
run by run (a radix bucket's values, a 10 ms leaf's arrival times)."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["sort_run"]

INSERTION_MAX = 32   # longer runs (a burst of immediate re-reads) go to a comparison sort


@njit(cache=True, inline="always")
def sort_run(a: np.ndarray, start: int, end: int) -> None:
    """Sort a[start:end] in place: insertion sort for the few values a run usually holds,
    numpy's sort for a long one (insertion sort is quadratic)."""
    if end - start > INSERTION_MAX:
        a[start:end].sort()
        return
    for i in range(start + 1, end):
        v = a[i]
        j = i - 1
        while j >= start and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v
