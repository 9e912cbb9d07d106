"""Predicted per-shard load against the truth computed from every key of real traces."""

import numpy as np
import pyarrow.parquet as pq
import pytest

from hotshard.errors import InputError
from hotshard.mitigations import Mitigations
from hotshard.profile.count import count_profile
from hotshard.shards.partitioners import make_partitioner
from hotshard.shards.predict import predict
from tests.conftest import shared

TRACES = ["web07", "scarab-recs", "cloudphysics"]
COLUMN = {"cloudphysics": "lbn"}


def true_shares(trace, partitioner):
    col = COLUMN.get(trace, "key")
    keys = pq.read_table(shared("traces", f"{trace}.parquet"), columns=[col]).column(0)
    uniq, counts = np.unique(keys.to_numpy(), return_counts=True)
    shards = partitioner.shard_of([str(k) for k in uniq])
    return np.bincount(shards, weights=counts, minlength=partitioner.n_shards) / counts.sum()


@pytest.fixture(scope="module")
def recorded():
    """Profiles with kafka and cassandra placements recorded at 16, 64 and 256 shards."""
    out = {}
    for trace in TRACES:
        parts = [make_partitioner(name, n, key_type="bigint")
                 for name in ("kafka", "cassandra") for n in (16, 64, 256)]
        prof = count_profile([str(shared("traces", f"{trace}.parquet"))],
                             key=COLUMN.get(trace, "key"), placements=parts)
        out[trace] = (prof, parts)
    return out


@pytest.mark.parametrize("trace", TRACES)
def test_recorded_placement_is_exact(recorded, trace):
    prof, parts = recorded[trace]
    for part in parts:
        truth = true_shares(trace, part)
        pred = predict(prof, part)
        assert pred.tail_exact
        assert np.max(np.abs(pred.shares - truth)) < 0.0005  # 0.05 percentage points
        assert pred.hottest == int(np.argmax(truth))


@pytest.mark.parametrize("trace", TRACES)
def test_prediction_without_placement_is_calibrated(recorded, trace):
    prof, parts = recorded[trace]
    bare = prof.__class__(**{**prof.__dict__, "placement": {}})
    for part in parts:
        truth = true_shares(trace, part)
        pred = predict(bare, part)
        assert not pred.tail_exact
        own = part.ownership()
        # the only error left is the tail's random placement, which the prediction's sd
        # measures: within 5 sd on every shard (Bonferroni over <= 256 shards: p < 1.5e-4)
        assert np.all(np.abs(pred.shares - truth) <= 5 * pred.sd + 1e-12)
        # and far better than assuming uniform load
        assert np.max(np.abs(pred.shares - truth)) < 0.5 * np.max(np.abs(own - truth))


def test_web07_prediction_beats_uniform_tenfold(web07_profile):
    prof = web07_profile
    for n in (16, 64, 256):
        part = make_partitioner("kafka", n, key_type="bigint")
        truth = true_shares("web07", part)
        pred = predict(prof, part)
        err = np.max(np.abs(pred.shares - truth))
        assert err < 0.1 * np.max(np.abs(part.ownership() - truth))
        assert pred.hottest == int(np.argmax(truth))


def test_uniform_band_and_cpu(recorded):
    prof, parts = recorded["web07"]
    pred = predict(prof, parts[0], rps=3000, capacity=400)
    assert pred.cpu == pytest.approx(3000 * pred.shares / 400)
    assert pred.uniform_low < 1 / 16 < pred.uniform_high
    d = pred.to_dict()
    assert set(d) >= {"shards", "max_over_mean", "hottest", "uniform_band"}
    assert {"shard", "share", "cpu"} <= set(d["shards"][0])
    assert d["hottest"]["top_keys"][0]["share"] > 0


def test_mitigations_cool_the_hot_shard(recorded):
    prof, parts = recorded["scarab-recs"]
    part = parts[0]
    before = predict(prof, part)
    split = predict(prof, part, mitigations=Mitigations(split_keys=20, split_into=16))
    assert split.after.max_over_mean < before.max_over_mean
    assert split.after.shares.sum() == pytest.approx(1.0)  # splitting moves load, keeps it
    cached = predict(prof, part, mitigations=Mitigations(cache_hit=0.9, hot_keys=50))
    removed = 1 - cached.after.shares.sum()
    expected = 0.9 * 0.9 * prof.head_counts[:50].sum() / prof.events  # reads x hit x hot share
    assert removed == pytest.approx(expected)
    rep = predict(prof, part, mitigations=Mitigations(replicas=3))
    assert rep.after.shares == pytest.approx(before.shares * (0.1 + 0.9 / 3))


def test_predict_refuses_what_it_cannot_model(web07_profile):
    part = make_partitioner("kafka", 16, key_type="bigint")
    with pytest.raises(InputError, match="coalescing needs rps and capacity"):
        predict(web07_profile, part, mitigations=Mitigations(coalesce=True))
    with pytest.raises(InputError, match="cache_ttl_s does not apply to predict"):
        predict(web07_profile, part, mitigations=Mitigations(cache_ttl_s=1.0))


MITIGATIONS = [
    Mitigations(),
    Mitigations(replicas=3),
    Mitigations(cache_hit=0.5),
    Mitigations(split_keys=10, split_into=8),
    Mitigations(split_keys=10, split_into=8, replicas=3, cache_hit=0.5),
    Mitigations(replicas=5, coalesce=True, hot_keys=50),
    Mitigations(split_keys=3, split_into=2, replicas=2, cache_hit=0.9, coalesce=True, hot_keys=20),
]


@pytest.mark.parametrize("store", [("kafka", 64), ("cassandra", 12), ("jump", 7)])
@pytest.mark.parametrize("mitigations", MITIGATIONS, ids=lambda w: w.text())
def test_listed_keys_never_add_up_to_more_than_their_shard(web07_profile, store, mitigations):
    part = make_partitioner(store[0], store[1], key_type="bigint")
    pred = predict(web07_profile, part, rps=3000, capacity=400, mitigations=mitigations)
    for p in (pred, pred.after) if pred.after is not None else (pred,):
        listed = sum(share for _, share in p.hottest_keys)
        assert 0 < listed <= p.shares[p.hottest] + 1e-12, (p.basis, listed)


def test_key_shares_after_are_per_node_like_the_shards(web07_profile):
    """Closed forms: writes reach every replica, the reads a cache leaves reach one of R."""
    prof = web07_profile
    part = make_partitioner("kafka", 64, key_type="bigint")
    read, kept, r = 0.9, 0.5, 3  # the default read share (the profile has no operations)
    pred = predict(prof, part, mitigations=Mitigations(replicas=r, cache_hit=0.5, hot_keys=10))
    count = dict(zip(prof.head_keys, prof.head_counts, strict=True))
    rank = {k: i for i, k in enumerate(prof.head_keys)}
    for key, share in pred.after.hottest_keys:
        hot = rank[key] < 10
        per_event = (1 - read) + read * (kept if hot else 1.0) / r
        assert share == pytest.approx(count[key] / prof.events * per_event)
    # the total: every event at (1 - read) + read / R, less the reads the cache absorbs
    hot_share = prof.head_counts[:10].sum() / prof.events
    total = (1 - read) + read / r - read * (1 - kept) / r * hot_share
    assert pred.after.shares.sum() == pytest.approx(total)


def test_after_uniform_band_is_scaled_to_the_load_left(web07_profile):
    part = make_partitioner("kafka", 64, key_type="bigint")
    pred = predict(web07_profile, part, mitigations=Mitigations(replicas=3, cache_hit=0.5))
    total = pred.after.shares.sum()
    assert pred.after.uniform_low == pytest.approx(pred.uniform_low * total)
    assert pred.after.uniform_high == pytest.approx(pred.uniform_high * total)
    assert pred.after.uniform_max_over_mean == pytest.approx(pred.uniform_max_over_mean)
    # the after shares are compared against a band on their own basis
    assert pred.after.uniform_high < pred.uniform_high


def test_saturated_shards_and_the_rps_at_full_cpu(web07_profile):
    part = make_partitioner("kafka", 64, key_type="bigint")
    pred = predict(web07_profile, part, rps=3000, capacity=100)
    cpu = 3000 * pred.shares / 100
    assert set(pred.saturated) == set(np.flatnonzero(cpu > 1).tolist()) and pred.saturated
    assert pred.saturated[0] == pred.hottest
    assert list(cpu[list(pred.saturated)]) == sorted(cpu[list(pred.saturated)], reverse=True)
    assert pred.max_rps == pytest.approx(100 / pred.shares.max())
    assert predict(web07_profile, part, rps=0.999 * pred.max_rps, capacity=100).saturated == ()
    d = pred.to_dict()
    assert d["saturated"] == list(pred.saturated) and d["max_rps"] == pred.max_rps
    assert "saturated" not in predict(web07_profile, part).to_dict()


def test_split_beyond_the_head_says_how_many_keys_were_split(web07_profile):
    part = make_partitioner("kafka", 64, key_type="bigint")
    n_head = len(web07_profile.head_keys)
    asked = predict(web07_profile, part,
                    mitigations=Mitigations(split_keys=10 * n_head, split_into=8))
    done = predict(web07_profile, part, mitigations=Mitigations(split_keys=n_head, split_into=8))
    assert asked.after.shares == pytest.approx(done.after.shares)
    assert asked.whatif["split_hot"] == f"{10 * n_head}:8"
    assert asked.whatif["split_keys_effective"] == n_head
    assert asked.whatif["text"].startswith(f"top {n_head} keys split")
    assert len(asked.whatif["notes"]) == 1 and f"only the top {n_head}" in asked.whatif["notes"][0]
    assert done.whatif["notes"] == []


def test_coalescing_leaves_each_key_one_read_per_dead_time(web07_profile):
    """Closed form (module notes): a node's reads of a key at rate lambda, each in flight for
    one service time 1/capacity, keep 1 / (1 + lambda / capacity) of them."""
    prof = web07_profile
    part = make_partitioner("kafka", 64, key_type="bigint")
    rps, capacity, read, r = 3000.0, 400.0, 0.9, 2
    pred = predict(prof, part, rps=rps, capacity=capacity,
                   mitigations=Mitigations(replicas=r, coalesce=True))
    count = dict(zip(prof.head_keys, prof.head_counts, strict=True))
    for key, share in pred.after.hottest_keys:
        rate = rps * count[key] / prof.events * read / r
        per_event = (1 - read) + read / (1 + rate / capacity) / r
        assert share == pytest.approx(count[key] / prof.events * per_event)
    rate = rps * prof.head_counts / prof.events * read / r
    merged = np.sum(prof.head_counts * read * (rate / capacity) / (1 + rate / capacity))
    assert pred.whatif["coalesced_share"] == pytest.approx(merged / prof.events)
    assert pred.whatif["coalesce"] is True and "at least" in pred.whatif["notes"][-1]


def test_coalesced_fraction_matches_the_event_loop():
    """Independent reference: the simulator's event loop (sim.queues.serve) coalescing one
    key's Poisson reads, each in service for 1/capacity, keeps 1 / (1 + lambda / capacity) of
    them, the fraction predict uses."""
    from hotshard.sim.queues import serve

    rng = np.random.default_rng(3)
    capacity = 400.0
    for rate in (40.0, 400.0, 2000.0):
        arrivals = np.cumsum(rng.exponential(1 / rate, 200_000))
        served = serve(arrivals, np.full(arrivals.size, 1 / capacity),
                       keys=np.zeros(arrivals.size, dtype=np.int64))
        kept = 1 - served.coalesced.mean()
        assert kept == pytest.approx(1 / (1 + rate / capacity), rel=0.01)
