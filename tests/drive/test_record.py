"""The drive summary's histogram statistics are the HdrHistogram library's own, to the bit:
the mean and every percentile, on recorded histograms and on ones merged from other
processes' encodings (what a run of several processes summarises)."""

from __future__ import annotations

import numpy as np
import pytest

from hotshard.drive.record import (
    HIGHEST_US,
    PERCENTILES,
    _histogram,
    mean_value,
    percentiles_ms,
    values_at_percentiles,
)

QUANTILES = [0.0, 0.1, 1.0, 25.0, 50.0, 99.0, 99.9, 99.99, 99.999, 100.0]


def _recorded(seed: int, n: int):
    rng = np.random.default_rng(seed)
    hist = _histogram()
    sigma = rng.uniform(0.1, 3.0)  # from a tight cluster to six decades of latency
    values = np.clip(rng.lognormal(rng.uniform(3, 12), sigma, n), 1, HIGHEST_US).astype(int)
    for v, c in zip(*np.unique(values, return_counts=True), strict=True):
        hist.record_value(int(v), int(c))  # the same histogram as one value at a time
    return hist


def _merged(seed: int):
    """Two processes' histograms, encoded and decoded into a third (as ``Recorder.merge``)."""
    out = _histogram()
    for part in (_recorded(seed, 500), _recorded(seed + 1000, 3000)):
        out.decode_and_add(part.encode())
    return out


@pytest.mark.parametrize("seed", range(16))
def test_mean_and_percentiles_are_the_librarys(seed):
    hist = _recorded(seed, int(np.random.default_rng(seed).integers(1, 20_000))) if seed % 4 \
        else _merged(seed)
    assert mean_value(hist) == hist.get_mean_value()
    assert values_at_percentiles(hist, QUANTILES) == [hist.get_value_at_percentile(q)
                                                      for q in QUANTILES]
    summary = percentiles_ms(hist)
    for name, q in PERCENTILES.items():
        if q is not None:
            assert summary[name] == round(hist.get_value_at_percentile(q) / 1000.0, 3)


def test_one_value_and_no_value():
    hist = _histogram()
    assert percentiles_ms(hist) is None and mean_value(hist) == 0.0
    assert values_at_percentiles(hist, QUANTILES) == [0] * len(QUANTILES)
    hist.record_value(1234)
    assert values_at_percentiles(hist, QUANTILES) == [hist.get_value_at_percentile(q)
                                                      for q in QUANTILES]
    assert mean_value(hist) == hist.get_mean_value()


def test_counts_whose_sum_of_values_passes_64_bits():
    """Counts x values beyond 2^63 are summed exactly, as the library's Python integers do."""
    hist = _histogram()
    hist.record_value(HIGHEST_US, 2**40)
    hist.record_value(3, 5)
    assert mean_value(hist) == hist.get_mean_value()
    assert values_at_percentiles(hist, QUANTILES) == [hist.get_value_at_percentile(q)
                                                      for q in QUANTILES]
