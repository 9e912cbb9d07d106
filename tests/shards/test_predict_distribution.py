"""`predict --dist`: a classic distribution's keys placed one by one, checked against a
naive placement of the same keys (the partitioner's own shard_of, weights summed per shard)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.shards.partitioners import partitioner_for
from hotshard.shards.predict import predict_distribution
from hotshard.workload.generate import parse_dist
from tests.conftest import run_cli


@pytest.mark.parametrize(("spec", "store", "shards"), [
    ("zipf:1.1:20000", "kafka", 8), ("uniform:5000", "cassandra", 6),
    ("hotspot:0.01:0.5:10000", "redis-cluster", 3)])
def test_shares_are_the_keys_weights_summed_on_their_shards(spec, store, shards):
    sampler = parse_dist(spec)
    part = partitioner_for(store, shards, integer_keys=True)
    weights = sampler.weights()
    naive = np.zeros(shards)
    for key, weight in enumerate(weights):   # one key at a time: the reference
        naive[part.shard_of([str(key)])[0]] += weight
    result = predict_distribution(sampler, part)
    np.testing.assert_allclose(result.shares, naive, rtol=1e-9, atol=1e-12)
    assert result.hottest == int(np.argmax(naive))
    assert result.keys_from == spec
    assert np.all(result.sd == 0)


def test_too_many_keys_or_no_weights_are_refused():
    part = partitioner_for("kafka", 4, integer_keys=True)
    with pytest.raises(InputError, match="too many to place"):
        predict_distribution(parse_dist("uniform:1e8"), part)
    with pytest.raises(InputError, match="no closed-form weights"):
        predict_distribution(parse_dist("scrambled_zipfian:1000"), part)


def test_the_command_takes_dist_instead_of_a_profile(web07_path):
    res = run_cli("predict", "--dist", "zipf:1.1:1e4", "-p", "kafka", "-n", "8", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["keys_from"] == "zipf:1.1:10000" and doc["hottest"]["top_keys"][0]["key"] == "0"
    for args, words in [(["-p", "kafka", "-n", "4"], "a PROFILE or --dist SPEC"),
                        ([str(web07_path), "--dist", "uniform:9", "-p", "kafka", "-n", "4"],
                         "not both"),
                        (["--dist", "uniform:9", "-p", "kafka", "-n", "4", "--detect"],
                         "--detect")]:
        bad = run_cli("predict", *args)
        assert bad.returncode == 2 and words in bad.stderr, (args, bad.stderr)
