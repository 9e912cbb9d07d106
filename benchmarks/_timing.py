"""The one timer every benchmark uses: best of N wall-clock runs (the machine is noisy)."""

from __future__ import annotations

import time


def best_time(fn, repeats: int = 3):
    """(fastest seconds over ``repeats`` calls of ``fn``, the last result)."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def best_rate(fn, items: int, repeats: int = 3) -> float:
    """Items per second of the fastest of ``repeats`` calls."""
    return items / best_time(fn, repeats)[0]
