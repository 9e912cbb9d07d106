"""Benchmark: the profile's arrival summary (``measure_arrivals``) with its compiled window
counts against the same summary counted by numpy (a floor division, a cast and a bincount
per window width), in the same run, on the same sorted times.

The times are an hour of a bursty stream (Poisson, with one surge of 20% of the requests
packed into a few seconds), as ``hotshard profile --time`` hands them over. The two results
are checked equal before anything is printed.

    python benchmarks/bench_arrivals.py [--events 1e7] [--repeats 3]
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import best_time

from hotshard.profile import arrivals
from hotshard.profile.arrivals import measure_arrivals


def bursty_hour(events: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    surge = events // 5
    times = np.concatenate([rng.uniform(0, 3600, events - surge),
                            1800 + rng.exponential(2.0, surge)])
    return np.sort(times) + 1.7e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=1e7)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    times = bursty_hour(int(args.events))
    measure_arrivals(times[:1 << 21])  # numba's load and the kernel's cache, not timed

    kernel_min = arrivals._KERNEL_MIN_TIMES
    compiled_s, compiled = best_time(lambda: measure_arrivals(times), args.repeats)
    arrivals._KERNEL_MIN_TIMES = 1 << 62
    try:
        numpy_s, plain = best_time(lambda: measure_arrivals(times), args.repeats)
    finally:
        arrivals._KERNEL_MIN_TIMES = kernel_min
    assert np.array_equal(compiled.counts, plain.counts)
    assert compiled.idc == plain.idc and compiled.cascade == plain.cascade

    print(f"measure_arrivals over {times.size:,} sorted times (an hour, one surge)")
    print(f"  hotshard (compiled window counts) {compiled_s:7.3f} s")
    print(f"  numpy (three passes a width)      {numpy_s:7.3f} s")
    print(f"  speed-up {numpy_s / compiled_s:.1f}x, the same summary to the bit")


if __name__ == "__main__":
    main()
