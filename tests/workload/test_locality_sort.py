"""The locality order's linear-time sort: the same order as numpy's sort of the packed words,
on spreads the order meets (even instants, a burst of immediate re-reads in one bucket, a
stream shorter than the buckets)."""

from __future__ import annotations

import numpy as np
import pytest

from hotshard.workload.locality_stream import _bucket_sorted_owners


@pytest.mark.parametrize("n", [1, 2, 7, 1_000, 200_003])
def test_the_radix_sort_gives_numpys_order_of_the_owners(n):
    rng = np.random.default_rng(n)
    owner_bits = 13
    value_bits = n.bit_length() + 20 + owner_bits
    packed = rng.integers(0, 1 << value_bits, n)
    packed[: n // 3] = packed[0] + np.arange(n // 3) % 5   # a burst: one bucket, many ties
    want = np.sort(packed) & ((1 << owner_bits) - 1)
    got = _bucket_sorted_owners(packed.copy(), value_bits, owner_bits, np.empty_like(packed))
    assert np.array_equal(got, want)


def test_few_value_bits_sort_in_one_level():
    rng = np.random.default_rng(1)
    packed = rng.integers(0, 8, 500)
    got = _bucket_sorted_owners(packed.copy(), 3, 1, np.empty_like(packed))
    assert np.array_equal(got, np.sort(packed) & 1)
