"""One placement for a split key's sub-partitions: predict, simulate and serve agree."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hotshard.mitigations import Mitigations
from hotshard.profile.count import count_profile
from hotshard.service.router import Router
from hotshard.service.split import plan_split
from hotshard.shards.partitioners import make_partitioner, partitioner_for
from hotshard.shards.predict import predict
from hotshard.shards.split import split_shards

# CRC16 is linear: KEY#0..KEY#7 repeat every 4 buckets on 16 Redis Cluster shards, so hashing
# the sub-keys alone puts two sub-partitions on each of 4 shards
HOT, SHARDS, WAYS = "627051655", 16, 8


def test_colliding_sub_keys_are_probed_apart():
    part = make_partitioner("redis-cluster", SHARDS)
    naive = part.shard_of([f"{HOT}#{b}" for b in range(WAYS)])
    assert len(set(naive.tolist())) == 4  # the collision this placement exists to avoid
    placed = split_shards(part, [HOT, "42"], WAYS)
    for row, keys in zip(placed.shards, placed.keys, strict=True):
        assert len(set(row.tolist())) == WAYS
        assert part.shard_of(list(keys)).tolist() == row.tolist()  # `hotshard shard` agrees


def test_more_buckets_than_shards_spread_evenly():
    part = make_partitioner("kafka", 4, key_type="bigint")
    placed = split_shards(part, ["71"], 10)
    assert sorted(np.bincount(placed.shards[0], minlength=4).tolist()) == [2, 2, 3, 3]
    assert set(placed.shards[0][:4].tolist()) == {0, 1, 2, 3}


@pytest.mark.parametrize("name,integer", [("redis-cluster", False), ("kafka", True),
                                          ("cassandra", True), ("jump", True)])
def test_serve_places_as_predict_and_simulate_do(name, integer):
    part = partitioner_for(name, SHARDS, integer_keys=integer)
    models = split_shards(part, [HOT], WAYS).shards[0].tolist()
    served = plan_split(Router(name, SHARDS), HOT, WAYS, bucket_ms=1000, since_ms=0)
    assert list(served.shards) == models
    assert list(served.keys) == list(split_shards(part, [HOT], WAYS).keys[0])


@pytest.fixture(scope="module")
def hot_profile(tmp_path_factory):
    """HOT carries 80% of 50,000 requests; 2,000 other channels the rest."""
    rng = np.random.default_rng(7)
    keys = np.where(rng.random(50_000) < 0.8, int(HOT), rng.integers(1, 2_001, 50_000))
    path = tmp_path_factory.mktemp("split") / "trace.parquet"
    pq.write_table(pa.table({"key": keys.astype(np.int64)}), path)
    return count_profile([str(path)], key="key")


def test_predict_relieves_onto_the_served_shards(hot_profile):
    part = partitioner_for("redis-cluster", SHARDS, integer_keys=True)
    after = predict(hot_profile, part, mitigations=Mitigations(split_keys=1, split_into=WAYS)
                    ).after
    served = plan_split(Router("redis-cluster", SHARDS), HOT, WAYS, 1000, 0)
    hot_share = hot_profile.head_counts[0] / hot_profile.events
    # each sub-partition carries 1/8 of the key: only its 8 shards can hold that much
    loaded = set(np.flatnonzero(after.shares > 0.9 * hot_share / WAYS).tolist())
    assert loaded == set(served.shards)
    assert after.shares.max() < 1.5 * hot_share / WAYS  # no shard holds two sub-partitions
    named = {k for k, _ in after.hottest_keys if k.startswith(HOT + "#")}
    assert named and named <= set(served.keys)


def test_simulate_relieves_onto_the_served_shards(hot_profile):
    from hotshard.sim.arrivals import PoissonArrivals
    from hotshard.sim.service_times import Exponential
    from hotshard.sim.system import ServiceModel, simulate
    from hotshard.workload.profile_sampler import from_profile

    model = ServiceModel(shards=SHARDS, partitioner="redis-cluster",
                         service=Exponential(0.001), arrivals=PoissonArrivals())
    res = simulate(from_profile(hot_profile), rps=1000, duration=60, model=model, rng=3,
                   mitigations=Mitigations(split_keys=1, split_into=WAYS))
    seen = np.array([s.requests for s in res.shards]) / res.requests
    served = plan_split(Router("redis-cluster", SHARDS), HOT, WAYS, 1000, 0)
    hot_share = 0.8
    loaded = set(np.flatnonzero(seen > 0.9 * hot_share / WAYS).tolist())
    assert loaded == set(served.shards)
    # 60,000 requests: a shard's count is within ~0.4 pp (3 sd) of its expected share
    assert seen.max() < 1.5 * hot_share / WAYS
