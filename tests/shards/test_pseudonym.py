"""Pseudonymized profiles: no real key leaves, placement still reproduced."""

import json

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.profile.count import count_profile
from hotshard.profile.pseudonym import pseudonym, read_secret
from hotshard.shards.partitioners import make_partitioner
from hotshard.shards.predict import predict
from hotshard.workload.profile_sampler import from_profile
from tests.conftest import shared

SECRET = b"0123456789abcdef-test-secret"


@pytest.fixture(scope="module")
def pair():
    parts = [make_partitioner("kafka", 16, key_type="bigint"),
             make_partitioner("cassandra", 8, key_type="bigint")]
    path = str(shared("traces", "web12.parquet"))
    plain = count_profile([path], key="key", placements=parts)
    hidden = count_profile([path], key="key", placements=parts, pseudonymize_secret=SECRET)
    return plain, hidden, parts


def test_no_real_head_key_is_written(pair):
    plain, hidden, _ = pair
    text = hidden.to_json()
    assert hidden.privacy["pseudonymized"] is True
    for key in plain.head_keys:
        assert f'"{key}"' not in text
    assert list(hidden.head_keys) == [pseudonym(SECRET, k) for k in plain.head_keys]
    assert np.array_equal(hidden.head_counts, plain.head_counts)


def test_predict_matches_the_real_keys_exactly(pair):
    plain, hidden, parts = pair
    for part in parts:
        assert np.allclose(predict(hidden, part).shares, predict(plain, part).shares)


def test_another_partitioner_is_refused(pair):
    _, hidden, _ = pair
    with pytest.raises(InputError, match="pseudonymized"):
        predict(hidden, make_partitioner("redis-cluster", 16))


def test_stand_in_keys_land_on_the_recorded_shards(pair):
    plain, hidden, parts = pair
    smp = from_profile(hidden)
    stand_ins = [str(k) for k in smp.ids(np.arange(smp.head_size))]
    real_shards = parts[0].shard_of(list(plain.head_keys))
    assert np.array_equal(parts[0].shard_of(stand_ins), real_shards)
    assert not set(stand_ins) & set(plain.head_keys)  # stand-ins, not the real keys


def test_pseudonymize_needs_a_partitioner_and_a_real_secret(tmp_path):
    with pytest.raises(InputError, match="needs at least one partitioner"):
        count_profile([str(shared("traces", "web07.parquet"))], key="key",
                      pseudonymize_secret=SECRET)
    short = tmp_path / "s"
    short.write_bytes(b"abc")
    with pytest.raises(InputError, match="at least 16 random bytes"):
        read_secret(short)


def test_loaded_pseudonymized_profile_needs_head_shards(pair):
    _, hidden, _ = pair
    doc = json.loads(hidden.to_json())
    for rec in doc["placement"].values():
        rec.pop("head_shards")
    from hotshard.profile.document import Profile, ProfileError

    with pytest.raises(ProfileError, match="head_shards is missing"):
        Profile.from_dict(doc)
