"""Would the test's queues wait as production's do? The burstiness check of ``hotshard check``.

When both profiles have arrivals, the test's index of dispersion (IDC) is compared with
production's at the scales from 1 s to 60 s (``BURST_SCALES``), as Kingman's heavy-traffic
factor (IDC + 1): a queue's mean wait is proportional to c_a^2 + c_s^2 (Kingman 1961), taken
with exponential service (``SERVICE_SCV``). Scales are matched by mean requests per window: a
test k times faster is compared at windows k times shorter, as a queue at the same utilisation
sees it (production's curve interpolated on log-log axes). A ratio counts only beyond
``BURST_SE`` standard errors of the two estimates (``idc_rel_se``), so a short test's few
windows do not read as a difference. A test far smoother than production would understate the
hot shard's p99 and fails; a burstier one is pessimistic and warns. A test without arrivals is
reported as unknown, not judged.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hotshard._format import pct, times
from hotshard.compare.verdicts import Check, Thresholds, Verdict
from hotshard.profile.document import Profile

__all__ = ["BURST_SCALES", "BURST_SE", "RATE_NOTE", "SERVICE_SCV", "burstiness", "idc_rel_se"]

# The scales the burstiness check judges: from 1 s (finer, dispersion often measures the
# clock, not the traffic: cloudphysics' times are whole seconds, so each second's requests
# share one 10 ms window) to 60 s (coarser, the profile's per-minute counts carry the rate's
# shape, which a load test follows by its rate plan, not by its burstiness).
BURST_SCALES = (1.0, 60.0)
# c_s^2 in Kingman's factor: exponential service (hotshard simulate's default; M/M/c's).
SERVICE_SCV = 1.0
# A ratio is a difference only beyond this many standard errors of the two estimates (as
# diff's DRIFT_SE): a short test's few windows give a noisy index of dispersion.
BURST_SE = 3.0
# Rates further apart than this factor are compared at equal requests per window, and the
# message says so; closer, at equal scales (the shift is within the estimates' noise).
RATE_NOTE = 1.1


def _rates_differ(a: float, b: float) -> bool:
    return max(a, b) > RATE_NOTE * min(a, b)


def idc_rel_se(windows: float) -> float:
    """Relative standard error of an index of dispersion (Var/Mean, the variance over the
    windows themselves, as ``hotshard.profile.arrivals.idc``) over ``windows`` windows of
    Poisson counts.

    To first order IDC - 1 = (a - b) / m, with a = s^2 - m and b = mean - m; for n Poisson
    counts of mean m, Var(s^2) = m / n + 2 m^2 / (n - 1) (unbiased s^2, from the fourth
    central moment m (1 + 3 m)), Var(mean) = m / n and Cov(s^2, mean) = mu_3 / n = m / n,
    so Var(IDC) = 2 / (n - 1) whatever m, times ((n - 1) / n)^2 for the variance over n:
    sqrt(2 (n - 1)) / n. Bursty counts are noisier: this is the least noise, used so that a
    short test's few windows do not read as a difference.
    """
    n = max(float(windows), 2.0)
    return math.sqrt(2.0 * (n - 1.0)) / n


def _rate(profile: Profile) -> tuple[float, float]:
    """(mean requests per second, seconds) of a profile with arrivals."""
    arrivals = profile.arrivals
    assert arrivals is not None
    rate = profile.rate or {}
    seconds = float(rate.get("seconds") or arrivals.seconds)
    return float(rate.get("mean_rps") or arrivals.events / seconds), seconds


def _production_idc(prod: Profile, scale: float) -> tuple[float, bool] | None:
    """Production's IDC at ``scale`` seconds: measured, else interpolated on log-log axes
    between the measured scales around it (exact: False); None outside them."""
    assert prod.arrivals is not None
    measured = sorted((float(k), v) for k, v in prod.arrivals.idc.items())
    for w, v in measured:
        if abs(w - scale) <= 1e-9 * w:
            return v, True
    if not measured or not measured[0][0] < scale < measured[-1][0]:
        return None
    w, v = np.log([m[0] for m in measured]), np.log([max(m[1], 1e-9) for m in measured])
    return float(np.exp(np.interp(math.log(scale), w, v))), False


def _burst_rows(test: Profile, prod: Profile) -> list[dict[str, Any]]:
    """Per scale the test measured: its IDC and production's at the same mean requests per
    window (the same scale when the rates agree), Kingman's factor ratio and its standard
    error on the log scale."""
    assert test.arrivals is not None and prod.arrivals is not None
    (r_t, s_t), (r_p, s_p) = _rate(test), _rate(prod)
    rows = []
    for name, idc_t in sorted(test.arrivals.idc.items(), key=lambda kv: float(kv[0])):
        w = float(name)
        # a queue at the same utilisation sees a stream k times faster on a server k times
        # faster: the same picture in time k times shorter, so scales compare at equal
        # requests per window (time-scaling leaves the IDC at a given count unchanged);
        # rates within RATE_NOTE compare at the same scale, measured on both sides
        w_p = w * r_t / r_p if _rates_differ(r_t, r_p) else w
        found = _production_idc(prod, w_p)
        if found is None:
            continue
        idc_p, exact = found
        se_t = idc_rel_se(s_t / w) * idc_t
        se_p = idc_rel_se(s_p / w_p) * idc_p
        rows.append({
            "scale_s": w, "production_scale_s": w_p, "requests_per_window": r_t * w,
            "test_idc": idc_t, "production_idc": idc_p, "production_idc_measured": exact,
            "delay_ratio": (idc_t + SERVICE_SCV) / (idc_p + SERVICE_SCV),
            "se_log": math.hypot(se_t / (idc_t + SERVICE_SCV), se_p / (idc_p + SERVICE_SCV)),
            "test_poisson_se": idc_rel_se(s_t / w),
            "judged": all(BURST_SCALES[0] <= x <= BURST_SCALES[1] for x in (w, w_p))})
    return rows


def _idc_text(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def burstiness(test: Profile, prod: Profile, t: Thresholds, *, can_fail: bool = True
                ) -> Check:
    """The test's arrivals against production's: Kingman's factor (IDC + 1) at each scale
    from 1 s to 60 s both measured; the worst significant scale decides."""
    assert prod.arrivals is not None
    measured = {k: v for k, v in prod.arrivals.idc.items()
                if BURST_SCALES[0] <= float(k) <= BURST_SCALES[1]}
    if test.arrivals is None:
        at = ", ".join(f"{_idc_text(v)} at {float(k):g} s" for k, v in measured.items())
        return Check("burstiness", "pass", "not compared: the test's burstiness is unknown "
                     "(its keys came without arrival times)" + (
                         f"; production's index of dispersion is {at}, where a Poisson "
                         "stream's is 1" if at else "")
                     + ": give the test's time column (--time COL) or profile its keys "
                     "with --time", {"production_idc": dict(prod.arrivals.idc),
                                     "test_idc": None})
    rows = _burst_rows(test, prod)
    judged = [r for r in rows if r["judged"]]
    (r_t, s_t), (r_p, _) = _rate(test), _rate(prod)
    numbers: dict[str, Any] = {"scales": rows, "test_rps": r_t, "production_rps": r_p,
                               "service_scv": SERVICE_SCV}
    if not judged:
        return Check("burstiness", "pass", f"not compared: no scale from "
                     f"{BURST_SCALES[0]:g} s to {BURST_SCALES[1]:g} s measured by both at the "
                     f"same requests per window (the test spans {s_t:,.0f} s at {r_t:,.1f}/s; "
                     "an index of dispersion needs ten windows)", numbers)

    def significant(r: dict[str, Any], sign: int) -> bool:
        return sign * math.log(r["delay_ratio"]) > BURST_SE * r["se_log"]

    smoother = [r for r in judged if r["delay_ratio"] < t.burst_warn and significant(r, -1)]
    burstier = [r for r in judged if r["delay_ratio"] > t.burst_high_warn
                and significant(r, 1)]
    worst = min(smoother or judged, key=lambda r: r["delay_ratio"])
    numbers.update(worst_scale_s=worst["scale_s"], delay_ratio=worst["delay_ratio"])
    rated = _rates_differ(r_t, r_p)
    listing = ", ".join(
        f"at {r['scale_s']:g} s " + (f"(production's {r['production_scale_s']:.3g} s) "
                                     if rated else "")
        + f"{_idc_text(r['test_idc'])} vs {_idc_text(r['production_idc'])}" for r in judged)
    if all(abs(r["test_idc"] - 1.0) <= BURST_SE * r["test_poisson_se"] for r in judged):
        listing += " (Poisson-like)"
    elif all(1.0 - r["test_idc"] > BURST_SE * r["test_poisson_se"] for r in judged):
        listing += " (evenly paced: smoother than Poisson)"
    rate = ""
    if rated:
        rate = (f"; the test runs at {r_t:,.1f}/s against production's {r_p:,.1f}/s, so scales "
                "are matched by requests per window, as a queue at the same utilisation sees "
                "them")
    if smoother:
        verdict: Verdict = "fail" if worst["delay_ratio"] < t.burst_fail and can_fail \
            else "warn"
        msg = (f"the test's arrivals are smoother than production's: index of dispersion "
               f"{listing}{rate}; by Kingman's heavy-traffic factor (IDC + 1) a queue fed by "
               f"the test waits {pct(worst['delay_ratio'])} as long (at "
               f"{worst['scale_s']:g} s), so its p99 under the same load will be "
               "understated: drive it with --arrivals profile (production's burstiness)")
    elif burstier:
        top = max(burstier, key=lambda r: r["delay_ratio"])
        verdict = "warn"
        msg = (f"the test's arrivals are burstier than production's: index of dispersion "
               f"{listing}{rate}; by Kingman's heavy-traffic factor (IDC + 1) a queue fed by "
               f"the test waits {times(top['delay_ratio'])} as long (at {top['scale_s']:g} s): "
               "pessimistic, its p99 is worse than production's at the same load")
    else:
        verdict = "pass"
        lo = min(r["delay_ratio"] for r in judged)
        hi = max(r["delay_ratio"] for r in judged)
        msg = (f"the test's arrivals are as bursty as production's: index of dispersion "
               f"{listing}{rate}; Kingman's heavy-traffic factor (IDC + 1) "
               + (f"{times(lo)} to {times(hi)}" if times(lo) != times(hi) else times(lo))
               + f" production's (within {times(t.burst_warn)} to "
               f"{times(t.burst_high_warn)}, or within sampling noise)")
    return Check("burstiness", verdict, msg, numbers)
