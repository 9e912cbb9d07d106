"""`check`'s burstiness on the real cloudphysics trace (its `time` column, whole seconds).

Production is cloudphysics profiled with its times. Each test stream carries production's own
keys (so every key check passes and only the arrivals differ) with other timestamps: uniform
random ones over the same span (Poisson-like), evenly spaced ones, the real ones (the keys
shuffled over them), a deterministic mix of the two, and the real ones time-compressed. The
production IDCs are recounted from the Parquet with numpy, independently of the profiler.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hotshard.compare.burstiness import BURST_SE, idc_rel_se
from hotshard.compare.check import check
from hotshard.compare.verdicts import Thresholds
from hotshard.profile.count import count_keys, count_profile
from tests.conftest import run_cli, shared, trace_profile

SCALES = ("1", "10", "60")


@pytest.fixture(scope="module")
def trace():
    table = pq.read_table(shared("traces", "cloudphysics.parquet"), columns=["lbn", "time"])
    return table.column("lbn").to_numpy(), table.column("time").to_numpy().astype(np.float64)


@pytest.fixture(scope="module")
def production():
    return trace_profile("cloudphysics", time_col="time")


def numpy_idc(times: np.ndarray, width: float) -> float:
    """Var/Mean of the counts in whole windows of ``width`` from the first time (the
    definition in the arrivals section's docs), counted here with numpy alone."""
    start, end = times.min(), times.max()
    n = int((end - start) // width)
    counts = np.bincount(((times[times < start + n * width] - start) // width).astype(int),
                         minlength=n)
    return float(counts.var() / counts.mean())


def _check(tmp_path, production, keys, times, name, **kw):
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table({"lbn": keys, "time": times}), path)
    test = count_profile([str(path)], key="lbn", time_col="time")
    counts = count_keys([str(path)], key="lbn", keys=production.head_keys)
    report = check(test, production, test_counts=counts, **kw)
    return report, {c.name: c for c in report.checks}


def _rows(c) -> dict[str, dict]:
    return {f"{r['scale_s']:g}": r for r in c.numbers["scales"]}


def test_production_idc_is_the_trace_recounted(production, trace):
    _, times = trace
    for scale in SCALES:
        assert production.arrivals.idc[scale] == pytest.approx(
            numpy_idc(times, float(scale)), rel=1e-6)


def test_uniform_random_times_fail_as_smoother_and_poisson_like(tmp_path, production, trace):
    keys, times = trace
    rng = np.random.default_rng(20)
    fake = np.sort(rng.uniform(times.min(), times.max(), times.size))
    report, checks = _check(tmp_path, production, rng.permutation(keys), fake, "poisson")
    burst = checks["burstiness"]
    assert burst.verdict == "fail" and report.exit_status == 1
    assert [c.name for c in report.checks if c.verdict == "fail"] == ["burstiness"]
    assert "smoother than production's" in burst.message
    assert "(Poisson-like)" in burst.message and "--arrivals profile" in burst.message
    rows = _rows(burst)
    assert set(SCALES) <= set(rows) and all(rows[s]["judged"] for s in SCALES)
    for s in SCALES:
        r = rows[s]
        # n uniform times over the span: multinomial window counts, IDC 1 - 1/n on average,
        # off by idc_rel_se(n) (the Poisson value); 4 of those is a 6e-5 false alarm
        n = int((times.max() - times.min()) // float(s))
        assert abs(r["test_idc"] - (1 - 1 / n)) < 4 * idc_rel_se(n)
        assert r["production_idc"] == pytest.approx(numpy_idc(times, float(s)), rel=1e-6)
        assert r["delay_ratio"] == pytest.approx((r["test_idc"] + 1) / (r["production_idc"] + 1))
    # the factor says the test's queues wait well under 1% as long as production's
    assert burst.numbers["delay_ratio"] < 0.01


def test_evenly_spaced_times_fail_as_evenly_paced(tmp_path, production, trace):
    keys, times = trace
    even = np.linspace(times.min(), times.max(), times.size)
    _, checks = _check(tmp_path, production, keys, even, "even")
    burst = checks["burstiness"]
    assert burst.verdict == "fail" and "evenly paced" in burst.message
    # evenly spaced: every 1 s window holds 15 or 16 of the 15.8 per second, IDC < 1/4
    assert all(_rows(burst)[s]["test_idc"] < 0.25 for s in SCALES)


def test_production_times_with_shuffled_keys_pass_exactly(tmp_path, production, trace):
    keys, times = trace
    report, checks = _check(tmp_path, production, np.random.default_rng(3).permutation(keys),
                            times, "shuffled")
    burst = checks["burstiness"]
    assert burst.verdict == "pass" and "as bursty as production's" in burst.message
    for row in burst.numbers["scales"]:  # the same arrival times: the same curve
        assert row["test_idc"] == pytest.approx(row["production_idc"], rel=1e-9)
    assert report.exit_status == 0


def test_a_partly_smoothed_test_warns(tmp_path, production, trace):
    """Three requests in five keep their real time, the rest are evenly spaced: each window's
    count is 0.6 X_w plus a constant, give or take 1 for each part's rounding, so the count's
    standard deviation is within 2 of 0.6 times production's (Minkowski) and the IDC (the same
    mean) within these bounds; Kingman's factor lands near 0.36, between fail and warn."""
    keys, times = trace
    keep = np.arange(times.size) % 5 < 3
    fake = np.sort(np.concatenate([times[keep], np.linspace(times.min(), times.max(),
                                                            int((~keep).sum()))]))
    report, checks = _check(tmp_path, production, keys, fake, "mixed")
    burst = checks["burstiness"]
    assert burst.verdict == "warn" and report.exit_status == 0
    for s in SCALES:
        r = _rows(burst)[s]
        n = int((times.max() - times.min()) // float(s))
        mean = times.size / n  # both streams: every request in [start, start + n s) counted
        sd = math.sqrt(r["production_idc"] * mean)
        lo, hi = max(0.6 * sd - 2, 0) ** 2 / mean, (0.6 * sd + 2) ** 2 / mean
        assert lo * 0.98 <= r["test_idc"] <= hi * 1.02  # 2%: the last partial window
        assert 0.25 < r["delay_ratio"] < 0.5


def test_a_time_compressed_replay_compares_at_equal_requests_per_window(tmp_path, production,
                                                                         trace):
    """The trace replayed ten times faster: its 1 s windows hold what production's 10 s did,
    so its IDC at 1 s is production's at 10 s. Compared scale for scale it would look six
    times burstier; at equal requests per window it agrees."""
    keys, times = trace
    fast = times.min() + (times - times.min()) / 10
    _, checks = _check(tmp_path, production, keys, fast, "fast")
    burst = checks["burstiness"]
    assert burst.verdict == "pass", burst.message
    row = _rows(burst)["1"]
    assert row["production_scale_s"] == pytest.approx(10, rel=0.01)
    assert row["test_idc"] == pytest.approx(production.arrivals.idc["10"], rel=1e-6)
    assert row["delay_ratio"] == pytest.approx(1, rel=0.01)
    assert "matched by requests per window" in burst.message


def test_a_test_without_times_is_reported_unknown(tmp_path, production, trace):
    keys, _ = trace
    path = tmp_path / "keys.parquet"
    pq.write_table(pa.table({"lbn": keys}), path)
    test = count_profile([str(path)], key="lbn")
    burst = {c.name: c for c in check(test, production).checks}["burstiness"]
    assert burst.verdict == "pass" and "burstiness is unknown" in burst.message
    assert "--time" in burst.message and burst.numbers["test_idc"] is None


def test_production_without_arrivals_has_no_burstiness_check(tmp_path, trace):
    keys, times = trace
    plain = trace_profile("cloudphysics")  # no time column: no arrivals
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"lbn": keys, "time": times}), path)
    test = count_profile([str(path)], key="lbn", time_col="time")
    assert "burstiness" not in {c.name for c in check(test, plain).checks}


def test_a_smooth_test_against_a_production_without_hot_spot_only_warns(tmp_path, trace):
    """Uniform keys with cloudphysics' bursty times: no hot key for a smooth test to hide,
    so the smoother test warns (optimistic on latency) without failing."""
    _, times = trace
    rng = np.random.default_rng(5)
    prod_path, test_path = tmp_path / "prod.parquet", tmp_path / "test.parquet"
    pq.write_table(pa.table({"k": rng.integers(0, 10**9, times.size), "time": times}),
                   prod_path)
    pq.write_table(pa.table({"k": rng.integers(0, 10**9, times.size),
                             "time": np.sort(rng.uniform(times.min(), times.max(),
                                                         times.size))}), test_path)
    prod = count_profile([str(prod_path)], key="k", time_col="time")
    test = count_profile([str(test_path)], key="k", time_col="time")
    report = check(test, prod, allow_disjoint=True)
    assert report.no_hot_spot is not None
    burst = {c.name: c for c in report.checks}["burstiness"]
    assert burst.verdict == "warn" and burst.numbers["delay_ratio"] < Thresholds().burst_fail
    assert report.exit_status == 0


def test_idc_standard_error_matches_simulated_poisson_counts():
    """idc_rel_se against 20,000 simulated windows sets per case (fixed seed): the standard
    deviation of a sample standard deviation is about sd / sqrt(2 R) (0.5% here, a little
    more for the skewed small-n case), so 3% is several of those plus the first-order
    formula's own error at n = 50."""
    rng = np.random.default_rng(20261203)
    for n, m in ((50, 3.0), (50, 40.0), (720, 15.8)):
        x = rng.poisson(m, (20_000, n))
        idc = x.var(axis=1) / x.mean(axis=1)
        assert idc.std() == pytest.approx(idc_rel_se(n), rel=0.03), (n, m)


def test_thresholds_for_burstiness_are_checked():
    from hotshard.errors import InputError

    with pytest.raises(InputError, match="burst_fail"):
        Thresholds(burst_fail=0.6, burst_warn=0.5)
    with pytest.raises(InputError, match="burst_high_warn"):
        Thresholds(burst_high_warn=0.9)
    assert BURST_SE == 3.0


# -- as a user runs it -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def prod_json(tmp_path_factory, production):
    path = tmp_path_factory.mktemp("cp") / "cloudphysics.json"
    production.save(path)
    return path


def test_cli_check_with_time_fails_a_poisson_replay_and_passes_the_real_times(
        tmp_path, prod_json, trace):
    keys, times = trace
    rng = np.random.default_rng(11)
    poisson = tmp_path / "poisson.parquet"
    pq.write_table(pa.table({"lbn": rng.permutation(keys), "time": np.sort(
        rng.uniform(times.min(), times.max(), times.size))}), poisson)
    res = run_cli("check", str(poisson), "--time", "time", "--against", str(prod_json))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAIL  burstiness" in res.stdout
    assert "the test's arrivals are smoother than production's" in res.stdout
    assert "FAIL (burstiness): refuse this test (exit status 1)." in res.stdout
    real = tmp_path / "real.parquet"
    pq.write_table(pa.table({"lbn": keys, "time": times}), real)
    res = run_cli("check", str(real), "--time", "time", "--against", str(prod_json),
                  "--cache-size", "490")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "PASS  burstiness" in res.stdout
    # the cache compared on each one's measured LRU curve, in its own order
    assert "each one's measured LRU curve, in its own order" in res.stdout
    res = run_cli("check", str(real), "--against", str(prod_json))  # no --time given
    assert res.returncode == 0 and "burstiness is unknown" in res.stdout


def test_cli_check_json_carries_the_scales(tmp_path, prod_json, trace):
    import json

    keys, times = trace
    even = tmp_path / "even.parquet"
    pq.write_table(pa.table({"lbn": keys, "time": np.linspace(times.min(), times.max(),
                                                              times.size)}), even)
    res = run_cli("check", str(even), "--time", "time", "--against", str(prod_json), "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 1 and doc["verdict"] == "fail"
    burst = next(c for c in doc["checks"] if c["name"] == "burstiness")
    assert {f"{r['scale_s']:g}" for r in burst["numbers"]["scales"]} >= set(SCALES)
    assert doc["thresholds"]["burst_fail"] == 0.25


def test_cli_check_time_with_a_test_profile_is_one_line(tmp_path, prod_json):
    res = run_cli("check", str(prod_json), "--time", "time", "--against", str(prod_json))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "time_col" in res.stderr
    assert "Traceback" not in res.stderr
