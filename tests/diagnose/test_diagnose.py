"""Diagnosis of the incident and of the cases that look like it but are not it.

Each case is evidence an expert would recognise: a pure coordinated-omission test (closed
loop, even shards), a slow node (even requests, one shard paying more CPU per request), a
UUID-keyed store (no semantic hot spot: uniform keys are right). Per-shard counts come from
seeded multinomial draws, so "even" means what uniform keys really give, noise included.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hotshard.diagnose import CAUSES
from hotshard.diagnose.engine import diagnose
from hotshard.diagnose.evidence import BAND_FALSE_ALARM, load_spread
from hotshard.observations import Observations
from hotshard.profile.count import count_profile
from hotshard.profile.document import Profile
from hotshard.profile.shape import profile_shape
from tests.conftest import ROOT, trace_profile

EXAMPLES = ROOT / "examples"
SHARDS = 64
WINDOW = 600.0


def _obs(label, rate, *, requests, cpu, p99_by_shard=None, nodes=None, **fields):
    shards = []
    for i, (n, c) in enumerate(zip(requests, cpu, strict=True)):
        s = {"id": str(i), "requests": int(n), "cpu": float(c)}
        if p99_by_shard is not None:
            s["p99_ms"] = float(p99_by_shard[i])
        if nodes is not None:
            s["node"] = nodes[i]
        shards.append(s)
    return Observations.from_dict({"format": "hotshard.observations/1", "label": label,
                                   "rate_rps": rate, "duration_s": WINDOW, "shards": shards,
                                   **fields})


def _even(rng, rate, cost_ms=5.0):
    """Uniform keys: a multinomial deal of the window's requests; CPU = requests x cost."""
    n = rng.multinomial(int(rate * WINDOW), np.full(SHARDS, 1 / SHARDS))
    return n, n * cost_ms / 1000 / WINDOW


def verdicts(d):
    return {f.cause: f.verdict for f in d.ranking}


# -- the incident -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def incident():
    prod = Observations.load(EXAMPLES / "incident-production.json")
    test = Observations.load(EXAMPLES / "incident-loadtest.json")
    profile = Profile.load(EXAMPLES / "incident.profile.json")
    return prod, test, profile


def test_incident_key_skew_first_and_every_other_suspect_contradicted(incident):
    prod, test, profile = incident
    d = diagnose(prod, test, profile=profile)
    assert d.top.cause == "key-skew" and d.top.verdict == "fits"
    v = verdicts(d)
    for cause in ("coordinated-omission", "cache-warmth", "network", "payload-size",
                  "hot-node", "no-hot-spot"):
        assert v[cause] == "contradicted", (cause, d.finding(cause).evidence)
    assert set(v) == set(CAUSES)
    # each rejection carries its reason, with the numbers
    co = " ".join(d.finding("coordinated-omission").evidence)
    assert "closed-loop" in co and "more than production" in co
    assert "cannot put" in co and "shard 57" in co
    assert "colder" in " ".join(d.finding("cache-warmth").evidence)
    net = " ".join(d.finding("network").evidence)
    assert "1.1 ms" in net and "every shard" in net
    assert "every shard alike" in " ".join(d.finding("payload-size").evidence)
    assert "busy because it serves more requests" in " ".join(d.finding("hot-node").evidence)


def test_incident_evidence_numbers_are_the_files_numbers(incident):
    prod, test, profile = incident
    d = diagnose(prod, test, profile=profile)
    req = np.array(prod.shard_requests, float)
    hot = int(np.argmax(req))
    text = d.finding("key-skew").evidence[0]
    assert f"shard {prod.shards[hot].id} served {100 * req[hot] / req.sum():.1f}%" in text
    assert f"{req[hot] / req.mean():.1f}x the mean" in text
    gap = prod.latency_ms.p99 - test.latency_ms.p99
    assert f"{gap:.0f} ms more" in " ".join(d.finding("network").evidence)


def test_incident_recommends_mitigations_with_predicted_numbers(incident):
    from hotshard.mitigations import Mitigations
    from hotshard.shards.partitioners import make_partitioner
    from hotshard.shards.predict import predict

    prod, test, profile = incident
    d = diagnose(prod, test, profile=profile, partitioner="kafka")
    split = next(r for r in d.recommendations if r.action.startswith("Split"))
    # the numbers are predict's, on the same profile and shard count
    ref = predict(profile, make_partitioner("kafka", SHARDS, key_type="bigint"),
                  mitigations=Mitigations(split_keys=10, split_into=8))
    if ref.timeline is not None:  # a profile with timelines: judged in predict's peak window
        ref = ref.timeline.peak
    assert split.hottest_before == pytest.approx(float(ref.shares.max()))
    assert split.hottest_after == pytest.approx(float(ref.after.shares.max()))
    assert split.hottest_after < split.hottest_before / 2
    both = next(r for r in d.recommendations if r.action == "Both")
    assert both.hottest_after < split.hottest_after


def test_without_a_profile_or_test_it_still_finds_the_skew_and_says_what_is_missing(incident):
    prod, _, _ = incident
    d = diagnose(prod)
    assert d.top.cause == "key-skew" and d.top.verdict == "fits"
    co = d.finding("coordinated-omission")
    assert co.verdict == "cannot judge" and any("load test" in m for m in co.missing)
    assert any(r.action == "Profile production's keys" for r in d.recommendations)
    assert any("no load test" in n for n in d.notes)


@pytest.mark.slow
def test_uniform_band_holds_for_uniform_keys_at_its_false_alarm_rate():
    """The band's claim, checked by simulation: uniform deals of N requests over k shards
    leave the band at most BAND_FALSE_ALARM of the time (Bonferroni is conservative)."""
    gen = np.random.default_rng(7)
    trials, outside = 2000, 0
    for _ in range(trials):
        n = gen.multinomial(50_000, np.full(SHARDS, 1 / SHARDS))
        obs = _obs("u", 100, requests=n, cpu=np.full(SHARDS, 0.1))
        outside += load_spread(obs).outside
    # binomial(2000, 0.001): P(X >= 8) < 1e-4 even at the band's nominal rate
    assert outside / trials <= BAND_FALSE_ALARM + 3.5 * math.sqrt(BAND_FALSE_ALARM / trials)


def test_cpu_only_spread_of_95_against_20_is_not_noise():
    """A dashboard with CPU per shard and nothing else: 95% against 20% over 64 shards."""
    cpu = [0.2] * (SHARDS - 1) + [0.95]
    doc = {"format": "hotshard.observations/1", "label": "production",
           "shards": [{"id": str(i), "cpu": c} for i, c in enumerate(cpu)]}
    obs = Observations.from_dict(doc)
    s = load_spread(obs)
    assert s.basis == "cpu" and s.outside
    # uniform keys give max/mean m only over fewer than z^2 (k-1) / (m-1)^2 requests
    from scipy.stats import norm

    m, p = 0.95 / np.mean(cpu), 1 / SHARDS
    z = norm.isf(BAND_FALSE_ALARM / SHARDS)
    assert s.max_over_mean == pytest.approx(m)
    assert s.requests_needed == pytest.approx(z**2 * (1 - p) / p / (m - 1) ** 2)
    assert s.requests_needed < 200
    d = diagnose(obs)
    assert d.top.cause == "key-skew" and d.top.verdict == "fits"
    assert any("CPU" in n for n in d.notes)


# -- coordinated omission -----------------------------------------------------------------------
def test_pure_coordinated_omission(rng):
    """A closed-loop test at 2000 req/s saw p99 40 ms; production at 3000 req/s is 350 ms on
    every shard, with shards as even as uniform keys make them."""
    n_p, cpu_p = _even(rng, 3000)
    n_t, cpu_t = _even(rng, 2000)
    prod = _obs("production", 3000, requests=n_p, cpu=cpu_p,
                p99_by_shard=rng.uniform(320, 380, SHARDS), latency_ms={"p50": 20, "p99": 350})
    test = _obs("load test", 2000, requests=n_t, cpu=cpu_t, model="closed",
                key_generator="uniform", latency_ms={"p50": 6, "p99": 40})
    d = diagnose(prod, test)
    assert d.top.cause == "coordinated-omission" and d.top.verdict == "fits"
    v = verdicts(d)
    assert v["key-skew"] == "contradicted" and v["hot-node"] == "contradicted"
    assert v["network"] == "contradicted"  # 310 ms is not a millisecond hop
    assert any(r.action == "Re-run the test open-loop" for r in d.recommendations)


def test_an_open_loop_test_rules_coordinated_omission_out(rng):
    n, cpu = _even(rng, 3000)
    prod = _obs("production", 3000, requests=n, cpu=cpu, latency_ms={"p99": 350})
    test = _obs("load test", 2000, requests=n, cpu=cpu, model="open",
                latency_ms={"p99": 40}, service_time_ms={"p99": 39})
    assert diagnose(prod, test).finding("coordinated-omission").verdict == "contradicted"


# -- a hot node ---------------------------------------------------------------------------------
def test_hot_node_even_requests_one_shard_pays_more_cpu_per_request(rng):
    n_p, cpu_p = _even(rng, 3000)
    n_t, cpu_t = _even(rng, 5000)
    cpu_p[9] *= 3.6  # shard 9's machine: the same requests cost 3.6x the CPU
    cpu_t[9] *= 3.6  # and in the test with uniform keys too
    prod = _obs("production", 3000, requests=n_p, cpu=np.minimum(cpu_p, 1.0),
                latency_ms={"p99": 300})
    test = _obs("load test", 5000, requests=n_t, cpu=np.minimum(cpu_t, 1.0), model="open",
                key_generator="uniform", latency_ms={"p99": 40})
    d = diagnose(prod, test)
    assert d.top.cause == "hot-node" and d.top.verdict == "fits"
    assert d.finding("key-skew").verdict == "contradicted"
    text = " ".join(d.top.evidence)
    assert "shard 9" in text and "in the load test" in text
    assert any(r.action.startswith("Look at the node hosting shard 9")
               for r in d.recommendations)


def test_hot_node_one_machine_slow_on_all_its_shards(rng):
    n, cpu = _even(rng, 3000)
    nodes = [f"db-{i // 4}" for i in range(SHARDS)]  # 4 shards per node
    cpu[12:16] *= 2.5  # every shard on db-3
    prod = _obs("production", 3000, requests=n, cpu=cpu, nodes=nodes)
    d = diagnose(prod)
    assert d.top.cause == "hot-node" and d.top.verdict == "fits"
    assert "node db-3" in d.top.evidence[0]


# -- no semantic hot spot -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def uuid_profile(tmp_path_factory):
    """A UUID-keyed store: every record's key a random UUID, read once or twice."""
    import uuid

    gen = np.random.default_rng(11)
    keys = [str(uuid.UUID(bytes=gen.bytes(16), version=4)) for _ in range(50_000)]
    reads = np.repeat(keys, gen.integers(1, 3, len(keys)))
    path = tmp_path_factory.mktemp("uuid") / "events.parquet"
    pq.write_table(pa.table({"record_id": gen.permutation(reads)}), path)
    return count_profile([str(path)], key="record_id", top_k=100)


def test_uuid_store_uniform_keys_are_right(rng, uuid_profile):
    shape = profile_shape(uuid_profile)
    assert shape.uuid_keys and shape.near_uniform
    n_p, cpu_p = _even(rng, 3000)
    n_t, cpu_t = _even(rng, 3000)
    prod = _obs("production", 3000, requests=n_p, cpu=cpu_p, latency_ms={"p99": 42})
    test = _obs("load test", 3000, requests=n_t, cpu=cpu_t, model="open",
                key_generator="uniform", latency_ms={"p99": 40})
    d = diagnose(prod, test, profile=uuid_profile)
    assert d.top.cause == "no-hot-spot" and d.top.verdict == "fits"
    assert d.finding("key-skew").verdict == "contradicted"
    assert "UUID-like" in " ".join(d.top.evidence)
    assert any(r.action == "Keep uniform synthetic keys" for r in d.recommendations)


def test_the_real_non_skewed_control_trace_has_no_hot_spot():
    """corda-vault (shared/data): every key read once or twice, a real store without hot keys."""
    shape = profile_shape(trace_profile("corda-vault"))
    assert shape.near_uniform and shape.top1pct_vs_uniform < 2
    skewed = profile_shape(trace_profile("web07"))
    assert not skewed.near_uniform


# -- bad input ----------------------------------------------------------------------------------
def test_missing_fields_give_cannot_judge_never_an_error():
    bare = Observations.from_dict({"format": "hotshard.observations/1", "label": "production"})
    d = diagnose(bare, Observations.from_dict({"format": "hotshard.observations/1",
                                               "label": "test"}))
    assert {f.verdict for f in d.ranking} == {"cannot judge"}
    for f in d.ranking:
        assert f.missing, f.cause


def test_report_roles_find_production_and_skip_a_mitigated_run_for_baseline(incident):
    from dataclasses import replace

    from hotshard.report.runs import assign_roles

    prod, test, _ = incident
    fixed = replace(prod, label="production, mitigated",
                    extra={"mitigations": {"split": 4, "coalesce": True}})
    roles = assign_roles([fixed, test, prod])
    assert roles.production is prod and roles.baseline is test
    assert roles.mitigated == (fixed,)

def test_swapped_arguments_are_put_right_with_a_note(incident):
    prod, test, profile = incident
    d = diagnose(test, prod, profile=profile)
    assert d.production == prod.label and d.baseline == test.label
    assert d.top.cause == "key-skew" and d.top.verdict == "fits"
    assert any("given first but is the load test" in n for n in d.notes)


def test_nothing_that_explains_a_gap_fits_when_there_is_no_gap(incident):
    _, test, _ = incident
    d = diagnose(test, test)
    v = verdicts(d)
    for cause in ("coordinated-omission", "network", "payload-size", "cache-warmth"):
        assert v[cause] != "fits", (cause, d.finding(cause).evidence)


def test_json_numbers_carry_the_measurements(incident):
    prod, test, profile = incident
    d = diagnose(prod, test, profile=profile).to_dict()
    skew = next(f for f in d["ranking"] if f["cause"] == "key-skew")["numbers"]
    req = np.array(prod.shard_requests, float)
    assert skew["hottest_share"] == pytest.approx(req.max() / req.sum())
    assert skew["max_over_mean"] == pytest.approx(req.max() / req.mean())
    assert skew["uniform_band_max_over_mean"] < 1.1 < skew["max_over_mean"]
    net = next(f for f in d["ranking"] if f["cause"] == "network")["numbers"]
    assert net["cross_zone_rtt_ms"] == 1.1 and net["production_p99_ms"] == prod.latency_ms.p99


# -- what a reviewer's hand-written files showed ------------------------------------------------
def _cpu_only(cpus, **fields):
    return Observations.from_dict({"format": "hotshard.observations/1", "label": "production",
                                   "shards": [{"id": str(i), "cpu": c}
                                              for i, c in enumerate(cpus)], **fields})


def test_a_small_cpu_spread_is_neither_skew_nor_evenness():
    """CPU moves by points whatever the keys: 50% against 40% proves nothing either way."""
    for obs in (_cpu_only([0.5] + [0.4] * 7),
                _cpu_only([0.45] + [0.4] * 63, rate_rps=3000, duration_s=600)):
        f = diagnose(obs).finding("key-skew")
        assert f.verdict == "cannot judge", f.evidence
    assert diagnose(_cpu_only([0.41] * 8)).finding("key-skew").verdict == "contradicted"


def test_too_few_requests_cannot_rule_key_skew_out(rng):
    n = rng.multinomial(56, np.full(4, 0.25))
    prod = Observations.from_dict({"format": "hotshard.observations/1", "label": "production",
                                   "shards": [{"id": str(i), "requests": int(c)}
                                              for i, c in enumerate(n)]})
    d = diagnose(prod)
    assert d.finding("key-skew").verdict == "cannot judge"
    assert d.finding("no-hot-spot").verdict != "fits"
    assert not any(r.action == "Keep uniform synthetic keys" for r in d.recommendations)


def test_a_costly_key_is_not_a_slow_node(rng):
    """Shard 3 pays 3x CPU per request in production but normal CPU per request when the
    uniform test sends it other keys: the cost follows the keys."""
    n_p, cpu_p = _even(rng, 3000)
    n_t, cpu_t = _even(rng, 3000)
    cpu_p[3] *= 3
    prod = _obs("production", 3000, requests=n_p, cpu=cpu_p)
    test = _obs("load test", 3000, requests=n_t, cpu=cpu_t, model="open",
                key_generator="uniform")
    f = diagnose(prod, test).finding("hot-node")
    assert f.verdict == "contradicted" and "follows production's keys" in f.evidence[0]
    same_keys = _obs("replay", 3000, requests=n_p, cpu=cpu_p, model="open",
                     key_generator="profile")
    assert diagnose(prod, same_keys).finding("hot-node").evidence[-1].find("load test") < 0


def test_payload_judged_on_cpu_per_request(rng):
    n_p, cpu_p = _even(rng, 3000, cost_ms=10.0)
    n_t, cpu_t = _even(rng, 3000, cost_ms=5.0)
    prod = _obs("production", 3000, requests=n_p, cpu=cpu_p, payload_bytes_mean=400,
                latency_ms={"p99": 400})
    test = _obs("load test", 3000, requests=n_t, cpu=cpu_t, model="open",
                key_generator="uniform", payload_bytes_mean=200, latency_ms={"p99": 40})
    f = diagnose(prod, test).finding("payload-size")
    assert f.verdict == "fits" and "CPU per request grew 2.0" in " ".join(f.evidence)


def test_zero_rtt_and_huge_counts_are_handled():
    prod = Observations.from_dict({"format": "hotshard.observations/1", "label": "production",
                                   "latency_ms": {"p99": 50},
                                   "network": {"cross_zone_rtt_ms": 0}})
    test = Observations.from_dict({"format": "hotshard.observations/1", "label": "test",
                                   "model": "open", "latency_ms": {"p99": 40}})
    assert diagnose(prod, test).finding("network").verdict in ("fits", "contradicted")
    from hotshard.errors import ObservationsError

    with pytest.raises(ObservationsError, match="below 2\\^63"):
        Observations.from_dict({"format": "hotshard.observations/1", "label": "p",
                                "shards": [{"id": "0", "requests": 10**400}]})


def test_cache_warmth_sizes_the_cache_by_the_measured_curve_when_the_profile_has_one():
    """web07 profiled with its locality: an LRU that hits 39% of production's requests holds
    about 1% of its 20,484 keys (the measured curve: 0.391 at 204); Che's independent
    references would need several times that, since they miss production's bursts."""
    from hotshard.diagnose.evidence import uniform_cache_hit
    from hotshard.profile.count import count_profile
    from tests.conftest import shared

    profile = count_profile([str(shared("traces", "web07.parquet"))], key="key")
    size, hit, how = uniform_cache_hit(profile, 0.391, 1e6)
    assert how == "the profile's measured LRU curve"
    assert 180 < size < 230 and hit == pytest.approx(size / 1e6)
    from dataclasses import replace

    che_size, _, che = uniform_cache_hit(replace(profile, locality=None), 0.391, 1e6)
    assert che == "Che's approximation" and che_size > 2 * size


def test_a_p99_measured_at_the_server_beside_one_at_the_client_is_named_so():
    """Production's p99 from Prometheus (the service's own histogram) and the test's from
    drive (from each request's intended send) are not one quantity: the evidence says where
    each was measured."""
    from hotshard.diagnose.engine import diagnose
    from hotshard.observations import Observations

    prod = Observations.from_dict({
        "format": "hotshard.observations/1", "label": "production",
        "latency_ms": {"p50": 5, "p99": 800},
        "shards": [{"id": str(i), "requests": 100 if i else 900} for i in range(4)],
        "observe": {"source": "prometheus"}})
    test = Observations.from_dict({
        "format": "hotshard.observations/1", "label": "load test",
        "latency_ms": {"p50": 4, "p99": 40},
        "shards": [{"id": str(i), "requests": 300} for i in range(4)],
        "drive": {"target": "http://x", "sent": 1200}})
    text = " ".join(s for f in diagnose(prod, test).ranking for s in f.evidence)
    assert ("production's measured at the server (prometheus), the test's at the client "
            "(drive, from the intended send): not the same quantity") in text
