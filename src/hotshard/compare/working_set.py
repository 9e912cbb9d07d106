"""Does the test touch as many distinct keys as production, and would a cache hit as often?
The working-set check of ``hotshard check``.

Runs of different lengths are compared at the shorter one's length: the distinct keys each
profile is expected to show in that many events (rarefaction of its own counts, never an
extrapolation beyond them). A working set more than ``Thresholds.working_set_warn`` apart
warns. Given a cache size, the LRU hit rates of both: each stream's measured LRU curve, in its
own order (bursts and reuse included), when both profiles have a locality section of
comparable length (``MEASURED_LENGTH_RATIO``), else Che's approximation on each popularity at
the shorter length, first-time misses included. A test whose cache is much warmer than
production's is optimistic everywhere and fails; a colder one warns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hotshard._format import pct
from hotshard.compare.verdicts import Check, Thresholds, Verdict, worst
from hotshard.profile.document import Profile

__all__ = ["MEASURED_LENGTH_RATIO", "rarefied_keys", "working_set"]

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


def working_set(test: Profile, prod: Profile, t: Thresholds, cache_size: int | None, *,
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
            verdict = worst(verdict, "warn")
            msg += (": the test's cache is colder (pessimistic on latency, and it hides what "
                    "a warm cache does for production's hot keys)" if gap < 0 else
                    ": the test's cache is somewhat warmer")
    return Check("working-set", verdict, msg, numbers)
