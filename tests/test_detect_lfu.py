"""Redis's LFU counter rule (``detect.lfu``): the hits a counter means, the rate two readings
bound, and the detector that replays the rule (checked live against redis-server in
tests/cluster/test_lfu_live.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hotshard.detect.lfu import (
    LfuCounters,
    distribution,
    expected_hits,
    hits_range,
    rate_range,
)
from hotshard.errors import InputError


def test_expected_hits_are_the_sum_of_each_steps_mean_wait():
    """From counter k (>= 5) an access increments with p = 1 / ((k - 5) 10 + 1): a mean
    wait of (k - 5) 10 + 1 accesses. Redis's docs (factor 10): 100 hits ~ 10, 1 K ~ 18,
    100 K ~ 142, 1 M: 255 (saturated)."""
    for c in (5, 6, 10, 18, 142, 255):
        assert expected_hits(c) == sum((k - 5) * 10 + 1 for k in range(5, c))
    assert 80 < expected_hits(10) < 130 and 700 < expected_hits(18) < 1300
    assert 8e4 < expected_hits(142) < 1.2e5 and expected_hits(255) < 1e6
    assert hits_range(255)[1] == math.inf and hits_range(3) == (0.0, 0.0)
    assert expected_hits(20, log_factor=0) == 15   # factor 0: one hit a step


def test_two_readings_bound_the_rate_between_them():
    lo, hi = rate_range(18, 30, 10.0)
    assert lo == (expected_hits(30) - expected_hits(19)) / 10.0
    assert hi == (expected_hits(31) - expected_hits(18)) / 10.0
    assert rate_range(40, 40, 5.0)[0] == 0.0
    assert rate_range(100, 255, 1.0)[1] == math.inf
    with pytest.raises(InputError):
        rate_range(5, 6, 0.0)


def test_the_exact_law_is_a_distribution_whose_mean_grows_like_the_expectation():
    for n in (0, 1, 50, 5000):
        p = distribution(n)
        assert p.sum() == pytest.approx(1.0) and (p >= 0).all()
    assert distribution(0)[5] == 1.0
    # after expected_hits(c) accesses the counter sits around c
    mean = (distribution(int(expected_hits(40))) * np.arange(256)).sum()
    assert 38 <= mean <= 42


def test_the_detector_counts_as_the_exact_law_says():
    """2,000 keys read 300 times each: their counters' mean is the law's mean within 5
    standard errors (the law's sd / sqrt(2000))."""
    d = LfuCounters(seed=4)
    for t in range(300):
        for k in range(2000):
            d.add(f"k{k}", now=t * 0.01)
    got = np.array([d.counter(f"k{k}", now=3.0) for k in range(2000)])
    p = distribution(299)   # the first access creates the key at 5
    c = np.arange(256)
    mean, sd = (p * c).sum(), math.sqrt((p * (c - (p * c).sum()) ** 2).sum())
    assert abs(got.mean() - mean) < 5 * sd / math.sqrt(2000)
    # idle minutes decay it, one a minute, as Redis does on the next read
    assert d.counter("k0", now=3.0 + 180.0) == max(got[0] - 3, 0)
    top = d.shares(now=3.0)
    assert len(top) == 16 and all(0 < s < 0.01 for s in top.values())
