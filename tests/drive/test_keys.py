"""Driven requests carry the generator's message sizes: one size model for both."""

from __future__ import annotations

import numpy as np
import pytest

from hotshard.drive.keys import load_keys
from tests.conftest import ROOT

PROFILE = str(ROOT / "examples" / "incident.profile.json")


def test_write_bodies_follow_the_profiles_size_quantiles():
    from hotshard.profile.model import Profile

    quantiles = Profile.load(PROFILE).sizes["quantiles"]
    keys = load_keys(PROFILE, seed=3)
    _, _, sizes = keys.batch(np.arange(200_000, dtype=np.int64))
    # the generator's model puts the profile's quantiles exactly at their probabilities; a
    # sample of 200,000 pins each empirical quantile within a few percent of it
    for q, value in quantiles.items():
        assert np.quantile(sizes, float(q)) == pytest.approx(value, rel=0.03)
    # and its ends: p0 = p50 / 4, p100 = 2 p99 (log-linear), not 1 byte and p99
    assert sizes.min() >= quantiles["0.5"] / 4 - 1 and sizes.max() <= 2 * quantiles["0.99"] + 1


def test_same_seed_same_sizes():
    a = load_keys(PROFILE, seed=5).batch(np.arange(1000, dtype=np.int64))[2]
    b = load_keys(PROFILE, seed=5).batch(np.arange(1000, dtype=np.int64))[2]
    assert np.array_equal(a, b)
