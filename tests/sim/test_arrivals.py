"""Arrival schedules: count statistics within CLT bounds, burstiness, traces, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.sim import arrivals
from hotshard.sim.arrivals import (
    OnOffArrivals,
    PoissonArrivals,
    TraceArrivals,
    from_rate_trace,
    on_off,
    on_off_dispersion,
    parse_arrivals,
    poisson,
    rate_trace,
    read_rate_trace,
)


def per_second(times: np.ndarray, seconds: int) -> np.ndarray:
    return np.bincount(times.astype(np.int64), minlength=seconds)[:seconds]


def assert_poisson_counts(counts: np.ndarray, rate: float) -> None:
    """Mean and variance of iid Poisson(rate) counts, each within 5 standard errors.

    SE(mean) = sqrt(rate / n); SE(sample variance) = sqrt((mu4 - sigma^4) / n) with Poisson's
    mu4 = rate + 3 rate^2, i.e. sqrt((rate + 2 rate^2) / n).
    """
    n = counts.size
    assert abs(counts.mean() - rate) < 5 * math.sqrt(rate / n), (counts.mean(), rate)
    assert abs(counts.var(ddof=1) - rate) < 5 * math.sqrt((rate + 2 * rate ** 2) / n), \
        (counts.var(ddof=1), rate)


def assert_schedule(times: np.ndarray, duration: float) -> None:
    assert times.dtype == np.float64 and times.ndim == 1
    assert np.all(np.diff(times) >= 0)
    assert times.size == 0 or (times[0] >= 0 and times[-1] <= duration)


def test_poisson_counts_per_second(rng):
    t = poisson(40.0, 2000, rng)
    assert_schedule(t, 2000)
    assert_poisson_counts(per_second(t, 2000), 40.0)


def test_poisson_gaps_are_exponential(rng):
    from scipy import stats

    t = poisson(300.0, 100, rng)
    assert stats.kstest(np.diff(t) * 300.0, "expon").pvalue > 1e-3


def test_poisson_is_the_same_when_cut_into_many_blocks_and_chunks(rng, monkeypatch):
    # tiny blocks and chunks exercise the block splitting and the chunked spacings
    monkeypatch.setattr(arrivals, "_BLOCK_EVENTS", 50)
    monkeypatch.setattr(arrivals, "_CHUNK_EVENTS", 1000)
    t = poisson(200.0, 500, rng)
    assert_schedule(t, 500)
    assert_poisson_counts(per_second(t, 500), 200.0)
    # and within the second: tenths of a second equally filled
    tenths = np.bincount(((t % 1) * 10).astype(np.int64), minlength=10)
    expected = t.size / 10
    assert np.all(np.abs(tenths - expected) < 5 * math.sqrt(expected))


def test_poisson_fractional_duration(rng):
    t = poisson(1000.0, 2.5, rng)
    assert_schedule(t, 2.5)
    assert abs(t.size - 2500) < 5 * math.sqrt(2500)
    assert (t >= 2).sum() == pytest.approx(500, abs=5 * math.sqrt(500))


def test_same_seed_same_schedule():
    np.testing.assert_array_equal(on_off(100, 50, 11), on_off(100, 50, np.random.default_rng(11)))
    assert not np.array_equal(poisson(100, 50, 1), poisson(100, 50, 2))


def test_on_off_keeps_the_mean_rate_and_is_bursty(rng):
    rate, duration = 50.0, 20_000
    t = on_off(rate, duration, rng, burst=4, on_fraction=0.2, mean_period=1.0)
    assert_schedule(t, duration)
    # The total count of a bursty process varies more than a Poisson count:
    # Var N(T) = I(T) * rate * T, with I the index of dispersion (its closed form).
    i_total = on_off_dispersion(rate, burst=4, on_fraction=0.2, mean_period=1.0,
                                window=duration)
    se = math.sqrt(i_total * rate * duration) / duration
    assert abs(t.size / duration - rate) < 5 * se, (t.size / duration, se)

    counts = per_second(t, duration)
    measured = counts.var(ddof=1) / counts.mean()
    predicted = on_off_dispersion(rate, burst=4, on_fraction=0.2, mean_period=1.0, window=1.0)
    assert measured > 10  # bursty: a Poisson process gives 1
    # Seconds are nearly independent (the state's correlation time f(1-f)P = 0.16 s), so
    # the variance estimate over 20 000 of them scatters by about 1% (0.9% over 20 seeds);
    # 5% is five of those.
    assert measured == pytest.approx(predicted, rel=0.05)


def test_poisson_index_of_dispersion_is_one(rng):
    counts = per_second(poisson(50.0, 20_000, rng), 20_000)
    # SE of the variance-to-mean ratio of iid Poisson counts ~ sqrt(2 / n)
    assert counts.var(ddof=1) / counts.mean() == pytest.approx(1.0, abs=5 * math.sqrt(2 / 2e4))
    assert PoissonArrivals().index_of_dispersion(50.0) == 1.0


def test_on_off_with_burst_one_is_poisson(rng):
    counts = per_second(on_off(30.0, 5000, rng, burst=1.0), 5000)
    assert_poisson_counts(counts, 30.0)
    assert on_off_dispersion(30.0, burst=1.0) == 1.0


def test_on_off_dispersion_long_window_limit():
    # 1 + 2 f^2 (b - 1)^2 rate P, and the finite-window formula tends to it
    assert on_off_dispersion(100, burst=4, on_fraction=0.2, mean_period=10) == \
        pytest.approx(1 + 2 * 0.04 * 9 * 100 * 10)
    far = on_off_dispersion(100, burst=4, on_fraction=0.2, mean_period=10, window=1e7)
    assert far == pytest.approx(721, rel=1e-4)


def test_on_off_rates():
    assert OnOffArrivals(burst=4, on_fraction=0.2).rates(100) == pytest.approx((400, 25))
    assert OnOffArrivals(burst=5, on_fraction=0.2).rates(100) == pytest.approx((500, 0))


def test_trace_step_reproduces_per_second_means(rng):
    rates = np.r_[np.full(500, 20.0), np.full(500, 200.0)]
    t = rate_trace(rates, rng)
    assert_schedule(t, 1000)
    counts = per_second(t, 1000)
    assert_poisson_counts(counts[:500], 20.0)
    assert_poisson_counts(counts[500:], 200.0)


def test_trace_file_one_rate_per_line(tmp_path, rng):
    f = tmp_path / "rates.txt"
    f.write_text("# per-second rates\n5\n0\n\n7.5\n")
    np.testing.assert_array_equal(read_rate_trace(f), [5, 0, 7.5])
    t = from_rate_trace(f, rng)
    assert_schedule(t, 3)
    assert not ((t >= 1) & (t < 2)).any()  # a second of rate 0 has no arrivals


def test_trace_csv_with_header_epoch_seconds_and_gaps(tmp_path):
    f = tmp_path / "rates.csv"
    f.write_text("second,rate\n1700000000,10\n1700000001,12\n1700000004,3\n")
    np.testing.assert_array_equal(read_rate_trace(f), [10, 12, 0, 0, 3])


def test_trace_scaled_to_a_rate_and_cut_to_a_duration(rng):
    trace = TraceArrivals(np.r_[np.full(100, 10.0), np.full(100, 30.0)])
    assert trace.duration == 200 and trace.mean_rate == 20
    t = trace.times(rate=100.0, duration=150.5, rng=rng)
    assert_schedule(t, 150.5)
    # shape kept: 10:30 in the ratio, mean over the 150.5 s window = 100/s
    scale = 100.0 * 150.5 / (100 * 10 + 50.5 * 30)
    counts = per_second(t, 150)
    assert_poisson_counts(counts[:100], 10 * scale)
    assert_poisson_counts(counts[100:150], 30 * scale)
    with pytest.raises(InputError, match="longer than the rate trace"):
        trace.times(duration=201)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: poisson(-1, 10), "rate must be > 0 per second, got -1"),
    (lambda: poisson(0, 10), "rate must be > 0"),
    (lambda: poisson(math.nan, 10), "rate must be > 0"),
    (lambda: poisson(10, 0), "duration must be > 0 seconds, got 0"),
    (lambda: poisson(10, -5), "duration must be > 0"),
    (lambda: on_off(10, 0), "duration must be > 0"),
    (lambda: on_off(-10, 5), "rate must be > 0"),
    (lambda: on_off(10, 5, burst=0.5), "burst must be >= 1"),
    (lambda: on_off(10, 5, on_fraction=1.0), r"on_fraction must be in \(0, 1\)"),
    (lambda: on_off(10, 5, burst=4, on_fraction=0.3), "burst \\* on_fraction must be <= 1"),
    (lambda: on_off(10, 5, mean_period=0), "mean_period must be > 0"),
    (lambda: rate_trace([]), "non-empty"),
    (lambda: rate_trace([1, -2]), "rates must be finite and >= 0, got -2"),
    (lambda: rate_trace([0, 0]), "no traffic"),
])
def test_bad_arguments_are_one_line_errors(call, message):
    with pytest.raises(InputError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("text", "message"), [
    ("", "has no rates"),
    ("# nothing\n\n", "has no rates"),
    ("rate\n", "has no rates"),
    ("5\n-1\n", r"line 2: rates must be finite and >= 0, got -1"),
    ("5\nfast\n", "line 2: expected a rate"),
    ("5\n6,7\n", "line 2: expected a rate"),
    ("0,5\n0,6\n", "line 2: seconds must increase"),
    ("0,5\n1.5,6\n", "line 2: seconds must be whole"),
    ("0,5\n1e9,6\n", "spans"),
    ("1,2,3\n", "got 3 fields"),
    ("0\n0\n", "no traffic"),
])
def test_bad_trace_files_are_one_line_errors(tmp_path, text, message):
    f = tmp_path / "trace.txt"
    f.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        read_rate_trace(f)
    assert "\n" not in str(info.value)


def test_unreadable_traces(tmp_path):
    with pytest.raises(InputError, match="no such rate trace"):
        from_rate_trace(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="is a directory"):
        from_rate_trace(tmp_path)
    binary = tmp_path / "bin.dat"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(InputError, match="cannot read rate trace"):
        read_rate_trace(binary)


def test_arrival_specs(tmp_path):
    assert parse_arrivals("poisson") == PoissonArrivals()
    assert parse_arrivals("onoff") == OnOffArrivals()
    assert parse_arrivals("onoff:4:0.2:10s") == OnOffArrivals(4, 0.2, 10)
    assert parse_arrivals("onoff:2") == OnOffArrivals(burst=2)
    assert parse_arrivals("onoff:2:0.5:500ms") == OnOffArrivals(2, 0.5, 0.5)
    assert parse_arrivals("onoff:2:0.5:2m").mean_period == 120
    f = tmp_path / "r.txt"
    f.write_text("1\n2\n")
    trace = parse_arrivals(f"trace:{f}")
    assert isinstance(trace, TraceArrivals) and trace.duration == 2
    for proc in (PoissonArrivals(), OnOffArrivals(), trace):
        assert isinstance(proc, arrivals.ArrivalProcess)
        assert proc.to_dict()["kind"] in ("poisson", "onoff", "trace")


@pytest.mark.parametrize(("spec", "message"), [
    ("uniform", "not an arrivals spec"),
    ("poisson:5", "poisson takes no parameters"),
    ("onoff:x", "burst must be a number"),
    ("onoff:4:0.3", "burst \\* on_fraction must be <= 1"),
    ("onoff:4:0.2:soon", "not a duration"),
    ("onoff:4:0.2:1s:9", "at most"),
    ("trace:", "needs a path"),
    ("trace:/no/such/trace", "no such rate trace"),
])
def test_bad_arrival_specs(spec, message):
    with pytest.raises(InputError, match=message):
        parse_arrivals(spec)
