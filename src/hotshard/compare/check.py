"""Would this load test hide a hot key or a hot shard? The generator's CI gate.

``check(test, production)`` compares the profile of a load test's keys with production's and
gives each check a verdict (pass / warn / fail) with its numbers. A ``fail`` means the test
would hide what production concentrates on one key or one shard, or in bursts of time (its
arrivals far smoother than production's), so a pipeline should refuse it; a ``warn`` is a
mismatch that makes the test pessimistic or different but hides nothing. When production
itself has no semantic hot spot, uniform test keys are right and pass.

This module holds the key-by-key and shard checks and runs every check (``check``). The
working-set and cache check (``compare.working_set``) and the burstiness check
(``compare.burstiness``) have modules of their own; the verdicts and the ``Thresholds`` they
are judged by (each a named field with the reason for its default, and overridable) are in
``compare.verdicts``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hotshard._format import pct
from hotshard.compare.burstiness import burstiness
from hotshard.compare.verdicts import Check, Thresholds, Verdict, worst
from hotshard.compare.working_set import working_set
from hotshard.errors import InputError
from hotshard.profile.document import Profile
from hotshard.profile.shape import ProfileShape, profile_shape

__all__ = ["CheckReport", "check", "comparable_head_keys", "events_needed", "faithful_coverage",
           "profile_test"]


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
        return worst(*(c.verdict for c in self.checks))

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
    from hotshard.compare import _poisson as poisson

    lam = events * p_share
    expected = p_share * (1.0 - poisson.pmf(np.floor(lam), lam))
    return float(expected.sum() / p_share.sum()) if p_share.sum() > 0 else 1.0


def _head_coverage(test: Profile, prod: Profile, t: Thresholds, tc: TestCounts
                   ) -> tuple[Check, tuple[tuple[str, float, float], ...]]:
    from hotshard.compare import _poisson as poisson

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
        verdict = worst(verdict, "warn")
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


# a key distribution whose busiest key has less than this many times the mean count has no
# tail to speak of: uniform keys over N give a busiest key a few standard deviations above
# the mean (2.5x at 10 requests a key), any skewed one tens to thousands of times it
NEAR_UNIFORM = 5.0


def _busiest_over_mean(profile: Profile) -> float | None:
    """The busiest key's count over the mean count of a key, or None (no keys)."""
    if not profile.keys or not profile.events or not profile.head_counts.size:
        return None
    return float(profile.head_counts[0]) / (float(profile.events) / float(profile.keys))


def _tail(test: Profile, prod: Profile, t: Thresholds) -> Check:
    tl, pl = test.tail.power_law, prod.tail.power_law
    if not tl or not pl or tl.get("alpha") is None or pl.get("alpha") is None:
        which = " and ".join(n for n, law in (("the test", tl), ("production", pl))
                             if not law or law.get("alpha") is None)
        return Check("tail-exponent", "pass", f"not compared: no power-law tail fitted for "
                     f"{which}", {"applies": False})
    spread = _busiest_over_mean(test)
    if spread is not None and spread < NEAR_UNIFORM:
        return Check("tail-exponent", "pass",
                     f"does not apply: the test's keys are near uniform (its busiest key "
                     f"{spread:.1f}x the mean), so the power law fitted to them means nothing",
                     {"busiest_over_mean": spread, "applies": False})
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


def _shards(test: Profile, prod: Profile, partitioner, t: Thresholds, p=None, q=None
            ) -> tuple[Check, dict[str, Any] | None]:
    from hotshard.shards.predict import predict

    p = p if p is not None else predict(prod, partitioner)
    q = q if q is not None else predict(test, partitioner)
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
        verdict = worst(verdict, "warn")
        msg += f": the test's shard {q.hottest} runs hotter than any of production's (pessimistic)"
    elif q.hottest != p.hottest:
        msg += " (a different shard: the test's hot keys are not production's)"
    return Check("hot-shard", verdict, msg, numbers), hot


def _peak_window(p, q, t: Thresholds) -> Check:
    """Production's peak window (``hotshard predict``'s: the window and shard with the largest
    share of that window's requests) against the test's windows: a test right on average that
    never has production's event leaves the shard that melts cool. The test's windows are its
    own span's (a test run at another length is compared at the same relative time); its
    share of production's peak shard is taken in the same window, and in its hottest window
    for that shard (an event the test has at another time warns)."""
    from hotshard._format import clock

    tl = p.timeline
    peak, w = tl.peak, tl.peak_window
    shard = peak.hottest
    p_share = float(peak.shares[shard])
    span = float(tl.edges_s[-1])
    when = f"{clock(tl.peak_start_s, span)}-{clock(tl.peak_end_s, span)}"
    keys = ", ".join(f"{k} ({pct(v)})" for k, v in peak.notable_keys(2))
    numbers: dict[str, Any] = {"production_window": {"start_s": tl.peak_start_s,
                                                     "end_s": tl.peak_end_s},
                               "production_shard": shard, "production_share": p_share}
    head = (f"production's peak window is {when}: shard {shard} carries {pct(p_share)} of "
            f"its requests ({'keys' if ', ' in keys else 'key'} {keys})")
    if q.timeline is None:
        return Check("peak-window", "warn", head + "; not compared: the test has no time "
                     "column, so when its keys come is unknown (give it: check --time COL)",
                     numbers)
    qt = q.timeline
    rows = qt.shares[:, shard] if qt.shares.shape[0] == tl.shares.shape[0] else None
    same = float(rows[w]) if rows is not None else float("nan")
    best_w = int(np.argmax(qt.shares[:, shard]))
    best = float(qt.shares[best_w, shard])
    numbers.update({"test_share_same_window": same, "test_best_window": {
        "start_s": float(qt.edges_s[best_w]), "end_s": float(qt.edges_s[best_w + 1])},
        "test_best_share": best})
    tspan = float(qt.edges_s[-1])
    best_when = f"{clock(qt.edges_s[best_w], tspan)}-{clock(qt.edges_s[best_w + 1], tspan)}"
    if abs(tspan - span) > 0.05 * span:  # the test's own clock: say so
        best_when += f" of its {clock(tspan, tspan)}"
    ratio_same = same / p_share if p_share > 0 and same == same else 0.0
    ratio_best = best / p_share if p_share > 0 else 1.0
    numbers.update({"ratio_same_window": ratio_same, "ratio_best_window": ratio_best})
    if _grade(ratio_same, t.shard_fail, t.shard_warn) == "pass":
        same_when = (f"{clock(qt.edges_s[w], tspan)}-{clock(qt.edges_s[w + 1], tspan)}"
                     if rows is not None else when)
        return Check("peak-window", "pass", head + f"; the test's same window ({same_when}"
                     f"{'' if abs(tspan - span) <= 0.05 * span else ' of its own span'}) puts "
                     f"{pct(same)} there ({ratio_same:.2f}x)", numbers)
    verdict = _grade(ratio_best, t.shard_fail, t.shard_warn)
    if verdict == "fail":
        return Check("peak-window", "fail", head + f"; the test never has it: its hottest "
                     f"window for shard {shard} ({best_when}) puts {pct(best)} there "
                     f"({ratio_best:.2f}x), so the test misses production's {when}", numbers)
    return Check("peak-window", "warn", head + f"; the test has it at another time: "
                 f"{pct(best)} on shard {shard} in its {best_when} ({ratio_best:.2f}x), "
                 f"{pct(same) if same == same else 'unknown'} in production's window",
                 numbers)


def _test_hot_key(test: Profile, t: Thresholds) -> Check:
    """When production has no hot spot: does the test put load on one key that uniform draws
    over its keys could not? Its busiest key is judged against the largest count uniform keys
    give by chance (Bonferroni over the test's keys, P < ``HIDDEN_P``), and must also carry
    at least ``hidden_key_fail`` of the test to matter."""
    from hotshard.compare import _poisson as poisson

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
                 partitioner=None, time_col: str | None = None, progress=None
                 ) -> tuple[Profile, dict[str, float] | None]:
    """The test's profile and its exact events of production's head keys.

    ``inputs`` are the test's key stream (anything ``hotshard profile`` reads, including a k6
    key array, whose column is ``key``), profiled the way production was (with the
    partitioner's placement recorded, so the test's tail is placed key by key), or one
    profile of the test (then only its head is known key by key: counts are None).
    ``time_col`` names the stream's time column, so that its arrivals (burstiness) and its
    locality in time order are measured; when production has arrivals and none is named,
    ``GENERATED_TIME`` is used if the stream has it. ``progress(stage, fraction_or_None)``
    hears how the profiling goes (``count_profile``'s), then the head keys' count.
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
            raise InputError(f"say which column holds the test's keys (${{key}} COL): it has no "
                             f"{wanted!r} column; its columns are {', '.join(columns)}")
    placements = (partitioner,) if partitioner is not None else ()
    test = count_profile(files, key=column, placements=placements, time_col=time_col,
                         progress=progress)
    if progress is not None:
        progress("counting production's head keys in the test", None)
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
        length (``working_set.MEASURED_LENGTH_RATIO``), else Che's approximation at the
        shorter length.
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
    Kingman's heavy-traffic factor (IDC + 1), scales matched by mean requests per window
    (``hotshard.compare.burstiness``). A test without arrivals is reported as unknown, not
    judged.

    With a partitioner and a production profile that has timelines, a peak-window check
    compares production's peak window (``hotshard predict``'s: the window and shard with the
    largest share of that window's requests, an event's) with the test's same window: a test
    right on average that never has the event fails, naming the window it misses.

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
        checks.append(working_set(test, production, t, cache_size, cache_can_fail=False))
        if production.arrivals is not None:  # bursts make it optimistic, hide no hot spot
            checks.append(burstiness(test, production, t, can_fail=False))
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
            "space? (${allow_disjoint} compares anyway: every hot key then counts as hidden)")
    head, hidden = _head_coverage(test, production, t, tc)
    checks = [head, _top_shares(test, production, t), _tail(test, production, t),
              working_set(test, production, t, cache_size)]
    if production.arrivals is not None:
        checks.append(burstiness(test, production, t))
    if partitioner is not None:
        from hotshard.shards.predict import predict

        p, q = predict(production, partitioner), predict(test, partitioner)
        shard_check, hot = _shards(test, production, partitioner, t, p, q)
        checks.append(shard_check)
        if p.timeline is not None:
            checks.append(_peak_window(p, q, t))
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
        b = "integers" if production.integer_column else "text"
    if a != b:
        raise InputError(f"the test's keys are {a} ({', '.join(test.head_keys[:2])}) and "
                         f"production's {b} ({', '.join(production.head_keys[:2])}): not the "
                         "same key space; profile the same key column in the same id format")
