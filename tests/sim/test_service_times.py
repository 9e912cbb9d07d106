"""Service-time models: closed forms, sample statistics within CLT bounds, spec parsing."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.sim.service_times import (
    Deterministic,
    Empirical,
    Exponential,
    LogNormal,
    ServiceTime,
    parse_service,
    parse_time,
)

N = 400_000
Z99 = NormalDist().inv_cdf(0.99)


def assert_mean_within_clt(sample: np.ndarray, mean: float, sd: float) -> None:
    """Sample mean within 5 standard errors of ``mean`` (a false alarm ~ 6e-7)."""
    se = sd / math.sqrt(sample.size)
    assert abs(sample.mean() - mean) < 5 * se, (sample.mean(), mean, se)


def assert_quantile_within_clt(sample: np.ndarray, q: float, x_q: float, density: float):
    """Sample q-quantile within 5 SE of ``x_q``: SE = sqrt(q (1 - q) / n) / f(x_q)."""
    se = math.sqrt(q * (1 - q) / sample.size) / density
    assert abs(np.quantile(sample, q) - x_q) < 5 * se, (np.quantile(sample, q), x_q, se)


def test_every_model_speaks_the_protocol(tmp_path):
    f = tmp_path / "ms.txt"
    f.write_text("1\n2\n")
    for model in (Exponential(0.005), Deterministic(0.005), LogNormal(0.0, 1.0),
                  Empirical.from_file(f)):
        assert isinstance(model, ServiceTime)
        x = model.sample(10, rng=1)
        assert x.dtype == np.float64 and x.shape == (10,)
        assert isinstance(model.to_dict(), dict)


def test_exponential_sample_mean_and_p99(rng):
    d = Exponential(0.005)
    x = d.sample(N, rng)
    assert_mean_within_clt(x, 0.005, 0.005)  # sd = mean
    p99 = -0.005 * math.log(0.01)
    assert d.quantile(0.99) == pytest.approx(p99, rel=1e-14)
    assert_quantile_within_clt(x, 0.99, p99, density=0.01 / 0.005)  # f(x_q) = (1 - q) / mean
    assert d.scv == 1.0
    assert d.quantile(1.0) == math.inf


def test_deterministic_is_constant():
    d = Deterministic(0.004)
    np.testing.assert_array_equal(d.sample(5), 0.004)
    assert d.mean == 0.004 and d.scv == 0.0 and d.quantile(0.999) == 0.004
    np.testing.assert_array_equal(d.quantile([0.5, 0.99]), [0.004, 0.004])


@pytest.mark.parametrize(("mean", "p99"), [(0.005, 0.040), (0.0045, 0.006), (1.0, 14.9)])
def test_lognormal_from_mean_p99_round_trips(mean, p99):
    d = LogNormal.from_mean_p99(mean, p99)
    # analytically: mean = e^(mu + sigma^2/2), p99 = e^(mu + z sigma)
    assert math.exp(d.mu + d.sigma ** 2 / 2) == pytest.approx(mean, rel=1e-12)
    assert math.exp(d.mu + Z99 * d.sigma) == pytest.approx(p99, rel=1e-12)
    assert d.mean == pytest.approx(mean, rel=1e-12)
    assert d.quantile(0.99) == pytest.approx(p99, rel=1e-12)
    assert 0 < d.sigma <= Z99  # the smaller root


def test_lognormal_samples_match_mean_and_p99(rng):
    d = LogNormal.from_mean_p99(0.005, 0.040)
    x = d.sample(N, rng)
    sd = 0.005 * math.sqrt(d.scv)  # scv = e^(sigma^2) - 1
    assert_mean_within_clt(x, 0.005, sd)
    z = (math.log(0.040) - d.mu) / d.sigma
    density = math.exp(-z * z / 2) / (math.sqrt(2 * math.pi) * d.sigma * 0.040)
    assert_quantile_within_clt(x, 0.99, 0.040, density)


@pytest.mark.parametrize(("mean", "p99", "message"), [
    (0.005, 0.005, "p99 must be greater than the mean"),
    (0.005, 0.004, "p99 must be greater than the mean"),
    (0.001, 0.016, r"p99 / mean must be at most e\^\(z\^2/2\) = 14.97"),
    (0.0, 0.01, "mean must be > 0"),
])
def test_lognormal_impossible_mean_and_p99_are_refused(mean, p99, message):
    with pytest.raises(InputError, match=message):
        LogNormal.from_mean_p99(mean, p99)


def test_empirical_reads_milliseconds_and_resamples(tmp_path, rng):
    values_ms = rng.gamma(2.0, 2.5, 5000)  # any positive sample
    f = tmp_path / "service.txt"
    f.write_text("# service times, ms\n" + "\n".join(f"{v:.17g}" for v in values_ms) + "\n\n")
    d = Empirical.from_file(f)
    seconds = values_ms / 1000
    assert d.mean == pytest.approx(seconds.mean(), rel=1e-12)
    assert d.quantile(0.99) == np.quantile(seconds, 0.99, method="inverted_cdf")
    x = d.sample(N, rng)
    assert np.isin(x, seconds).all()
    assert_mean_within_clt(x, seconds.mean(), seconds.std())


def test_empirical_reads_a_named_or_numbered_column_in_other_units(tmp_path):
    f = tmp_path / "log.csv"
    f.write_text("ts,latency\n1,0.25\n2,0.75\n")
    assert Empirical.from_file(f, column="latency", unit="s").mean == pytest.approx(0.5)
    assert Empirical.from_file(f, column=1, unit="s").mean == pytest.approx(0.5)
    assert Empirical.from_file(f, column=1, unit="us").mean == pytest.approx(0.5e-6)


@pytest.mark.parametrize(("text", "kwargs", "message"), [
    ("", {}, "has no values"),
    ("# only a comment\n\n", {}, "has no values"),
    ("ms\n", {}, "has a header but no values"),
    ("1\nabc\n3\n", {}, "line 2: expected a number"),
    ("1\n-2\n", {}, "line 2: service times must be finite and >= 0, got -2"),
    ("1,2\n3,4\n", {}, "has 2 columns; pass column="),
    ("a,b\n1,2\n", {"column": "c"}, "no column 'c'"),
    ("1,2\n", {"column": 5}, r"column must be in 0..1"),
    ("0\n0\n", {}, "all 0"),
])
def test_bad_service_files_are_refused(tmp_path, text, kwargs, message):
    f = tmp_path / "bad.txt"
    f.write_text(text)
    with pytest.raises(InputError, match=message):
        Empirical.from_file(f, **kwargs)


def test_missing_service_file_is_refused(tmp_path):
    with pytest.raises(InputError, match="no such service-time file"):
        Empirical.from_file(tmp_path / "nope.txt")


@pytest.mark.parametrize(("text", "seconds"), [
    ("5", 0.005), ("5ms", 0.005), ("0.2s", 0.2), ("300us", 0.0003), ("1e3us", 0.001),
    (7, 0.007),
])
def test_times_are_milliseconds_unless_suffixed(text, seconds):
    assert parse_time(text) == pytest.approx(seconds, rel=1e-12)


def test_service_specs(tmp_path):
    assert parse_service("exp:5ms") == Exponential(0.005)
    assert parse_service("exponential:5") == Exponential(0.005)
    assert parse_service("const:0.5s") == Deterministic(0.5)
    d = parse_service("lognormal:5ms:40ms")
    assert isinstance(d, LogNormal)
    assert d.mean == pytest.approx(0.005) and d.quantile(0.99) == pytest.approx(0.040)
    f = tmp_path / "s.txt"
    f.write_text("4\n6\n")
    e = parse_service(f"file:{f}")
    assert isinstance(e, Empirical) and e.mean == pytest.approx(0.005)


@pytest.mark.parametrize(("spec", "message"), [
    ("gamma:5ms", "not a service time spec"),
    ("", "not a service time spec"),
    ("exp", "written exp:MEAN"),
    ("exp:1:2", "written exp:MEAN"),
    ("lognormal:5ms", "written lognormal:MEAN:P99"),
    ("exp:5 parsecs", "not a time"),
    ("exp:-5ms", "times must be >= 0"),
    ("exp:0", "mean must be > 0"),
    ("lognormal:40ms:5ms", "p99 must be greater than the mean"),
    ("file:", "needs a path"),
    ("file:/no/such/file", "no such service-time file"),
])
def test_bad_specs_are_refused(spec, message):
    with pytest.raises(InputError, match=message):
        parse_service(spec)


def test_quantile_levels_are_checked():
    with pytest.raises(InputError, match="q must be in"):
        Exponential(1.0).quantile(1.5)


def test_same_seed_same_samples():
    d = LogNormal.from_mean_p99(0.005, 0.04)
    np.testing.assert_array_equal(d.sample(100, 9), d.sample(100, np.random.default_rng(9)))
