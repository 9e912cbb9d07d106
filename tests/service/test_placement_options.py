"""serve's placement options as a library call (service.server.placement): what the layout
holds and which shard count stands, without a CLI."""

from __future__ import annotations

import pytest

from hotshard.service.server import placement


def test_a_layout_file_gives_the_count_unless_the_user_gave_one():
    assert placement("redis-cluster", 4, shards_given=False, slots_map="slots.txt") == \
        ("redis-cluster", None, {"slots_map": "slots.txt"})
    assert placement("redis-cluster", 3, shards_given=True, slots_map="slots.txt") == \
        ("redis-cluster", 3, {"slots_map": "slots.txt"})


def test_token_options_reach_cassandra_only_and_the_key_type_every_layout():
    assert placement("cassandra", 12, num_tokens=8, ring_seed=2, key_type="bigint") == \
        ("cassandra", 12, {"num_tokens": 8, "ring_seed": 2, "key_type": "bigint"})
    assert placement("kafka", 64, num_tokens=8, ring_seed=2) == ("kafka", 64, {})


def test_a_store_places_by_its_slot_map():
    assert placement("kafka", 4, store="redis-cluster://127.0.0.1:7000") == \
        ("redis-cluster", None, {})


def test_an_unknown_layout_option_is_a_programming_error():
    with pytest.raises(TypeError, match="not layout options: ringfile"):
        placement("cassandra", 3, ringfile="r.txt")


@pytest.mark.parametrize("partitioner", ["kafka", "cassandra", "redis-cluster", "mongodb"])
def test_bulk_placement_is_each_channels_own(partitioner):
    """The bulk load's placement (each distinct channel once, integer-looking and text ids
    by their own key type, Kafka's murmur2 in Python or compiled by the count) is what the
    gateway routes each channel to."""
    import numpy as np

    from hotshard.service.router import Router

    rng = np.random.default_rng(9)
    ids = [str(i) for i in rng.integers(0, 500, 3000)] + [f"room-{i}" for i in range(200)]
    channels = [ids[i] for i in rng.permutation(len(ids))]
    router = Router(partitioner, 8)
    bulk = router.shards_of(channels)
    assert bulk.tolist() == [router.shard_of(c) for c in channels]
    assert router.shards_of([]).size == 0
