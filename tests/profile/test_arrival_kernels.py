"""The compiled window counts of the arrival summary are numpy's to the bit, and so is the
summary they make, on times chosen to sit on window edges."""

from __future__ import annotations

import numpy as np
import pytest

from hotshard.profile import arrivals
from hotshard.profile._arrival_kernels import window_counts
from hotshard.profile.arrivals import IDC_SCALES, LEVELS, measure_arrivals


def _numpy_counts(rel, width, n_windows):
    return np.bincount(np.minimum((rel // width).astype(np.int64), n_windows - 1),
                       minlength=n_windows)


def _edge_times(width: float, n: int) -> np.ndarray:
    """Times on every window edge k * width (as float products round them) and the floats
    just below and above each: where a count by comparison alone would go wrong."""
    edges = np.arange(n) * width
    return np.sort(np.concatenate([edges, np.nextafter(edges, -1.0).clip(0),
                                   np.nextafter(edges, np.inf), edges + 0.5 * width]))


TIMES = {
    "uniform": np.sort(np.random.default_rng(1).uniform(0, 3600, 200_000)),
    "bursts": np.sort(np.concatenate([
        np.random.default_rng(2).uniform(0, 100, 50_000),
        50 + np.random.default_rng(3).exponential(0.01, 50_000)])),
    "edges 0.01": _edge_times(0.01, 50_000),
    "edges 0.1": _edge_times(0.1, 20_000),
    "edges 0.1, shifted": _edge_times(0.1, 20_000) * 3 + 0.1,
    "one instant": np.zeros(1000),
    # epoch seconds less the first: the edges as a trace's times round them
    "edges 0.01, epoch": (_edge_times(0.01, 20_000) + 1.7e9) - 1.7e9,
}


@pytest.mark.parametrize("name", sorted(TIMES))
@pytest.mark.parametrize("width", sorted({*IDC_SCALES, *LEVELS, 60.0, 0.03}))
def test_window_counts_are_numpys_bincount(name, width):
    rel = TIMES[name] - TIMES[name][0]
    last = int(rel[-1] // width) + 1
    for n_windows in {1, max(1, last // 2), last, last + 3}:  # clipped, exact and padded
        np.testing.assert_array_equal(window_counts(rel, width, n_windows),
                                      _numpy_counts(rel, width, n_windows))


@pytest.mark.parametrize("name", ["uniform", "bursts", "edges 0.01", "edges 0.1, shifted"])
def test_the_summary_is_the_same_with_and_without_the_kernel(name, monkeypatch):
    times = TIMES[name] + 1.7e9  # epoch seconds: the quotients' rounding is not a small int's
    monkeypatch.setattr(arrivals, "_KERNEL_MIN_TIMES", 0)
    compiled = measure_arrivals(times)
    monkeypatch.setattr(arrivals, "_KERNEL_MIN_TIMES", 1 << 62)
    plain = measure_arrivals(times)
    np.testing.assert_array_equal(compiled.counts, plain.counts)
    assert compiled.idc == plain.idc and compiled.cascade == plain.cascade


def test_times_out_of_order_are_summarised_as_sorted():
    times = TIMES["bursts"] + 1.7e9
    shuffled = np.random.default_rng(4).permutation(times)
    a, b = measure_arrivals(shuffled), measure_arrivals(times)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert a.idc == b.idc and a.cascade == b.cascade
