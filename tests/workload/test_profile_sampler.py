"""Sampling from profiles: exact head, class-based tail, non-colliding synthetic IDs."""

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.profile.count import count_profile
from hotshard.workload.profile_sampler import from_profile, tail_classes
from tests.conftest import shared


@pytest.fixture(scope="module")
def web07(web07_profile):
    return web07_profile


def test_head_keeps_exact_relative_weights(web07):
    smp = from_profile(web07)
    p = smp.head_probabilities()
    assert np.allclose(p, web07.head_counts / web07.events)


@pytest.mark.parametrize("tail", ["power_law", "histogram"])
def test_tail_mass_and_keys_match_the_profile(web07, tail):
    weights, keys = tail_classes(web07.dist, tail)
    assert keys.sum() == web07.tail.keys
    assert np.dot(weights, keys) == pytest.approx(web07.tail.events)
    if tail == "histogram":  # the exact count-of-counts, class by class
        assert sorted(zip(weights, keys, strict=False)) == sorted(
            zip(web07.tail.values, web07.tail.value_keys.astype(int), strict=False))


def test_synthetic_tail_ids_never_collide_with_head(web07):
    smp = from_profile(web07)
    ids = smp.ids(np.arange(smp.n_keys))
    assert np.unique(ids).size == smp.n_keys
    assert [str(i) for i in ids[: smp.head_size]] == list(web07.head_keys)


def test_string_keys_get_prefixed_synthetic_ids(tmp_path):
    (tmp_path / "c.csv").write_text("k,n\n~t0,50\nabc,40\n" + "".join(
        f"x{i},{1 + i % 3}\n" for i in range(100)))
    prof = count_profile([str(tmp_path / "c.csv")], key="k", counts="n", top_k=2)
    smp = from_profile(prof)
    ids = smp.ids(np.arange(smp.n_keys)).to_pylist()
    assert ids[:2] == ["~t0", "abc"]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("~~t") for i in ids[2:])  # "~t" is taken by a head key


def test_a_billion_tail_keys_cost_no_more_than_a_thousand(web07):
    small = from_profile(web07)
    huge = from_profile(web07.scaled(keys=1e9))
    assert huge.n_keys == 10**9
    # memory and set-up follow classes, not keys
    assert huge.classes.n_classes <= small.classes.n_classes + 64
    draws = huge.sample(100_000, 1)
    assert draws.max() < 10**9
    head_share = (draws < huge.head_size).mean()
    expected = huge.head_probabilities().sum()
    assert abs(head_share - expected) < 5 * np.sqrt(expected * (1 - expected) / 100_000)
    # the head keeps its share of the profile however many keys the tail spreads over
    assert expected == pytest.approx(web07.head_counts.sum() / web07.events)


def test_per_operation_samplers(tmp_path):
    prof = count_profile([str(shared("traces", "cloudphysics.parquet"))], key="lbn", op="op")
    for op, dist in prof.operations.items():
        smp = from_profile(prof, op=op)
        assert smp.n_keys == dist.keys
    with pytest.raises(InputError, match="no operation 'delete'"):
        from_profile(prof, op="delete")
