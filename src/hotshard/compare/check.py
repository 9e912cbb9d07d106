"""Would this load test hide a hot key or a hot shard? The generator's CI gate.

``check(test, production)`` compares the profile of a load test's keys with production's and
gives each check a verdict (pass / warn / fail) with its numbers. A ``fail`` means the test
would hide what production concentrates on one key or one shard, so a pipeline should refuse
it; a ``warn`` is a mismatch that makes the test pessimistic or different but hides nothing.
When production itself has no semantic hot spot, uniform test keys are right and pass.

Every threshold is a named field of ``Thresholds`` with the reason for its default, and can be
overridden.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

import numpy as np

from hotshard.errors import InputError
from hotshard.profile.model import Profile
from hotshard.profile.shape import ProfileShape, profile_shape

__all__ = ["Check", "CheckReport", "Thresholds", "check", "events_needed"]

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
        its production share: its load will not show up where production puts it.
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
    """

    head_fail: float = 0.5
    head_warn: float = 0.8
    share_fail: float = 0.5
    share_warn: float = 0.8
    share_high_warn: float = 1.25
    hidden_key_ratio: float = 0.5
    shard_fail: float = 0.8
    shard_warn: float = 0.95
    alpha_tolerance: float = 0.15
    cache_fail: float = 0.10
    cache_warn: float = 0.05
    working_set_warn: float = 2.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or isinstance(value, bool) \
                    or not math.isfinite(value) or value < 0:
                raise InputError(f"threshold {f.name} must be a number >= 0, got {value!r}")
        if self.head_fail > self.head_warn or self.share_fail > self.share_warn \
                or self.shard_fail > self.shard_warn:
            raise InputError("a fail threshold must not be above its warn threshold "
                             "(head_fail <= head_warn, share_fail <= share_warn, "
                             "shard_fail <= shard_warn)")
        if self.working_set_warn < 1:
            raise InputError(f"threshold working_set_warn must be >= 1, got "
                             f"{self.working_set_warn}")

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
        """1 when a check fails (the test would hide a hot key or shard), else 0."""
        return 1 if self.verdict == "fail" else 0

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "exit_status": self.exit_status,
                "checks": [c.to_dict() for c in self.checks],
                "hidden_keys": [{"key": k, "production_share": p, "test_share": t}
                                for k, p, t in self.hidden_keys],
                "hot_shard": self.hot_shard, "no_hot_spot": self.no_hot_spot,
                "events": {"test": self.test_events, "production": self.production_events}}


# -- helpers ------------------------------------------------------------------------------------
def _pct(x: float) -> str:
    v = 100 * x
    if v == 0 or v >= 10:
        return f"{v:.0f}%"
    if v >= 1:
        return f"{v:.1f}%"
    return f"{v:.{min(6, 1 - math.floor(math.log10(v)))}f}%"


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


def _test_shares(test: Profile, keys: tuple[str, ...],
                 counts: dict[str, float] | None) -> np.ndarray:
    """Test share of each key: exact from ``counts`` (the test's events of these keys) when
    given, else from the test's head (0 for a key outside it: its true share is at most the
    head's smallest, so the test under-covers by less than that per key)."""
    if counts is None:
        index = dict(zip(test.head_keys, np.asarray(test.head_counts, float), strict=True))
        counts = {k: index.get(k, 0.0) for k in keys}
    return np.array([float(counts.get(k, 0.0)) for k in keys]) / test.events


# -- the checks ---------------------------------------------------------------------------------
def _head_coverage(test: Profile, prod: Profile, t: Thresholds, t_share: np.ndarray,
                   exact: bool) -> tuple[Check, tuple[tuple[str, float, float], ...]]:
    keys = tuple(prod.head_keys)
    p_share = np.asarray(prod.head_counts, dtype=np.float64) / prod.events
    head_total = float(p_share.sum())
    coverage = float(np.minimum(p_share, t_share).sum() / head_total) if head_total else 1.0
    hidden_mask = t_share < t.hidden_key_ratio * p_share
    order = np.flatnonzero(hidden_mask)
    hidden = tuple((keys[i], float(p_share[i]), float(t_share[i])) for i in order)
    numbers = {"coverage": coverage, "production_head_keys": len(keys),
               "production_head_share": head_total, "hidden_keys": len(hidden),
               "hidden_share": float(p_share[hidden_mask].sum()),
               "test_counts": "exact" if exact else "from the test profile's head"}
    top = ", ".join(f"{k} ({_pct(p)} in production, {_pct(s)} in the test)"
                    for k, p, s in hidden[:3])
    verdict = _grade(coverage, t.head_fail, t.head_warn)
    msg = (f"the test puts {_pct(coverage)} of production's head traffic ({len(keys)} keys, "
           f"{_pct(head_total)} of all requests) on the same keys at up to their production "
           f"share")
    if hidden:
        msg += (f"; it hides {len(hidden)} hot keys carrying {_pct(numbers['hidden_share'])} of "
                f"production: {top}")
    return Check("head-coverage", verdict, msg, numbers), hidden


def _top_shares(test: Profile, prod: Profile, t: Thresholds) -> Check:
    ts, ps = test.dist.shares(), prod.dist.shares()
    ratios = {name: (ts[name] / ps[name] if ps[name] > 0 else float("inf"))
              for name in ("top1pct", "top10")}
    worst = min(ratios.values())
    high = max(ratios.values())
    verdict: Verdict = "fail" if worst < t.share_fail else (
        "warn" if worst < t.share_warn or high > t.share_high_warn else "pass")
    numbers = {"test_top1pct": ts["top1pct"], "production_top1pct": ps["top1pct"],
               "test_top10": ts["top10"], "production_top10": ps["top10"],
               "ratio_top1pct": ratios["top1pct"], "ratio_top10": ratios["top10"]}
    msg = (f"top 1% of keys carry {_pct(ts['top1pct'])} of the test against "
           f"{_pct(ps['top1pct'])} of production ({ratios['top1pct']:.2f}x); top 10 keys "
           f"{_pct(ts['top10'])} against {_pct(ps['top10'])} ({ratios['top10']:.2f}x)")
    if verdict == "fail":
        msg += ": the test spreads what production concentrates"
    elif high > t.share_high_warn:
        msg += ": the test is more concentrated than production (pessimistic)"
    return Check("top-shares", verdict, msg, numbers)


def _tail(test: Profile, prod: Profile, t: Thresholds) -> Check:
    tl, pl = test.tail.power_law, prod.tail.power_law
    if not tl or not pl or tl.get("alpha") is None or pl.get("alpha") is None:
        which = " and ".join(n for n, law in (("the test", tl), ("production", pl))
                             if not law or law.get("alpha") is None)
        return Check("tail-exponent", "pass", f"no power-law tail fitted for {which}: nothing "
                     "to compare", {})
    a_t, a_p = float(tl["alpha"]), float(pl["alpha"])
    se = math.hypot(float(tl.get("alpha_se") or 0.0), float(pl.get("alpha_se") or 0.0))
    allowed = max(t.alpha_tolerance, 3 * se)
    diff = a_t - a_p
    verdict: Verdict = "pass" if abs(diff) <= allowed else "warn"
    msg = (f"tail exponent {a_t:.2f} in the test against {a_p:.2f} in production "
           f"(difference {diff:+.2f}, allowed {allowed:.2f})")
    if verdict == "warn":
        msg += (": the test's tail is " + ("lighter (fewer, hotter tail keys: a smaller "
                                           "working set)" if diff > 0 else
                                           "heavier (more rare keys: a bigger working set)"))
    return Check("tail-exponent", verdict, msg,
                 {"test_alpha": a_t, "production_alpha": a_p, "difference": diff,
                  "allowed": allowed})


def _lru_hit(profile: Profile, capacity: float) -> float:
    from hotshard.sim.cache import che_hit_rates

    tail_counts, tail_keys = profile.tail.classes()
    rates = np.concatenate([np.asarray(profile.head_counts, float), tail_counts])
    mult = np.concatenate([np.ones(len(profile.head_counts)), tail_keys])
    keep = (rates > 0) & (mult > 0)
    return float(che_hit_rates(rates[keep], mult[keep], capacity).hit_rate)


def _expected_keys(profile: Profile, events: float) -> float:
    """Distinct keys that ``events`` draws from the profile's popularity touch, in expectation
    (each key of share p is seen unless all draws miss it: 1 - exp(-events p))."""
    tail_counts, tail_keys = profile.tail.classes()
    p = np.concatenate([np.asarray(profile.head_counts, float), tail_counts]) / profile.events
    m = np.concatenate([np.ones(len(profile.head_counts)), tail_keys])
    return float(np.sum(m * -np.expm1(-events * p)))


def _working_set(test: Profile, prod: Profile, t: Thresholds, cache_size: int | None) -> Check:
    expected = _expected_keys(prod, test.events)
    ratio = test.keys / expected if expected > 0 else float("inf")
    numbers: dict[str, Any] = {"test_keys": test.keys, "test_events": test.events,
                               "production_keys": prod.keys, "production_events": prod.events,
                               "production_keys_at_test_events": expected,
                               "keys_ratio": ratio}
    msg = (f"the test's {test.events:,.0f} events touch {test.keys:,.0f} distinct keys; "
           f"production's popularity would touch {expected:,.0f} in as many events "
           f"({ratio:.2f}x)")
    verdict: Verdict = "pass"
    if not 1 / t.working_set_warn <= ratio <= t.working_set_warn:
        verdict = "warn"
        msg += (": a bigger working set than production's" if ratio > 1 else
                ": a smaller working set than production's (it fits caches production's "
                "does not)")
    if cache_size is not None:
        h_t, h_p = _lru_hit(test, cache_size), _lru_hit(prod, cache_size)
        numbers.update(cache_size=cache_size, test_hit_rate=h_t, production_hit_rate=h_p)
        msg += (f"; an LRU cache of {cache_size:,} entries hits {_pct(h_t)} of the test and "
                f"{_pct(h_p)} of production (Che's approximation)")
        gap = h_t - h_p
        if gap > t.cache_fail:
            verdict = "fail"
            msg += ": the test's cache is warmer than production's can be (optimistic)"
        elif abs(gap) > t.cache_warn:
            verdict = max(verdict, "warn", key=_ORDER.__getitem__)
            msg += (": the test's cache is colder (pessimistic on latency, and it hides what "
                    "a warm cache does for production's hot keys)" if gap < 0 else
                    ": the test's cache is somewhat warmer")
    return Check("working-set", verdict, msg, numbers)


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
    msg = (f"on {partitioner.spec}: production's hottest shard {p.hottest} carries "
           f"{_pct(p_hot)} ({p.max_over_mean:.2f}x the mean), the test's hottest "
           f"{q.hottest} {_pct(q_hot)} ({q.max_over_mean:.2f}x)")
    if p_hot <= p.uniform_high:
        return Check("hot-shard", "pass", msg + "; production has no hot shard (within the "
                     f"uniform band, at most {_pct(p.uniform_high)})", numbers), None
    ratio = q_hot / p_hot
    numbers["ratio"] = ratio
    verdict = _grade(ratio, t.shard_fail, t.shard_warn)
    hot = None
    if verdict == "fail":
        keys = ", ".join(f"{k} ({_pct(s)})" for k, s in p.hottest_keys[:3])
        msg += (f": the test would hide hot shard {p.hottest} (its keys in production: "
                f"{keys}); the test puts {_pct(numbers['test_share_of_production_hot_shard'])}"
                " there")
        hot = {"shard": p.hottest, "production_share": p_hot,
               "test_share": numbers["test_share_of_production_hot_shard"],
               "keys": [{"key": k, "share": s} for k, s in p.hottest_keys]}
    elif q.hottest != p.hottest:
        msg += " (a different shard: the test's hot keys are not production's)"
    return Check("hot-shard", verdict, msg, numbers), hot


def _no_hot_spot(shape: ProfileShape) -> str:
    words = (f"production has no semantic hot spot: its busiest key carries "
             f"{_pct(shape.top1_share)} of events")
    if not math.isnan(shape.top1pct_vs_uniform):
        words += (f" and its top 1% of keys {_pct(shape.top1pct_share)} "
                  f"({shape.top1pct_vs_uniform:.2f}x their fair share)")
    if shape.uuid_keys:
        words += "; its keys are random identifiers (UUID-like)"
    return words + ": uniform test keys are right for it"


def check(test: Profile, production: Profile, *, partitioner=None,
          cache_size: int | None = None, thresholds: Thresholds | None = None,
          test_counts: dict[str, float] | None = None) -> CheckReport:
    """Compare a load test's key profile with production's.

    Parameters
    ----------
    test, production : Profile
        Profiles of the same key space (the test's keys profiled like production's).
    partitioner : hotshard.shards partitioner, optional
        Adds the hot-shard check: each profile placed by it (``hotshard predict``).
    cache_size : int, optional
        Adds LRU hit rates (Che's approximation) at this many entries to the working-set check.
    thresholds : Thresholds, optional
        When a check warns or fails.
    test_counts : dict, optional
        The test's exact events of production's head keys (``profile.count.count_keys``);
        without them, shares come from the test profile's head.

    Raises
    ------
    InputError
        The test has fewer events than the checks need (the message says how many), or the
        two profiles share no key at all (not the same key space).
    """
    t = thresholds or Thresholds()
    shape = profile_shape(production)
    if shape.near_uniform:
        if test.events < MIN_TEST_EVENTS:
            raise InputError(f"the test has {test.events:,.0f} events; the checks need at "
                             f"least {MIN_TEST_EVENTS:,}: profile a longer run of the test")
    else:
        need = events_needed(production)
        if test.events < need:
            raise InputError(
                f"the test has {test.events:,.0f} events; the checks need at least {need:,} "
                f"(so that production's {HEAD_KEYS_JUDGED}th key would be expected "
                f"{EXPECTED_COUNT} times): profile a longer run of the test")
    if shape.near_uniform:
        reason = _no_hot_spot(shape)
        checks = [Check("no-hot-spot", "pass", reason, {
            "production_top1_share": shape.top1_share,
            "production_top1pct_share": shape.top1pct_share,
            "production_top1pct_vs_uniform": shape.top1pct_vs_uniform,
            "uuid_keys": shape.uuid_keys})]
        checks.append(_working_set(test, production, t, cache_size))
        return CheckReport(tuple(checks), (), None, reason, test.events, production.events)
    t_share = _test_shares(test, tuple(production.head_keys), test_counts)
    if not (t_share > 0).any():
        _no_common_keys(test, production)
    head, hidden = _head_coverage(test, production, t, t_share, test_counts is not None)
    checks = [head, _top_shares(test, production, t), _tail(test, production, t),
              _working_set(test, production, t, cache_size)]
    hot = None
    if partitioner is not None:
        shard_check, hot = _shards(test, production, partitioner, t)
        checks.append(shard_check)
    return CheckReport(tuple(checks), hidden, hot, None, test.events, production.events)


def _key_format(profile: Profile) -> str:
    from hotshard.profile.shape import uuid_like

    keys = tuple(profile.head_keys)
    if profile.integer_keys:
        return "integers"
    return "UUID-like" if uuid_like(keys) else "text"


def _no_common_keys(test: Profile, production: Profile) -> None:
    """The test touches none of production's head keys. Keys of one format (integer ids, say)
    can simply miss: head coverage then fails, as it should. Keys of another format mean the
    two are not the same key space, and no check can compare them: refuse."""
    a, b = _key_format(test), _key_format(production)
    if a != b:
        sample_t = ", ".join(test.head_keys[:2])
        sample_p = ", ".join(production.head_keys[:2])
        raise InputError(f"the test and production share no key at all: the test's keys are "
                         f"{a} ({sample_t}), production's {b} ({sample_p}); profile the same "
                         "key column in the same id format")
