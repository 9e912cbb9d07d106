"""Would this load test hide a hot key or a hot shard? The generator's CI gate.

``check(test, production)`` compares the profile of a load test's keys with production's and
gives each check a verdict (pass / warn / fail) with its numbers. A ``fail`` means the test
would hide what production concentrates on one key or one shard, or in bursts of time (its
arrivals far smoother than production's), so a pipeline should refuse it; a ``warn`` is a
mismatch that makes the test pessimistic or different but hides nothing. When production
itself has no semantic hot spot, uniform test keys are right and pass.

Every threshold is a named field of ``Thresholds`` with the reason for its default, and can be
overridden.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

import numpy as np

from hotshard._format import pct, times
from hotshard.errors import InputError
from hotshard.profile.document import Profile
from hotshard.profile.shape import ProfileShape, profile_shape

__all__ = ["Check", "CheckReport", "Thresholds", "check", "comparable_head_keys",
           "events_needed", "faithful_coverage", "idc_rel_se", "profile_test"]

Verdict = Literal["pass", "warn", "fail"]
_ORDER = {"pass": 0, "warn": 1, "fail": 2}


@dataclass(frozen=True)
class Thresholds:
    """When a check warns or fails. Override any with ``Thresholds().updated({...})``.

    head_fail, head_warn
        Head coverage (the share of production's head traffic that the test puts on the same
        keys, counting each key up to production's share) below which the test fails / warns.
        Below one half, most of what production's hot keys carry is missing from the test:
        the hot key's shard will not run hot. Below 0.8 a fifth of it is: visible, not fatal.
    share_fail, share_warn, share_high_warn
        The test's top-1% and top-10 shares over production's. Under 0.5 the test spreads
        what production concentrates (the incident's uniform keys: 0.02): fail. Outside
        [0.8, 1.25] the concentration differs noticeably: warn (above is pessimistic, so it
        never fails).
    hidden_key_ratio
        A production head key is "hidden" when the test gives it less than this fraction of
        its production share (and the shortfall is significant): its load will not show up
        where production puts it.
    hidden_key_fail, hidden_share_fail
        Head coverage fails when one hidden key carries at least this share of production's
        traffic (0.5%: a third of a fair shard's load at 64 shards, half of one at 100), or
        the hidden keys together at least this share (5%): a test must not drop a key that
        alone heats its shard. Any hidden key at all warns.
    shard_fail, shard_warn
        The test's hottest-shard share over production's, when production has a hot shard
        (beyond the uniform band). Under 0.8 the hot shard runs at most 80% as hot in the
        test: at the incident's 95% CPU that is 76%, still short of where queues explode.
    alpha_tolerance
        Tail exponents further apart than this (and than 3 standard errors): warn. The tail
        decides the working set and the cache, not a hot spot, so it never fails.
    cache_fail, cache_warn
        LRU hit rate (Che) of the test minus production's at --cache-size. A test whose cache
        hits 10 points more than production's is optimistic everywhere: fail. 5 points apart
        either way: warn.
    working_set_warn
        Distinct keys per event, test over production: outside [1/x, x] the working set
        differs by more than x: warn.
    burst_fail, burst_warn, burst_high_warn
        When both profiles have arrivals: Kingman's heavy-traffic factor (c_a^2 + c_s^2) of
        the test over production's, with the index of dispersion (IDC) at a scale as c_a^2
        and exponential service (c_s^2 = 1). A queue's mean wait is proportional to it, so a
        ratio of 0.25 means the test's queues wait a quarter as long as production's under
        the same load: the hot shard's p99 understated four-fold or more (the incident's
        scenario: 181 ms Poisson against 938 ms bursty): fail. Half: warn. Not tighter: a
        bursty trace's own IDC moves by a factor of several from one half-hour to the next
        (cloudphysics at 1 s: 71 to 596), and a stream generated from the profile's arrivals
        is within 20%. Above 2 the test is burstier (pessimistic): warn.
    """

    head_fail: float = 0.5
    head_warn: float = 0.8
    share_fail: float = 0.5
    share_warn: float = 0.8
    share_high_warn: float = 1.25
    hidden_key_ratio: float = 0.5
    hidden_key_fail: float = 0.005
    hidden_share_fail: float = 0.05
    shard_fail: float = 0.8
    shard_warn: float = 0.95
    alpha_tolerance: float = 0.15
    cache_fail: float = 0.10
    cache_warn: float = 0.05
    working_set_warn: float = 2.0
    burst_fail: float = 0.25
    burst_warn: float = 0.5
    burst_high_warn: float = 2.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or isinstance(value, bool) \
                    or not math.isfinite(value) or value < 0:
                raise InputError(f"threshold {f.name} must be a number >= 0, got {value!r}")
        for fail, warn in (("head_fail", "head_warn"), ("share_fail", "share_warn"),
                           ("shard_fail", "shard_warn"), ("cache_warn", "cache_fail"),
                           ("burst_fail", "burst_warn")):
            if getattr(self, fail) > getattr(self, warn):
                raise InputError(f"threshold {fail} ({getattr(self, fail):g}) must not be above "
                                 f"{warn} ({getattr(self, warn):g}): set both")
        if self.share_high_warn < 1:
            raise InputError(f"threshold share_high_warn must be >= 1 (a test more "
                             f"concentrated than production), got {self.share_high_warn:g}")
        for name in ("working_set_warn", "burst_high_warn"):
            if getattr(self, name) < 1:
                raise InputError(f"threshold {name} must be >= 1, got {getattr(self, name):g}")

    def updated(self, changes: dict[str, float]) -> Thresholds:
        """These thresholds with ``changes``; an unknown name is an error naming the known."""
        names = {f.name for f in fields(self)}
        for name in changes:
            if name not in names:
                raise InputError(f"unknown threshold {name!r}; known: {', '.join(sorted(names))}")
        return replace(self, **changes)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class Check:
    """One check's verdict, its plain-words reason and the numbers behind it."""

    name: str
    verdict: Verdict
    message: str
    numbers: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "verdict": self.verdict, "message": self.message,
                "numbers": self.numbers}


@dataclass(frozen=True)
class CheckReport:
    """Every check, the overall verdict (the worst), and what the test would hide."""

    checks: tuple[Check, ...]
    hidden_keys: tuple[tuple[str, float, float], ...]  # (key, production share, test share)
    hot_shard: dict[str, Any] | None  # production's hot shard the test would hide
    no_hot_spot: str | None  # the reason uniform keys are right, when they are
    test_events: float
    production_events: float

    @property
    def verdict(self) -> Verdict:
        return max((c.verdict for c in self.checks), key=_ORDER.__getitem__, default="pass")

    @property
    def exit_status(self) -> int:
        """1 when a check fails (the test would hide a hot key, shard or burst), else 0."""
        return 1 if self.verdict == "fail" else 0

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "exit_status": self.exit_status,
                "checks": [c.to_dict() for c in self.checks],
                "hidden_keys": [{"key": k, "production_share": p, "test_share": t}
                                for k, p, t in self.hidden_keys],
                "hot_shard": self.hot_shard, "no_hot_spot": self.no_hot_spot,
                "events": {"test": self.test_events, "production": self.production_events}}


# -- helpers ------------------------------------------------------------------------------------
def _grade(value: float, fail: float, warn: float) -> Verdict:
    return "fail" if value < fail else "warn" if value < warn else "pass"


# Evidence needed: production's 10th-hottest key (or its last head key) should be expected at
# least this many times in the test, else its share there is noise (Poisson: +-32% at 10).
EXPECTED_COUNT = 10
HEAD_KEYS_JUDGED = 10
MIN_TEST_EVENTS = 1000


def events_needed(production: Profile) -> int:
    """Test events the key-by-key checks need: enough that production's 10th key (or its last
    head key) is expected ``EXPECTED_COUNT`` times, and at least ``MIN_TEST_EVENTS``. (When
    production has no hot spot, only ``MIN_TEST_EVENTS`` are needed: nothing is compared key
    by key.)"""
    counts = np.asarray(production.head_counts, dtype=np.float64)
    if counts.size == 0 or production.events <= 0:
        return MIN_TEST_EVENTS
    share = float(counts[min(HEAD_KEYS_JUDGED, counts.size) - 1]) / production.events
    return max(MIN_TEST_EVENTS, math.ceil(EXPECTED_COUNT / share))


# A production head key is "hidden" only when its shortfall in the test is significant: the
# chance that a faithful test (every key at its production share) shows any head key this
# short is below this (Bonferroni over the head's keys). Then a short test's Poisson misses
# are not reported as hidden keys.
HIDDEN_P = 0.001


@dataclass(frozen=True)
class TestCounts:
    """The test's events of production's head keys: exact (counted in the test's stream) or,
    from a profile of the test, exact for its head keys and at most ``bound`` for the rest."""

    counts: np.ndarray
    exact: np.ndarray  # per key: counted exactly (True) or bounded (False)
    bound: float


def _test_counts(test: Profile, keys: tuple[str, ...],
                 counts: dict[str, float] | None) -> TestCounts:
    if counts is not None:
        values = np.array([float(counts.get(k, 0.0)) for k in keys])
        return TestCounts(values, np.ones(len(keys), bool), 0.0)
    from hotshard.compare.diff import outside_bound

    index = dict(zip(test.head_keys, np.asarray(test.head_counts, float), strict=True))
    bound = outside_bound(test)
    exact = np.array([k in index for k in keys], dtype=bool)
    values = np.array([index.get(k, bound) for k in keys])
    return TestCounts(values, exact, bound)


def faithful_coverage(p_share: np.ndarray, events: float) -> float:
    """Head coverage a faithful test of ``events`` events is expected to reach: each key's
    count X ~ Poisson(n p) falls short of n p by chance, and E[min(p, X/n)] = p (1 - P(X =
    floor(n p))) (the terms below the mean sum to p P(X <= floor(n p) - 1)). A short test's
    coverage is judged against this, not against 1."""
    from scipy.stats import poisson

    lam = events * p_share
    expected = p_share * (1.0 - poisson.pmf(np.floor(lam), lam))
    return float(expected.sum() / p_share.sum()) if p_share.sum() > 0 else 1.0


def _head_coverage(test: Profile, prod: Profile, t: Thresholds, tc: TestCounts
                   ) -> tuple[Check, tuple[tuple[str, float, float], ...]]:
    from scipy.stats import poisson

    keys = tuple(prod.head_keys)
    p_share = np.asarray(prod.head_counts, dtype=np.float64) / prod.events
    t_share = tc.counts / test.events
    head_total = float(p_share.sum())
    coverage = float(np.minimum(p_share, t_share).sum() / head_total) if head_total else 1.0
    faithful = faithful_coverage(p_share, test.events)
    ratio = coverage / faithful if faithful > 0 else 1.0
    lam = test.events * p_share
    hidden_mask = ((tc.counts < t.hidden_key_ratio * lam)
                   & (poisson.cdf(tc.counts, lam) < HIDDEN_P / max(len(keys), 1)))
    hidden = tuple((keys[i], float(p_share[i]), float(t_share[i]))
                   for i in np.flatnonzero(hidden_mask))
    bounded = int((~tc.exact).sum())
    numbers = {"coverage": coverage, "faithful_coverage": faithful, "ratio": ratio,
               "production_head_keys": len(keys), "production_head_share": head_total,
               "hidden_keys": len(hidden), "hidden_share": float(p_share[hidden_mask].sum()),
               "keys_bounded": bounded}
    verdict = _grade(ratio, t.head_fail, t.head_warn)
    hidden_share = numbers["hidden_share"]
    biggest = max((p for _, p, _ in hidden), default=0.0)
    if hidden and (biggest >= t.hidden_key_fail or hidden_share >= t.hidden_share_fail):
        verdict = "fail"
    elif hidden:
        verdict = max(verdict, "warn", key=_ORDER.__getitem__)
    msg = (f"the test puts {pct(coverage)} of production's head traffic ({len(keys)} keys, "
           f"{pct(head_total)} of all requests) on the same keys at up to their production "
           f"share; a faithful test of {test.events:,.0f} events reaches {pct(faithful)} by "
           f"chance ({ratio:.2f}x of it)")
    if bounded:
        msg += (f"; {bounded} keys are outside the test profile's head and counted at up to its "
                f"largest tail count ({tc.bound:,.0f})")
    if hidden:
        top = ", ".join(f"{k} ({pct(p)} in production, {pct(s)} in the test)"
                        for k, p, s in hidden[:3])
        msg += (f"; it hides {len(hidden)} hot key{'s' * (len(hidden) != 1)} carrying "
                f"{pct(hidden_share)} of production: {top}")
    return Check("head-coverage", verdict, msg, numbers), hidden


def _top_shares(test: Profile, prod: Profile, t: Thresholds, *, low_matters: bool = True
                ) -> Check:
    """The share of production's top 1% of keys (by count: the same number of keys on both
    sides, so a short test that saw fewer keys is not judged on fewer) and of the top 10."""
    n_top = max(1.0, 0.01 * prod.keys)
    ts = {"top1pct": test.dist.top_share(n_top), "top10": test.dist.top_share(10)}
    ps = {"top1pct": prod.dist.top_share(n_top), "top10": prod.dist.top_share(10)}
    ratios = {name: (ts[name] / ps[name] if ps[name] > 0 else float("inf")) for name in ts}
    worst = min(ratios.values())
    high = max(ratios.values())
    if not low_matters:  # production has no hot spot: only a more concentrated test differs
        worst = max(worst, t.share_warn)
    verdict: Verdict = "fail" if worst < t.share_fail else (
        "warn" if worst < t.share_warn or high > t.share_high_warn else "pass")
    numbers = {"keys_in_top1pct": n_top, "test_top1pct": ts["top1pct"],
               "production_top1pct": ps["top1pct"], "test_top10": ts["top10"],
               "production_top10": ps["top10"], "ratio_top1pct": ratios["top1pct"],
               "ratio_top10": ratios["top10"]}
    msg = (f"the top {n_top:,.0f} keys (production's top 1%) carry {pct(ts['top1pct'])} of the "
           f"test against {pct(ps['top1pct'])} of production ({ratios['top1pct']:.2f}x); the "
           f"top 10 {pct(ts['top10'])} against {pct(ps['top10'])} ({ratios['top10']:.2f}x)")
    if verdict == "fail":
        msg += ": the test spreads what production concentrates"
    elif high > t.share_high_warn:
        msg += (": the test is more concentrated than production (pessimistic: it heats "
                "keys and shards production does not)")
    elif verdict == "warn":
        msg += ": the test is somewhat less concentrated than production"
    return Check("top-shares", verdict, msg, numbers)


def _tail(test: Profile, prod: Profile, t: Thresholds) -> Check:
    tl, pl = test.tail.power_law, prod.tail.power_law
    if not tl or not pl or tl.get("alpha") is None or pl.get("alpha") is None:
        which = " and ".join(n for n, law in (("the test", tl), ("production", pl))
                             if not law or law.get("alpha") is None)
        return Check("tail-exponent", "pass", f"not compared: no power-law tail fitted for "
                     f"{which}", {})
    a_t, a_p = float(tl["alpha"]), float(pl["alpha"])
    se = math.hypot(float(tl.get("alpha_se") or 0.0), float(pl.get("alpha_se") or 0.0))
    allowed = max(t.alpha_tolerance, 3 * se)
    diff = a_t - a_p
    verdict: Verdict = "pass" if abs(diff) <= allowed else "warn"
    msg = (f"tail exponent {a_t:.2f} in the test against {a_p:.2f} in production "
           f"(difference {diff:+.2f}, allowed {allowed:.2f})")
    if verdict == "warn":
        msg += (": the test's tail falls " + ("faster (its rarely used keys are rarer than "
                                              "production's)" if diff > 0 else
                                              "slower (its rarely used keys are used more "
                                              "than production's)"))
    return Check("tail-exponent", verdict, msg,
                 {"test_alpha": a_t, "production_alpha": a_p, "difference": diff,
                  "allowed": allowed})


# Two streams' measured LRU curves are compared as they are when their lengths differ by at
# most this factor (a longer stream has fewer first-time misses per request); beyond it, both
# are modelled at the shorter length by Che's approximation.
MEASURED_LENGTH_RATIO = 1.25


def _measured_pair(test: Profile, prod: Profile) -> bool:
    """Whether both profiles measured their LRU curves on streams of comparable length."""
    if test.locality is None or prod.locality is None:
        return False
    a, b = float(test.locality.events), float(prod.locality.events)
    return max(a, b) <= MEASURED_LENGTH_RATIO * min(a, b)


def _why_che(test: Profile, prod: Profile) -> str:
    """Why the measured LRU curves were not compared (one clause)."""
    missing = [n for n, p in (("the test", test), ("production", prod)) if p.locality is None]
    if missing:
        return (f"{' and '.join(missing)} {'has' if len(missing) == 1 else 'have'} no measured "
                "LRU curve, so order and reuse are modelled as independent")
    a, b = float(test.locality.events), float(prod.locality.events)
    return (f"the measured curves are of streams {max(a, b) / min(a, b):.1f}x apart in length "
            f"(beyond {MEASURED_LENGTH_RATIO:g}x, first-time misses differ)")


def _lru_hit(profile: Profile, capacity: float, events: float, distinct: float) -> float:
    """LRU hit rate over a run of ``events`` requests touching ``distinct`` keys: Che's
    approximation on the profile's popularity, capped by the compulsory misses (each key's
    first request misses whatever the cache: at most 1 - distinct / events can hit)."""
    from hotshard.sim.cache import che_hit_rates

    counts, mult = profile.dist.popularity()
    che = float(che_hit_rates(counts, mult, capacity).hit_rate)
    return min(che, max(0.0, 1.0 - distinct / events)) if events > 0 else che


def rarefied_keys(profile: Profile, events: float) -> float:
    """Distinct keys expected in ``events`` events drawn without replacement from the
    profile's own events (rarefaction: a key with c of N events is missed with probability
    C(N - c, n) / C(N, n)). Exact at the profile's own length, where it gives its key count,
    and it needs no guess about keys the profile never saw; so runs of different lengths are
    compared at the shorter one's length, never extrapolated."""
    from scipy.special import gammaln

    counts, mult = profile.dist.popularity()
    total = float(profile.events)
    n = min(float(events), total)
    if n >= total:
        return float(mult.sum())
    rest = total - counts
    log_miss = np.where(rest >= n, gammaln(rest + 1) - gammaln(rest - n + 1)
                        - gammaln(total + 1) + gammaln(total - n + 1), -np.inf)
    return float(np.sum(mult * -np.expm1(log_miss)))


def _working_set(test: Profile, prod: Profile, t: Thresholds, cache_size: int | None, *,
                 cache_can_fail: bool = True) -> Check:
    n = min(test.events, prod.events)
    k_t, k_p = rarefied_keys(test, n), rarefied_keys(prod, n)
    ratio = k_t / k_p if k_p > 0 else float("inf")
    numbers: dict[str, Any] = {"test_keys": test.keys, "test_events": test.events,
                               "production_keys": prod.keys, "production_events": prod.events,
                               "compared_at_events": n, "test_keys_at": k_t,
                               "production_keys_at": k_p, "keys_ratio": ratio}
    msg = (f"in {n:,.0f} events (the shorter run's length) the test touches {k_t:,.0f} "
           f"distinct keys and production {k_p:,.0f} ({ratio:.2f}x)")
    verdict: Verdict = "pass"
    if not 1 / t.working_set_warn <= ratio <= t.working_set_warn:
        verdict = "warn"
        msg += (": a bigger working set than production's" if ratio > 1 else
                ": a smaller working set than production's (it fits caches production's "
                "does not)")
    if cache_size is not None:
        measured = _measured_pair(test, prod)
        if measured:
            # each stream's own LRU curve, in its own order: bursts and reuse included
            h_t = test.locality.lru_hit_rate(cache_size)
            h_p = prod.locality.lru_hit_rate(cache_size)
            how = "each one's measured LRU curve, in its own order"
        else:
            # both at the same length, the first-time misses of that many requests included
            h_t = _lru_hit(test, cache_size, n, k_t)
            h_p = _lru_hit(prod, cache_size, n, k_p)
            how = "Che's approximation, first-time misses included: " + _why_che(test, prod)
        numbers.update(cache_size=cache_size, test_hit_rate=h_t, production_hit_rate=h_p,
                       cache_model="measured" if measured else "che")
        msg += (f"; an LRU cache of {cache_size:,} entries hits {pct(h_t)} of the test and "
                f"{pct(h_p)} of production over as many requests ({how})")
        gap = h_t - h_p
        if gap > t.cache_fail and cache_can_fail:
            verdict = "fail"
            msg += ": the test's cache is warmer than production's can be (optimistic)"
        elif abs(gap) > t.cache_warn:
            verdict = max(verdict, "warn", key=_ORDER.__getitem__)
            msg += (": the test's cache is colder (pessimistic on latency, and it hides what "
                    "a warm cache does for production's hot keys)" if gap < 0 else
                    ": the test's cache is somewhat warmer")
    return Check("working-set", verdict, msg, numbers)


# -- burstiness -----------------------------------------------------------------------------
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


def _burstiness(test: Profile, prod: Profile, t: Thresholds, *, can_fail: bool = True
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


def _shards(test: Profile, prod: Profile, partitioner, t: Thresholds
            ) -> tuple[Check, dict[str, Any] | None]:
    from hotshard.shards.predict import predict

    p = predict(prod, partitioner)
    q = predict(test, partitioner)
    p_hot, q_hot = float(p.shares.max()), float(q.shares.max())
    numbers = {"partitioner": partitioner.spec, "production_hottest_shard": p.hottest,
               "production_hottest_share": p_hot, "production_max_over_mean": p.max_over_mean,
               "test_hottest_shard": q.hottest, "test_hottest_share": q_hot,
               "test_max_over_mean": q.max_over_mean, "uniform_band_high": p.uniform_high,
               "test_share_of_production_hot_shard": float(q.shares[p.hottest])}
    msg = (f"on {partitioner.spec}: production's hottest shard, {p.hottest}, carries "
           f"{pct(p_hot)} ({p.max_over_mean:.2f}x the mean); the test's hottest, shard "
           f"{q.hottest}, {pct(q_hot)} ({q.max_over_mean:.2f}x)")
    hotter = q_hot > t.share_high_warn * p_hot and q_hot > q.uniform_high
    if p_hot <= p.uniform_high:
        msg += (f"; production has no hot shard (within the uniform band, at most "
                f"{pct(p.uniform_high)})")
        if hotter:
            return Check("hot-shard", "warn", msg + ": the test heats a shard production "
                         "never does (pessimistic)", numbers), None
        return Check("hot-shard", "pass", msg, numbers), None
    ratio = numbers["test_share_of_production_hot_shard"] / p_hot
    numbers["ratio"] = ratio
    verdict = _grade(ratio, t.shard_fail, t.shard_warn)
    hot = None
    msg += (f"; the test puts {pct(numbers['test_share_of_production_hot_shard'])} on "
            f"production's hot shard {p.hottest} ({ratio:.2f}x production's share)")
    if verdict == "fail":
        keys = ", ".join(f"{k} ({pct(s)})" for k, s in p.hottest_keys[:3])
        msg += (f": the test would hide hot shard {p.hottest} (its keys in production: "
                f"{keys})")
        hot = {"shard": p.hottest, "production_share": p_hot,
               "test_share": numbers["test_share_of_production_hot_shard"],
               "keys": [{"key": k, "share": s} for k, s in p.hottest_keys]}
    elif hotter:
        verdict = max(verdict, "warn", key=_ORDER.__getitem__)
        msg += f": the test's shard {q.hottest} runs hotter than any of production's (pessimistic)"
    elif q.hottest != p.hottest:
        msg += " (a different shard: the test's hot keys are not production's)"
    return Check("hot-shard", verdict, msg, numbers), hot


def _test_hot_key(test: Profile, t: Thresholds) -> Check:
    """When production has no hot spot: does the test put load on one key that uniform draws
    over its keys could not? Its busiest key is judged against the largest count uniform keys
    give by chance (Bonferroni over the test's keys, P < ``HIDDEN_P``), and must also carry
    at least ``hidden_key_fail`` of the test to matter."""
    from scipy.stats import poisson

    counts = np.asarray(test.head_counts, dtype=np.float64)
    top = float(counts.max()) if counts.size else 0.0
    lam = test.events / max(test.keys, 1.0)
    p_value = float(poisson.sf(top - 1, lam)) * test.keys
    share = top / test.events if test.events else 0.0
    numbers = {"test_top_key_events": top, "uniform_mean_events": lam,
               "test_top_key_share": share, "p_value_bonferroni": min(p_value, 1.0)}
    key = test.head_keys[0] if test.head_keys else "-"
    if p_value < HIDDEN_P and share >= t.hidden_key_fail:
        return Check("test-hot-key", "warn", f"the test's busiest key {key} carries "
                     f"{pct(share)} of its events ({top:,.0f} against {lam:.1f} on average): "
                     "a hot spot production does not have (pessimistic)", numbers)
    return Check("test-hot-key", "pass", f"the test's busiest key carries {pct(share)} of its "
                 f"events ({top:,.0f} against {lam:.1f} on average): within what uniform keys "
                 "give", numbers)


def _no_hot_spot(shape: ProfileShape) -> str:
    words = (f"production has no semantic hot spot: its busiest key carries "
             f"{pct(shape.top1_share)} of events")
    if not math.isnan(shape.top1pct_vs_uniform):
        words += (f" and its top 1% of keys {pct(shape.top1pct_share)} "
                  f"({shape.top1pct_vs_uniform:.2f}x their fair share)")
    if shape.uuid_keys:
        words += "; its keys are random identifiers (UUID-like)"
    return words + ": uniform test keys are right for it"


def _is_profile(path: str) -> bool:
    """A ``hotshard.profile/1`` document, as opposed to events (JSON lines are objects too)."""
    if not path.lower().endswith(".json"):
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return head.lstrip()[:1] == b"{" and b'"hotshard.profile/' in head


def comparable_head_keys(production: Profile) -> tuple[str, ...]:
    """Production's head keys as a test would carry them: the keys themselves, or, for a
    pseudonymized profile, the stand-in keys ``hotshard generate`` draws for them (a test made
    from the profile carries those; real keys cannot be matched to pseudonyms)."""
    if not production.privacy.get("pseudonymized"):
        return tuple(production.head_keys)
    from hotshard.workload.profile_sampler import stand_in_head_keys

    return stand_in_head_keys(production)


# The time column of a test stream, when production has arrivals and none is named: the one
# `hotshard generate` writes.
GENERATED_TIME = "timestamp"


def profile_test(inputs: Sequence[str], *, production: Profile, key: str | None = None,
                 partitioner=None, time_col: str | None = None
                 ) -> tuple[Profile, dict[str, float] | None]:
    """The test's profile and its exact events of production's head keys.

    ``inputs`` are the test's key stream (anything ``hotshard profile`` reads, including a k6
    key array, whose column is ``key``), profiled the way production was (with the
    partitioner's placement recorded, so the test's tail is placed key by key), or one
    profile of the test (then only its head is known key by key: counts are None).
    ``time_col`` names the stream's time column, so that its arrivals (burstiness) and its
    locality in time order are measured; when production has arrivals and none is named,
    ``GENERATED_TIME`` is used if the stream has it.
    """
    from hotshard.profile.count import count_keys, count_profile, input_columns, resolve_inputs

    if len(inputs) == 1 and _is_profile(str(inputs[0])):
        if time_col is not None:
            raise InputError(f"time_col ({time_col!r}) is for a test key stream; the test is "
                             "a profile, whose arrivals come from profiling it with its time "
                             "column")
        test = Profile.load(inputs[0])
        if production.privacy.get("pseudonymized") != test.privacy.get("pseudonymized"):
            raise InputError("one profile is pseudonymized and the other is not: profile both "
                             "with the same --pseudonymize secret, or neither")
        return test, None
    files, fmt = resolve_inputs(list(inputs))
    column = key
    columns = input_columns(files, fmt) if key is None or time_col is None else []
    if time_col is None and production.arrivals is not None and GENERATED_TIME in columns:
        time_col = GENERATED_TIME
    if column is None:
        # production's key column; else the one `hotshard generate` writes (channel_id);
        # else the file's only column (a k6 array's `key`, a csv-feeder's header)
        wanted = production.source.get("key")
        column = next((c for c in (wanted, "channel_id") if c in columns),
                      columns[0] if len(columns) == 1 else None)
        if column is None:
            raise InputError(f"say which column holds the test's keys (--key COL): it has no "
                             f"{wanted!r} column; its columns are {', '.join(columns)}")
    placements = (partitioner,) if partitioner is not None else ()
    test = count_profile(files, key=column, placements=placements, time_col=time_col)
    counts = count_keys(files, key=column, keys=comparable_head_keys(production))
    return test, counts


def check(test: Profile, production: Profile, *, partitioner=None,
          cache_size: int | None = None, thresholds: Thresholds | None = None,
          test_counts: dict[str, float] | None = None,
          allow_disjoint: bool = False) -> CheckReport:
    """Compare a load test's key profile with production's.

    Parameters
    ----------
    test, production : Profile
        Profiles of the same key space (the test's keys profiled like production's).
    partitioner : hotshard.shards partitioner, optional
        Adds the hot-shard check: each profile placed by it (``hotshard predict``).
    cache_size : int, optional
        Adds LRU hit rates at this many entries to the working-set check: each one's measured
        LRU curve, in its own order, when both profiles have a locality section of comparable
        length (``MEASURED_LENGTH_RATIO``), else Che's approximation at the shorter length.
    thresholds : Thresholds, optional
        When a check warns or fails.
    test_counts : dict, optional
        The test's exact events of production's head keys (``profile_test``), keyed as
        ``comparable_head_keys`` names them; without them, shares come from the test
        profile's head (keys outside it counted at up to its largest tail count).
    allow_disjoint : bool
        Compare even when the test carries none of production's head keys.

    Notes
    -----
    When production's profile has an ``arrivals`` section, a burstiness check compares the
    test's index of dispersion (IDC) with production's at the scales from 1 s to 60 s, as
    Kingman's heavy-traffic factor (IDC + 1): a queue's mean wait is proportional to
    c_a^2 + c_s^2 (Kingman 1961), taken with exponential service. Scales are matched by mean
    requests per window (a test k times faster is compared at windows k times shorter, as a
    queue at the same utilisation sees it; production's curve interpolated on log-log axes).
    A test without arrivals is reported as unknown, not judged.

    Raises
    ------
    InputError
        The test has fewer events than the checks need (the message says how many); its keys
        are of another format than production's; or it carries none of production's head keys
        (not the same key space, unless ``allow_disjoint``).
    """
    t = thresholds or Thresholds()
    shape = profile_shape(production)
    need = MIN_TEST_EVENTS if shape.near_uniform else events_needed(production)
    if test.events < need:
        why = ("" if shape.near_uniform else
               f" (so that production's {HEAD_KEYS_JUDGED}th key would be expected "
               f"{EXPECTED_COUNT} times)")
        raise InputError(f"the test has {test.events:,.0f} events; the checks need at least "
                         f"{need:,}{why}: profile a longer run of the test")
    _same_format(test, production)
    hot = None
    if shape.near_uniform:
        reason = _no_hot_spot(shape)
        checks = [Check("no-hot-spot", "pass", reason, {
            "production_top1_share": shape.top1_share,
            "production_top1pct_share": shape.top1pct_share,
            "production_top1pct_vs_uniform": shape.top1pct_vs_uniform,
            "uuid_keys": shape.uuid_keys})]
        checks.append(_test_hot_key(test, t))
        # no hot key for a cache to favour: a cache difference can make the test optimistic
        # on latency, not hide a hot spot, so it warns at most
        checks.append(_working_set(test, production, t, cache_size, cache_can_fail=False))
        if production.arrivals is not None:  # bursts make it optimistic, hide no hot spot
            checks.append(_burstiness(test, production, t, can_fail=False))
        if partitioner is not None:
            checks.append(_shards(test, production, partitioner, t)[0])
        return CheckReport(tuple(checks), (), None, reason, test.events, production.events)
    keys = comparable_head_keys(production) if test_counts is not None \
        else tuple(production.head_keys)
    tc = _test_counts(test, keys, test_counts)
    if not allow_disjoint and not (tc.counts[tc.exact] > 0).any():
        raise InputError(
            f"no common keys at all: the test carries none of production's "
            f"{len(keys):,} head keys (such as {', '.join(keys[:3])}); are they the same key "
            "space? (--allow-disjoint compares anyway: every hot key then counts as hidden)")
    head, hidden = _head_coverage(test, production, t, tc)
    checks = [head, _top_shares(test, production, t), _tail(test, production, t),
              _working_set(test, production, t, cache_size)]
    if production.arrivals is not None:
        checks.append(_burstiness(test, production, t))
    if partitioner is not None:
        shard_check, hot = _shards(test, production, partitioner, t)
        checks.append(shard_check)
    return CheckReport(tuple(checks), hidden, hot, None, test.events, production.events)


def _key_format(profile: Profile) -> str:
    from hotshard.profile import keys_look_integer
    from hotshard.profile.shape import uuid_like

    if profile.privacy.get("pseudonymized"):
        return "pseudonyms"
    # a k6 key array or a CSV read as text still holds integer ids when every key is one
    if profile.integer_keys or keys_look_integer(profile.head_keys):
        return "integers"
    return "UUID-like" if uuid_like(tuple(profile.head_keys)) else "text"


def _same_format(test: Profile, production: Profile) -> None:
    """Keys of another format (text against integer ids) are not the same key space, and no
    check can compare them: refuse. (A test made from a pseudonymized profile carries integer
    or text stand-ins: only the two profiles' key types are compared then.)"""
    a, b = _key_format(test), _key_format(production)
    if b == "pseudonyms":
        a = "pseudonyms" if a == "pseudonyms" else ("integers" if a == "integers" else "text")
        b = "integers" if production.source.get("key_type") == "int64" else "text"
    if a != b:
        raise InputError(f"the test's keys are {a} ({', '.join(test.head_keys[:2])}) and "
                         f"production's {b} ({', '.join(production.head_keys[:2])}): not the "
                         "same key space; profile the same key column in the same id format")
