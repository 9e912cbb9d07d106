"""The assembled simulation: placement, reproducibility, caches and mitigations."""

from __future__ import annotations

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.mitigations import Mitigations
from hotshard.sim.arrivals import PoissonArrivals
from hotshard.sim.service_times import Exponential
from hotshard.sim.system import ServiceModel, simulate
from hotshard.workload import sampler as samplers
from hotshard.workload.profile_sampler import from_profile

SMALL = ServiceModel(shards=8, partitioner="kafka", service=Exponential(0.004),
                     arrivals=PoissonArrivals())


def test_same_seed_same_numbers(web07_profile):
    smp = from_profile(web07_profile)
    a = simulate(smp, rps=800, duration=60, model=SMALL, rng=3)
    b = simulate(smp, rps=800, duration=60, model=SMALL, rng=3)
    assert a.latency == b.latency and a.latency.count == a.requests
    assert a.to_observations().to_dict() == b.to_observations().to_dict()


def test_head_keys_land_where_predict_puts_them(web07_profile):
    from hotshard.shards.partitioners import make_partitioner
    from hotshard.shards.predict import predict

    smp = from_profile(web07_profile)
    res = simulate(smp, rps=2000, duration=300, model=SMALL, rng=1)
    part = make_partitioner("kafka", 8, key_type="bigint")
    shares = predict(web07_profile, part).shares
    seen = np.array([s.requests for s in res.shards]) / res.requests
    # multinomial noise on 6e5 requests is ~0.05 pp; the tail's random placement adds the
    # prediction's own sd: allow 5 of the larger
    sd = np.sqrt(shares * (1 - shares) / res.requests) + predict(web07_profile, part).sd
    assert np.all(np.abs(seen - shares) < 5 * sd)


def test_utilisation_is_load_times_service_time():
    res = simulate(samplers.uniform(1_000_000), rps=1000, duration=600, model=SMALL, rng=2)
    cpu = np.array([s.cpu for s in res.shards])
    # each shard: 125 req/s x 4 ms = 0.5. Relative noise: keys per shard (binomial over 1e6
    # keys) 0.26%, the sum of ~75,000 exponential services sqrt(2/75000) = 0.52%: sd ~0.003
    assert np.allclose(cpu, 0.5, atol=5 * 0.003)


def test_replicas_halve_the_hot_shards_reads():
    one = simulate(samplers.uniform(1000), rps=1000, duration=300, model=SMALL, rng=4,
                   read_share=1.0)
    two = simulate(samplers.uniform(1000), rps=1000, duration=300, model=SMALL, rng=4,
                   read_share=1.0, mitigations=Mitigations(replicas=2))
    ratio = np.mean([s.cpu for s in two.shards]) / np.mean([s.cpu for s in one.shards])
    assert ratio == pytest.approx(0.5, abs=0.02)  # reads only: each replica does half


def test_splitting_spreads_the_hottest_key(web07_profile):
    smp = from_profile(web07_profile)
    event = _event(web07_profile.head_keys[0], 0.5)
    hot = simulate(smp, rps=300, duration=120, model=SMALL, rng=5, hot_events=(event,))
    split = simulate(smp, rps=300, duration=120, model=SMALL, rng=5, hot_events=(event,),
                     mitigations=Mitigations(split_keys=1, split_into=8))
    assert max(s.cpu for s in hot.shards) > 0.25  # half the traffic on one shard
    assert max(s.cpu for s in split.shards) < 0.75 * max(s.cpu for s in hot.shards)


def test_coalescing_saves_the_work_of_reads_in_flight():
    # every request a read of one of two keys, at a load one worker cannot carry without it
    smp = samplers.uniform(2)
    model = ServiceModel(shards=1, partitioner="modulo", service=Exponential(0.01))
    plain = simulate(smp, rps=150, duration=60, model=model, rng=6, read_share=1.0)
    merged = simulate(smp, rps=150, duration=60, model=model, rng=6, read_share=1.0,
                      mitigations=Mitigations(coalesce=True))
    assert plain.shards[0].cpu > 0.99  # 1.5x overloaded
    assert merged.coalesced > 0.3 * merged.requests
    assert merged.percentiles()["p99"] < 0.1 * plain.percentiles()["p99"]


def test_cache_hit_rates_follow_popularity(web07_profile):
    model = ServiceModel(shards=8, partitioner="kafka", service=Exponential(0.004),
                         cache_size=200)
    skewed = simulate(from_profile(web07_profile), rps=500, duration=120, model=model, rng=7)
    uniform = simulate(samplers.uniform(int(web07_profile.keys)), rps=500, duration=120,
                       model=model, rng=7)
    # uniform keys: exactly capacity / keys per shard (Che is exact there)
    per_shard_keys = web07_profile.keys / 8
    assert uniform.cache_hit_rate == pytest.approx(200 / per_shard_keys, abs=0.01)
    assert skewed.cache_hit_rate > 3 * uniform.cache_hit_rate


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"rps": 0}, "rps must be > 0"),
    ({"duration": -1}, "duration must be > 0"),
    ({"read_share": 1.5}, "read_share must be in"),
    ({"rps": 1e9, "duration": 3600.0}, r"more than the 3e\+11 the simulator takes on"),
])
def test_bad_arguments(kwargs, message):
    args = {"rps": 10.0, "duration": 1.0, **kwargs}
    with pytest.raises(InputError, match=message):
        simulate(samplers.uniform(10), model=SMALL, **args)


def test_bad_models():
    with pytest.raises(InputError, match="shards must be >= 1"):
        ServiceModel(shards=0)
    with pytest.raises(InputError, match=r"must be >= 1 \(1: no replica\), got 0"):
        Mitigations(replicas=0)
    with pytest.raises(InputError, match="cache_ttl_s does not apply to simulate"):
        simulate(samplers.uniform(10), rps=10.0, duration=1.0, model=SMALL,
                 mitigations=Mitigations(cache_ttl_s=1.0))


def _event(key, share):
    from hotshard.workload.timing import HotEvent

    return HotEvent(str(key), share, 0.0, 1e9)
