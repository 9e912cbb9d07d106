"""Predicted per-shard load against the truth computed from every key of real traces."""

import numpy as np
import pyarrow.parquet as pq
import pytest

from hotshard.errors import InputError
from hotshard.profile.count import count_profile
from hotshard.shards.partitioners import make_partitioner
from hotshard.shards.predict import WhatIf, predict
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


def test_whatifs_cool_the_hot_shard(recorded):
    prof, parts = recorded["scarab-recs"]
    part = parts[0]
    before = predict(prof, part)
    split = predict(prof, part, whatif=WhatIf(split_keys=20, split_into=16))
    assert split.after.max_over_mean < before.max_over_mean
    assert split.after.shares.sum() == pytest.approx(1.0)  # splitting moves load, keeps it
    cached = predict(prof, part, whatif=WhatIf(cache_hit=0.9, hot_keys=50))
    removed = 1 - cached.after.shares.sum()
    expected = 0.9 * 0.9 * prof.head_counts[:50].sum() / prof.events  # reads x hit x hot share
    assert removed == pytest.approx(expected)
    rep = predict(prof, part, whatif=WhatIf(replicas=3))
    assert rep.after.shares == pytest.approx(before.shares * (0.1 + 0.9 / 3))


def test_bad_whatifs():
    with pytest.raises(InputError, match="replicas must be"):
        WhatIf(replicas=0)
    with pytest.raises(InputError, match=r"cache_hit must be a fraction in \[0, 1\], got 1.5"):
        WhatIf(cache_hit=1.5)
