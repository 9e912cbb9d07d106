"""Generated workloads: reproducible, faithful to the profile, scenarios applied."""

import numpy as np
import pyarrow.parquet as pq
import pytest

from hotshard.errors import InputError
from hotshard.profile.count import count_profile
from hotshard.profile.fit import fit_power_law
from hotshard.workload.generate import parse_dist, plan_workload, verify_file, verify_generated
from hotshard.workload.messages import make_chunk, write_events
from hotshard.workload.profile_sampler import op_mix_by_key
from hotshard.workload.timing import Arrivals, parse_event
from tests.conftest import shared, trace_profile


@pytest.fixture(scope="module")
def orm():
    return trace_profile("orm-busy")


def test_round_trip_keeps_head_in_band_and_tail_alpha(tmp_path, orm):
    plan = plan_workload(profile=orm, dist=None, events=int(orm.events), seed=3)
    out = tmp_path / "gen.parquet"
    write_events(plan, str(out), fmt="parquet", workers=1)
    again = count_profile([str(out)], key="channel_id")
    assert again.events == orm.events
    # every original head key's count within its binomial band (Bonferroni over 500 keys)
    report = verify_file(orm, str(out))
    assert report.passed, report.to_dict()
    regenerated = dict(zip(again.head_keys, again.head_counts, strict=True))
    p = orm.head_counts / orm.events
    n = orm.events
    z = 4.75  # two-sided 1e-3 / 500 keys
    for key, share in zip(orm.head_keys[:100], p[:100], strict=True):
        got = regenerated.get(key, 0)
        assert abs(got - n * share) <= z * np.sqrt(n * share * (1 - share)) + 0.5
    # tail alpha: the regenerated tail (keys outside the new profile's head, below its smallest
    # head count) refitted on the original xmin. Both estimates carry sampling noise, so they
    # may differ by their combined standard error; 3 of those fail with probability 0.3%.
    pl = orm.tail.power_law
    xmax = int(again.head_counts.min())
    head = set(again.head_keys)
    table = pq.read_table(out, columns=["channel_id"]).column(0).to_numpy()
    keys, counts = np.unique(table, return_counts=True)
    tail_counts = counts[[str(k) not in head for k in keys]]
    refit = fit_power_law(tail_counts, xmin=pl["xmin"], xmax=xmax)
    combined = np.hypot(pl["alpha_se"], refit.alpha_se)
    assert abs(refit.alpha - pl["alpha"]) <= 3 * combined


def test_verify_rejects_a_uniform_workload(tmp_path, orm):
    plan = plan_workload(profile=None, dist=f"uniform:{int(orm.keys)}", events=int(orm.events),
                         seed=1)
    out = tmp_path / "uniform.parquet"
    write_events(plan, str(out), fmt="parquet")
    assert not verify_file(orm, str(out)).passed


def test_chunks_depend_only_on_seed_and_index(orm):
    plan = plan_workload(profile=orm, dist=None, events=5000, seed=9)
    small = plan.__class__(**{**plan.__dict__, "chunk_rows": 1000})
    assert make_chunk(small, 3).equals(make_chunk(small, 3))
    assert not make_chunk(small, 3).equals(make_chunk(small, 4))


def test_byte_identical_for_any_workers(tmp_path, orm):
    plan = plan_workload(profile=orm, dist=None, events=50_000, seed=5)
    plan = plan.__class__(**{**plan.__dict__, "chunk_rows": 8192})
    for fmt in ("parquet", "csv"):
        a, b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
        write_events(plan, str(a), fmt=fmt, workers=1)
        write_events(plan, str(b), fmt=fmt, workers=2)
        assert a.read_bytes() == b.read_bytes()


def test_message_ids_are_time_ordered_and_unique(orm):
    plan = plan_workload(profile=orm, dist=None, events=20_000, seed=2, rate=5000)
    t = make_chunk(plan, 0)
    ids = t.column("message_id").to_numpy()
    assert np.all(np.diff(ids) > 0)
    ts = t.column("timestamp").cast("int64").to_numpy()
    assert (ts[-1] - ts[0]) / 1000 == pytest.approx(20_000 / 5000, rel=0.01)


def test_hot_event_takes_its_share_in_its_window(orm):
    event = parse_event("4711:0.4:1s:3s")
    plan = plan_workload(profile=orm, dist=None, events=40_000, seed=4, rate=10_000,
                         hot_events=(event,))
    t = make_chunk(plan, 0)
    offs = (t.column("timestamp").cast("int64").to_numpy() - plan.start_ms) / 1000
    hot = t.column("channel_id").to_numpy() == 4711
    inside = (offs >= 1) & (offs < 3)
    own = hot[~inside].mean()  # 4711's own traffic outside the event (it may be a real key)
    expected = 0.4 + 0.6 * own
    share = hot[inside].mean()
    assert abs(share - expected) < 5 * np.sqrt(expected * (1 - expected) / inside.sum()) + own
    assert own < 0.01


def test_diurnal_arrivals_follow_the_curve():
    arr = Arrivals(rate=10.0, diurnal_amplitude=0.5)
    t = arr.times(np.arange(0, 864_000), np.full(864_000, 0.5))
    assert t[-1] == pytest.approx(86_400, rel=1e-3)  # a day of events at mean rate 10/s
    per_hour = np.bincount((t // 3600).astype(int), minlength=24)[:24]
    assert per_hour.max() / per_hour.min() == pytest.approx(3.0, rel=0.1)  # (1+.5)/(1-.5)


def test_sizes_follow_profile_quantiles():
    prof = trace_profile("cloudphysics", size="size", op="op")
    plan = plan_workload(profile=prof, dist=None, events=200_000, seed=1)
    sizes = make_chunk(plan, 0).column("size").to_numpy()
    for q, v in prof.sizes["quantiles"].items():
        assert np.quantile(sizes, float(q)) == pytest.approx(v, rel=0.02)
    ops = make_chunk(plan, 0).column("op").to_pylist()
    share_2a = ops.count("2a") / len(ops)
    expected = prof.operations["2a"].events / prof.events
    assert abs(share_2a - expected) < 5 * np.sqrt(expected * (1 - expected) / len(ops))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"dist": "gauss:1"}, "unknown distribution 'gauss'"),
    ({"dist": "zipf:0:100"}, "s must be > 0"),
    ({"dist": "zipf:abc:100"}, "must be a number"),
    ({"dist": "zipf:1.1"}, "takes 2"),
    ({"dist": "uniform:10", "events": 0}, "events must be > 0"),
    ({"dist": "uniform:10", "events": None}, "say how many events"),
    ({"dist": None}, "either a profile or a distribution"),
])
def test_bad_plans(kwargs, message):
    args = {"profile": None, "dist": "uniform:10", "events": 10, "seed": 1, **kwargs}
    with pytest.raises(InputError, match=message):
        plan_workload(**args)


def test_parse_dist_builds_each_family():
    assert parse_dist("latest:100").describe()["distribution"] == "latest"
    assert parse_dist("hotspot:0.1:0.9:1e3").describe()["n_keys"] == 1000
    assert parse_dist("scrambled_zipfian:1e6").n_keys == 10**6


def test_tail_keys_follow_the_recorded_placement(tmp_path):
    from hotshard.shards.partitioners import make_partitioner

    kafka = make_partitioner("kafka", 16, key_type="bigint")
    prof = count_profile([str(shared("traces", "web12.parquet"))], key="key",
                         placements=[kafka])
    recorded = np.asarray(prof.placement["kafka/16"].tail_events_by_shard, dtype=float)
    recorded /= recorded.sum()
    n = 400_000
    plan = plan_workload(profile=prof, dist=None, events=n, seed=8, follow=kafka)
    ids = make_chunk(plan.__class__(**{**plan.__dict__, "chunk_rows": n}), 0)
    ids = ids.column("channel_id").to_numpy()
    head = {int(k) for k in prof.head_keys}
    tail = ids[~np.isin(ids, list(head))]
    keys, counts = np.unique(tail, return_counts=True)
    got = np.bincount(kafka.shard_of([str(k) for k in keys]), weights=counts, minlength=16)
    got /= got.sum()
    # what the sampler allotted: each shard's probability mass among tail draws
    from hotshard.workload.profile_sampler import from_profile

    smp = from_profile(prof, follow=kafka)
    w = smp.weights()[smp.head_size:]
    names = smp.ids(np.arange(smp.head_size, smp.n_keys))
    allotted = np.bincount(kafka.shard_of([str(k) for k in names]), weights=w, minlength=16)
    allotted /= allotted.sum()
    # allotment matches the record up to one tail key's weight per shard
    assert np.max(np.abs(allotted - recorded)) <= w.max() / w.sum() + 1e-12
    # draws land by shard as binomial(n_tail, allotted share): within 5 sd on every shard
    sd = np.sqrt(allotted * (1 - allotted) / tail.size)
    assert np.all(np.abs(got - allotted) < 5 * sd)
    with pytest.raises(InputError, match="recorded no tail placement"):
        plan_workload(profile=prof, dist=None, events=10, seed=1,
                      follow=make_partitioner("kafka", 8, key_type="bigint"))


def test_profiles_with_operations_keep_the_overall_keys_and_each_keys_mix():
    # keys come from the whole profile, then each key's operation: drawing every operation
    # from its own distribution invented keys and lost hot ones (verify failed on cloudphysics)
    prof = trace_profile("cloudphysics", op="op")
    plan = plan_workload(profile=prof, dist=None, events=400_000, seed=4)
    table = make_chunk(plan, 0)
    keys = table.column("channel_id").to_numpy()
    ops = np.asarray(table.column("op").to_pylist())
    n = keys.size
    for rank in range(5):  # the hottest keys overall keep their shares (binomial, 5 sd)
        p = prof.head_counts[rank] / prof.events
        seen = (keys == int(prof.head_keys[rank])).mean()
        assert abs(seen - p) < 5 * np.sqrt(p * (1 - p) / n), rank
    writes = prof.operations["2a"]
    hot_write = writes.head_keys[0]  # the hottest written key, also in the overall head
    rank = prof.head_keys.index(hot_write)
    mine = keys == int(hot_write)
    expected = writes.head_counts[0] / prof.head_counts[rank]
    got = (ops[mine] == "2a").mean()
    assert abs(got - expected) <= 5 * np.sqrt(expected * (1 - expected) / mine.sum())


def test_op_mix_rows_are_distributions():
    prof = trace_profile("cloudphysics", op="op")
    names, head_cum, tail_cum = op_mix_by_key(prof)
    assert set(names) == set(prof.operations)
    assert head_cum.shape == (len(prof.head_keys), len(names))
    assert np.allclose(head_cum[:, -1], 1.0) and tail_cum[-1] == pytest.approx(1.0)
    assert np.all(np.diff(head_cum, axis=1) >= -1e-12)
    # in expectation the mix reproduces each operation's total events
    head = np.diff(np.concatenate([np.zeros((head_cum.shape[0], 1)), head_cum], axis=1),
                   axis=1) * prof.head_counts[:, None]
    tail = np.diff(np.concatenate([[0.0], tail_cum])) * prof.tail.events
    for j, op in enumerate(names):
        assert head[:, j].sum() + tail[j] == pytest.approx(prof.operations[op].events, rel=1e-9)


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90), ("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("1h30m", 5400),
    ("5m33s", 333), ("1.5h", 5400), ("500ms", 0.5), ("1s250ms", 1.25),
])
def test_durations_read_as_they_are_printed(text, seconds):
    from hotshard.workload.timing import format_duration, parse_duration

    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds  # what we print reads back


@pytest.mark.parametrize("text", ["", "m", "1x", "1m2", "30s1m2", "-1s", "abc", "15mss", "ms"])
def test_malformed_durations_are_refused(text):
    from hotshard.workload.timing import parse_duration

    with pytest.raises(InputError, match="not a duration"):
        parse_duration(text)


def test_long_durations_print_every_unit():
    from hotshard.workload.timing import format_duration

    assert format_duration(93780) == "1d2h3m"


def test_verify_judges_keys_expected_a_fraction_of_a_time_exactly(tmp_path, web07_profile):
    # extend-scaled to 1e9 keys, head keys are expected far below once in 1e5 events: seeing
    # one of them once is ordinary (a normal band called it a failure)
    prof = web07_profile.scaled(keys=1e9, key_scaling="extend")
    out = tmp_path / "x.parquet"
    for seed in (0, 1, 3):
        plan = plan_workload(profile=prof, dist=None, events=100_000, seed=seed)
        write_events(plan, str(out), fmt="parquet")
        assert verify_file(prof, str(out)).checks[0].passed, seed


def test_verify_generated_reads_how_the_file_was_made(tmp_path, orm):
    """The library behind ``generate --verify``: a file made with a rescaled key space and a big
    event verifies with no option repeated (its metadata says keys, scaling and windows); an
    option that contradicts the record is refused, not judged."""
    plan = plan_workload(profile=orm, dist=None, events=60_000, seed=6, keys=2 * int(orm.keys),
                         key_scaling="extend", rate=1000,
                         hot_events=(parse_event(f"{orm.head_keys[0]}:0.3:10s:20s"),))
    out = tmp_path / "e.parquet"
    write_events(plan, str(out), fmt="parquet", workers=1)
    report = verify_generated(orm, str(out))
    assert report.passed, report.to_dict()
    assert report.windows_left_out == 1
    assert 0 < report.events < 60_000  # the event's window left out
    with pytest.raises(InputError, match="generated with key_scaling extend, not dilute"):
        verify_generated(orm, str(out), key_scaling="dilute")
