"""The arrivals section and the timestamps generated from it: production's per-minute rate
and its burstiness (index of dispersion of counts) below the minute."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from hotshard.errors import ProfileError
from hotshard.profile.arrivals import ArrivalModel, dirichlet_alpha, idc
from hotshard.profile.count import count_profile
from hotshard.profile.time_counts import measure_arrivals
from hotshard.workload.generate import plan_workload
from hotshard.workload.messages import make_chunk
from tests.conftest import run_cli, shared


def test_idc_is_var_over_mean_of_window_counts():
    times = np.array([0.1, 0.2, 0.3, 1.5, 2.5, 2.6, 3.1, 5.0, 6.0, 7.0, 8.0, 9.9])
    counts = np.array([3, 1, 2, 1, 0, 1, 1, 1, 1, 1])
    assert idc(times, 1.0, 0.0, 10.0) == pytest.approx(counts.var() / counts.mean())
    assert idc(times, 2.0, 0.0, 10.0) is None  # fewer than ten windows


@pytest.mark.parametrize("alpha", [0.05, 0.5, 5.0])
def test_the_concentration_is_recovered_from_its_own_draws(alpha):
    """Method of moments on 20,000 parents of 200 requests split over 10 children: the
    estimate's relative error is a few percent (the spread's standard error over that many
    parents), so 15% is a wide, fixed bound."""
    rng = np.random.default_rng(3)
    parents = np.full(20_000, 200)
    children = np.vstack([rng.multinomial(200, w) for w in
                          rng.dirichlet(np.full(10, alpha), size=parents.size)])
    spread = ((children - 20.0) ** 2).sum(axis=1)
    assert dirichlet_alpha(parents, spread, 10) == pytest.approx(alpha, rel=0.15)


def test_poisson_times_fit_a_spread_cascade():
    times = np.sort(np.random.default_rng(1).uniform(0, 3600, 200_000))
    model = measure_arrivals(times)
    assert model.resolution_s == 60 and model.counts.size == 60
    # scales with at least 360 windows: the variance's standard error is below 0.08
    assert all(abs(v - 1) < 0.3 for w, v in model.idc.items() if float(w) <= 10)
    assert all(alpha > 20 for _, _, alpha in model.cascade)  # as good as Poisson
    again = ArrivalModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert again.to_dict() == model.to_dict()
    with pytest.raises(ProfileError, match="cascade must start at resolution_s"):
        ArrivalModel.from_dict({**model.to_dict(), "resolution_s": 30})


@pytest.mark.slow
def test_cloudphysics_timestamps_keep_its_rate_and_burstiness():
    path = str(shared("traces", "cloudphysics.parquet"))
    profile = count_profile([path], key="lbn", time_col="time")
    real = np.sort(pq.read_table(path, columns=["time"]).column("time").to_numpy()
                   .astype(np.float64))
    real -= real[0]
    plan = plan_workload(profile=profile, dist=None, events=real.size, seed=1)
    made = np.concatenate([make_chunk(plan, c).column("timestamp").to_numpy().astype(np.int64)
                           for c in range(plan.n_chunks)]) / 1000.0 - plan.start_ms / 1000.0
    assert np.all(np.diff(made) >= 0)
    for width in (1.0, 10.0, 60.0):
        assert idc(made, width, 0, real[-1]) == pytest.approx(idc(real, width, 0, real[-1]),
                                                               rel=0.2), width
    per_minute = np.bincount((real // 60).astype(int))
    made_minute = np.bincount((made // 60).astype(int), minlength=per_minute.size)
    assert np.all(np.abs(made_minute - per_minute) <= 0.05 * per_minute)
    # poisson on request: as smooth as a load test has always been
    smooth = plan_workload(profile=profile, dist=None, events=real.size, seed=1,
                           arrival_process="poisson")
    times = np.concatenate([make_chunk(smooth, c).column("timestamp").to_numpy()
                            .astype(np.int64) for c in range(smooth.n_chunks)]) / 1000.0
    assert idc(times - times[0], 10.0, 0, real[-1]) < 2


def test_the_same_rows_get_the_same_instants_whatever_the_chunks():
    times = np.sort(np.random.default_rng(2).gamma(0.3, 1.0, 50_000).cumsum())
    model = measure_arrivals(times)
    from hotshard.workload.profile_arrivals import CascadeArrivals

    a = CascadeArrivals(model, 50_000, 10.0, seed=4)
    rows = np.arange(50_000)
    whole = a.times(rows)
    parts = np.concatenate([a.times(rows[i:i + 7_000]) for i in range(0, 50_000, 7_000)])
    assert np.array_equal(whole, parts) and np.all(np.diff(whole) >= 0)


def test_generate_refuses_arrivals_a_profile_does_not_have(tmp_path):
    res = run_cli("generate", str(shared("traces", "web07.parquet")).replace(
        "web07.parquet", "web07.parquet"), "--messages", "10", "-o", str(tmp_path / "x.parquet"))
    assert res.returncode == 2  # a trace is not a profile: one line
    from tests.conftest import ROOT

    doc = json.loads((ROOT / "examples" / "incident.profile.json").read_text())
    del doc["arrivals"]  # a profile made from counts, or before the section existed
    (tmp_path / "counts.json").write_text(json.dumps(doc))
    res = run_cli("generate", str(tmp_path / "counts.json"), "--messages",
                  "100", "--arrivals", "profile", "-o", str(tmp_path / "x.parquet"))
    assert res.returncode == 2 and "needs a profile with an arrivals section" in res.stderr


def _event_trace(path):
    """20,000 s of Zipf traffic in which channel 7 takes 40% of the requests between 10,000 s
    and 15,000 s (windows 6 to 8 of 12) and none outside."""
    import pyarrow as pa

    rng = np.random.default_rng(0)
    n = 200_000
    t = np.sort(rng.uniform(0, 20_000, n))
    keys = rng.zipf(1.3, n) % 5000 + 100
    keys[(t > 10_000) & (t < 15_000) & (rng.random(n) < 0.4)] = 7
    pq.write_table(pa.table({"k": keys, "t": t}), path)


def test_an_event_channel_is_hot_when_it_was_hot(tmp_path):
    _event_trace(tmp_path / "ev.parquet")
    profile = count_profile([str(tmp_path / "ev.parquet")], key="k", time_col="t")
    i = list(profile.head_keys).index("7")
    real = profile.timelines.counts[i]
    assert real[:6].sum() == 0 and real[9:].sum() == 0 and real[6:9].min() > 5000
    plan = plan_workload(profile=profile, dist=None, events=int(profile.events), seed=1)
    rows = np.flatnonzero(np.asarray(plan.positions) == i)
    made = np.histogram(plan.arrivals.times(rows),
                        bins=np.linspace(0, profile.timelines.seconds, 13))[0]
    assert made.sum() == real.sum()  # its exact count
    assert made[6:9].sum() >= 0.9 * real.sum()  # in its windows, not spread over the run
    assert np.all(np.abs(made[6:9] - real[6:9]) <= 0.15 * real[6:9])


def test_timelines_that_disagree_with_the_head_are_refused(tmp_path):
    _event_trace(tmp_path / "ev.parquet")
    out = tmp_path / "p.json"
    assert run_cli("profile", str(tmp_path / "ev.parquet"), "--key", "k", "--time", "t",
                   "-o", str(out)).returncode == 0
    doc = json.loads(out.read_text())
    assert len(doc["timelines"]["counts"]) == len(doc["head"]["keys"])
    doc["timelines"]["counts"][0][0] += 1
    out.write_text(json.dumps(doc))
    res = run_cli("inspect", str(out))
    assert res.returncode == 2 and "timelines disagree with head.counts" in res.stderr


def test_inspect_draws_the_top_keys_timelines(tmp_path):
    _event_trace(tmp_path / "ev.parquet")
    out = tmp_path / "p.json"
    assert run_cli("profile", str(tmp_path / "ev.parquet"), "--key", "k", "--time", "t",
                   "-o", str(out)).returncode == 0
    res = run_cli("inspect", str(out))
    line = next(x for x in res.stdout.splitlines() if x.strip().startswith("7 "))
    assert "      ███     " in line  # windows 6-8 of 12, nothing else
    doc = json.loads(run_cli("inspect", str(out), "--json").stdout)
    assert [doc["timelines"][1][0], doc["timelines"][1][1][:6]] == ["7", [0] * 6]


def test_drive_schedule_follows_the_profiles_shape(tmp_path):
    from hotshard.drive.schedule import Schedule
    from hotshard.workload.profile_sampler import largest_remainder

    path = str(shared("traces", "cloudphysics.parquet"))
    model = count_profile([path], key="lbn", time_col="time").arrivals
    schedule = Schedule(60.0, 300.0, "profile", seed=3, model=model)
    times = np.concatenate([t for _, t in schedule.blocks()])
    assert times.size == 18_000 and np.all(np.diff(times) >= 0)
    assert times.min() >= 0 and times.max() < 300.0
    # in real time: the run's bin b is the profile's bin b, scaled to the run's rate (the
    # last one cut where the run ends), each holding its share exactly
    res = model.resolution_s
    n_bins = int(np.ceil(300.0 / res))
    widths = np.minimum(res, 300.0 - np.arange(n_bins) * res)
    per_bin = np.bincount(np.minimum((times // res).astype(int), n_bins - 1),
                          minlength=n_bins)
    want = model.counts[np.arange(n_bins) % model.counts.size] * widths / res
    assert np.array_equal(per_bin, largest_remainder(want.astype(float), 18_000))
    # the same arrivals whatever the process split
    two = sorted(np.concatenate([t for _, t in schedule.for_process(p, 2)]).tolist()
                 for p in (0, 1))
    assert np.array_equal(np.sort(np.concatenate(two)), times)


def test_drive_refuses_profile_arrivals_without_them(tmp_path):
    from tests.conftest import ROOT

    doc = json.loads((ROOT / "examples" / "incident.profile.json").read_text())
    del doc["arrivals"]  # a profile made from counts, or before the section existed
    (tmp_path / "counts.json").write_text(json.dumps(doc))
    res = run_cli("drive", "http://127.0.0.1:9", str(tmp_path / "counts.json"),
                  "--rps", "10", "--arrivals", "profile")
    assert res.returncode == 2 and "has no arrivals section" in res.stderr
    res = run_cli("drive", "http://127.0.0.1:9", "--dist", "uniform:10", "--rps", "10",
                  "--arrivals", "profile")
    assert res.returncode == 2 and "takes its shape from a profile" in res.stderr


def test_poisson_timestamps_are_poisson_for_any_split():
    from hotshard.workload.timing import Arrivals

    arrivals = Arrivals(1000.0, events=600_000, seed=7)
    rows = np.arange(600_000, dtype=np.int64)
    times = arrivals.times(rows, None)
    assert np.all(np.diff(times) >= 0) and times[0] >= 0 and times[-1] < 600.0
    # counts in 600 one-second windows: a Poisson process's index of dispersion is 1, and
    # its estimate from m windows has a standard error of sqrt(2 / m) (0.058): 4 of them
    counts = np.bincount(times.astype(np.int64), minlength=600)[:600]
    assert counts.var() / counts.mean() == pytest.approx(1.0, abs=4 * np.sqrt(2 / 600))
    # the same instants however the rows are cut (chunks, workers)
    parts = [arrivals.times(rows[a:b], None) for a, b in ((0, 70_001), (70_001, 600_000))]
    assert np.array_equal(np.concatenate(parts), times)
    assert np.array_equal(arrivals.times(rows[::-1], None), times[::-1])


def test_sorting_leaf_by_leaf_is_numpys_sort_of_the_whole():
    from hotshard.workload.profile_arrivals import _sorted_in_leaves

    rng = np.random.default_rng(5)
    counts = rng.poisson(30, 2000).astype(np.int64)
    counts[::7] = 0   # empty leaves
    leaf = 0.01
    times = np.repeat(np.arange(counts.size) * leaf, counts) + rng.random(counts.sum()) * leaf
    assert np.array_equal(_sorted_in_leaves(times.copy(), counts), np.sort(times))
