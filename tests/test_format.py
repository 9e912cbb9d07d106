"""The one way numbers are written (hotshard._format): each rule at its boundaries."""

from __future__ import annotations

import pytest

from hotshard._format import count, ms, pct, pct_apart, pp, rps, times, whole


@pytest.mark.parametrize(("x", "text"), [
    (0.0, "0%"), (1.0, "100%"), (0.12, "12%"), (0.07, "7.0%"), (0.0148, "1.5%"),
    (0.0015, "0.15%"), (0.000015, "0.0015%"), (0.0994, "9.9%"),
    (0.099996, "10%"),       # rounded first: never "10.0%"
    (0.0099996, "1.0%"),     # nor "1.00%"
    (0.00099996, "0.10%"),
    (1e-8, "1.0e-06%"),      # a share that is there is never written as 0.000000%
])
def test_pct(x, text):
    assert pct(x) == text


@pytest.mark.parametrize(("x", "text"), [
    (0.0, "+0 pp"), (0.015, "+1.5 pp"), (-0.12, "-12 pp"), (-0.0005, "-0.050 pp"),
    (0.000015, "+0.0015 pp"),
])
def test_pp(x, text):
    assert pp(x) == text


def test_pp_has_pct_digits():
    for x in (0.31, 0.052, 0.0123, 0.00042):
        assert pp(x) == "+" + pct(x).removesuffix("%") + " pp"
        assert pp(-x) == "-" + pct(x).removesuffix("%") + " pp"


@pytest.mark.parametrize("x", [float("nan"), float("inf")])
def test_pct_of_a_non_finite_value_does_not_raise(x):
    assert pct(x).endswith("%")


def test_the_other_formats():
    assert whole(1234567.4) == "1,234,567" and whole(1.2e18) == "1.2e+18"
    assert ms(1234.5) == "1,234 ms" and ms(5.25) == "5.2 ms" and ms(0.123) == "0.12 ms"
    assert times(1.054) == "1.05x" and times(3.44) == "3.4x" and times(12.4) == "12x"
    assert rps(3000) == "3,000 req/s" and count(12345) == "12,345"


@pytest.mark.parametrize(("a", "b", "texts"), [
    (0.12, 0.05, ("12%", "5.0%")),             # already apart: pct's digits
    (0.0862, 0.0859, ("8.62%", "8.59%")),      # "8.6% above 8.6%" would contradict itself
    (0.1234, 0.1236, ("12.3%", "12.4%")),
    (0.0012345, 0.0012346, ("0.1234%", "0.1235%")),
    (0.3, 0.3, ("30%", "30%")),                # equal values stay equal
])
def test_pct_apart_adds_digits_only_until_two_shares_read_apart(a, b, texts):
    assert pct_apart(a, b) == texts


def test_clock_keeps_one_form_per_span():
    from hotshard._format import clock

    assert [clock(t, 7200) for t in (0, 2.5, 3600, 4200, 7200)] == [
        "0:00", "0:02.5", "60:00", "70:00", "120:00"]
    assert clock(36_000, 86_400) == "10:00:00" and clock(90_061, 400_000) == "1d 01:01"


def test_a_latency_takes_the_unit_its_size_calls_for():
    from hotshard._format import latency

    assert [latency(v) for v in (9.17, 53.4, 842.0, 14_100.0, 130_000.0, 13_844_480.0)] == [
        "9.17 ms", "53.4 ms", "842 ms", "14.1 s", "2.17 min", "3.85 h"]
    assert latency(None) == "-" and latency(float("nan")) == "-"


def test_a_row_of_latencies_writes_a_shared_unit_once_and_fits_any_backlog():
    from hotshard._format import latencies

    assert latencies([6.71, 23.7, 53.4, 94.4]) == "6.71/23.7/53.4/94.4 ms"
    assert latencies([7_118_848.0, 13_025_280.0, 13_975_552.0]) == "1.98/3.62/3.88 h"
    # mixed sizes keep each its own unit: a 9 ms p50 is not 0.00 h
    assert latencies([9.17, 9_781_248.0]) == "9.17 ms/2.72 h"
    row = latencies([1e300, 1e301, float("inf")])
    assert row == "2.8e+293/2.8e+294/- h"
