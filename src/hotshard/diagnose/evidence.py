"""The numbers a diagnosis weighs, computed once from observations and a profile.

Each function answers one question an expert asks of the evidence: is this per-shard spread
beyond what uniform keys could produce, does one shard pay more CPU per request, does the
profile have a semantic hot spot, how warm could a cache be. They return plain frozen values;
the judging (and the words) live in ``causes``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from hotshard.observations import Observations, ShardObservation
from hotshard.profile.document import Profile

__all__ = ["BAND_FALSE_ALARM", "CostSpread", "LoadSpread", "cost_ratios", "cost_spread",
           "load_spread", "rate_of", "uniform_cache_hit"]

# Family-wise false-alarm rate of the uniform band: the chance that uniform keys push *any* of
# the k shards above the band's top is at most this (Bonferroni over shards), so an observed
# shard above it is not noise at the 99.9% level whatever the shard count.
BAND_FALSE_ALARM = 0.001
# A shard's CPU over a window of at least one second, at any real service's rate, averages
# thousands of requests; a CPU spread that uniform keys could produce only over fewer requests
# than this is not noise.
MIN_PLAUSIBLE_WINDOW_REQUESTS = 1000
# CPU is not a count: background work, garbage collection and the sampling of a dashboard move
# a shard's CPU by several points whatever the keys. A CPU spread says "hot shard" only when
# the hottest shard is also at least this far above the median (1.5x, and 15 points), and
# "even" only when it is within 10% of the mean; in between, CPU alone cannot judge.
CPU_HOT_RATIO, CPU_HOT_POINTS, CPU_EVEN_RATIO = 1.5, 0.15, 1.1
# A uniform band wider than this (too few requests: uniform keys alone could put 1.3x the
# mean on one shard) cannot rule key skew out.
WIDE_BAND = 1.3


def rate_of(obs: Observations) -> float | None:
    """Requests per second the run actually carried: achieved when known, else offered, else
    requests over the window."""
    if obs.achieved_rps is not None:
        return float(obs.achieved_rps)
    if obs.rate_rps is not None:
        return float(obs.rate_rps)
    if obs.total_requests is not None and obs.duration_s:
        return obs.total_requests / obs.duration_s
    return None


@dataclass(frozen=True, slots=True)
class LoadSpread:
    """How unevenly load sits on the shards, against what uniform keys could produce.

    ``basis`` says what was compared: per-shard ``requests`` (the direct evidence of where the
    keys land) or ``cpu`` (load through the service's cost; used when requests are missing).
    ``band_max_over_mean`` is the top of the uniform band for the hottest shard's value over
    the mean (99.9%, every shard at once); ``outside`` says the observation is beyond it.
    For the CPU basis without a request count, ``requests_needed`` is the largest window in
    requests for which uniform keys could give this spread.
    """

    basis: str
    shards: int
    hottest: ShardObservation
    hottest_share: float  # of requests or of total CPU
    max_over_mean: float
    max_over_median: float
    median_value: float
    band_max_over_mean: float | None
    requests: float | None  # the count the band was computed for
    keys: float | None
    requests_needed: float | None
    outside: bool  # beyond anything uniform keys produce (and, on CPU, beyond CPU noise)
    even: bool  # as even as uniform keys make it, with enough data to say so

    @property
    def excess(self) -> float:
        """How many band widths above the mean the hottest shard sits (1 = on the band)."""
        if self.band_max_over_mean is not None and self.band_max_over_mean > 1:
            return (self.max_over_mean - 1) / (self.band_max_over_mean - 1)
        if self.requests_needed is not None:
            return math.sqrt(MIN_PLAUSIBLE_WINDOW_REQUESTS / max(self.requests_needed, 1e-9))
        return 0.0


# Beyond this many requests the binomial tail is computed by its normal approximation: with
# n p (1 - p) above ~10^5 for any shard count here, their quantiles differ by well under 0.1%,
# and an absurd count (2^62, or rate x duration overflowing to inf) must not hang the judge.
EXACT_TAIL_MAX_REQUESTS = 1e8


def _z(shards: int) -> float:
    return float(norm.isf(BAND_FALSE_ALARM / shards))


def _band(shards: int, requests: float, keys: float | None) -> float:
    """Top of the uniform band for max/mean: a shard's share of requests under uniform keys
    has variance p(1 - p)(1/K + 1/N) (which keys it owns, then which requests hit them). The
    request part alone is binomial, whose upper tail the normal approximation understates at
    small counts: the band is the wider of the two."""
    from scipy.stats import binom

    p = 1.0 / shards
    inv_keys = 0.0 if not keys else 1.0 / keys
    sd = math.sqrt(p * (1 - p) * (inv_keys + 1.0 / max(requests, 1.0)))
    normal = 1.0 + _z(shards) * sd / p
    if requests > EXACT_TAIL_MAX_REQUESTS:  # the normal tail is exact enough, and scipy's
        return normal                       # binomial inverse would search for hours
    n = max(int(round(requests)), 1)
    exact = float(binom.isf(BAND_FALSE_ALARM / shards, n, p)) / (n * p)
    return max(normal, exact)


def load_spread(obs: Observations) -> LoadSpread | None:
    """The per-shard spread of ``obs`` and its uniform band; None without per-shard load."""
    values: tuple[float, ...] | None = obs.shard_requests
    basis = "requests"
    if values is None or sum(values) == 0:
        values, basis = obs.shard_cpu, "cpu"
    if values is None or len(values) < 2 or sum(values) <= 0:
        return None
    arr = np.asarray(values, dtype=np.float64)
    k = arr.size
    hot = int(np.argmax(arr))
    mean, median = float(arr.mean()), float(np.median(arr))
    mom = float(arr[hot] / mean)
    mod = float(arr[hot] / median) if median > 0 else math.inf
    keys = float(obs.distinct_keys) if obs.distinct_keys else None
    requests: float | None = float(arr.sum()) if basis == "requests" else None
    if requests is None:
        rate = rate_of(obs)
        if rate is not None and obs.duration_s:
            requests = rate * float(obs.duration_s)
    needed = None
    if requests is not None:
        band = _band(k, requests, keys)
        outside = mom > band
        even = not outside and band <= WIDE_BAND
    else:
        band = None
        p = 1.0 / k
        needed = (_z(k) ** 2 * (1 - p) / p / (mom - 1) ** 2) if mom > 1 else math.inf
        outside = needed < MIN_PLAUSIBLE_WINDOW_REQUESTS
        even = False
    if basis == "cpu":
        beyond_noise = mod >= CPU_HOT_RATIO and arr[hot] - median >= CPU_HOT_POINTS
        outside = outside and beyond_noise
        even = mom <= CPU_EVEN_RATIO
    return LoadSpread(basis, k, obs.shards[hot], float(arr[hot] / arr.sum()), mom, mod, median,
                      band, requests, keys, needed, outside, even)


@dataclass(frozen=True, slots=True)
class CostSpread:
    """CPU per request on each shard: a slow node pays more CPU for the same requests."""

    hottest: ShardObservation  # by CPU
    ratio: float  # its CPU per request over the median shard's
    hottest_request_share: float
    slow_node: str | None  # a node all of whose shards (>= 2) pay >= 2x the median cost
    slow_node_ratio: float | None


def cost_ratios(obs: Observations) -> np.ndarray | None:
    """Each shard's CPU per request over the median shard's, in shard order; None without
    per-shard CPU and requests (every shard with some) or when the median shard costs 0."""
    cpu, req = obs.shard_cpu, obs.shard_requests
    if cpu is None or req is None or min(req) <= 0:
        return None
    cost = np.asarray(cpu, float) / np.asarray(req, float)
    median = float(np.median(cost))
    return cost / median if median > 0 else None


def cost_spread(obs: Observations) -> CostSpread | None:
    """Per-request CPU of the CPU-hottest shard against the median; None without both per-shard
    CPU and requests."""
    ratios = cost_ratios(obs)
    if ratios is None:
        return None
    cpu_a = np.asarray(obs.shard_cpu, float)
    req_a = np.asarray(obs.shard_requests, float)
    hot = int(np.argmax(cpu_a))
    slow_node, slow_ratio = None, None
    nodes: dict[str, list[int]] = {}
    for i, shard in enumerate(obs.shards):
        if shard.node is not None:
            nodes.setdefault(shard.node, []).append(i)
    if len(nodes) >= 2:
        for node, members in nodes.items():
            ratio = float(np.min(ratios[members]))
            if len(members) >= 2 and ratio >= 2 and (slow_ratio is None or ratio > slow_ratio):
                slow_node, slow_ratio = node, ratio
    return CostSpread(obs.shards[hot], float(ratios[hot]),
                      float(req_a[hot] / req_a.sum()), slow_node, slow_ratio)


def uniform_cache_hit(profile: Profile, production_hit: float, test_keys: float
                      ) -> tuple[float, float, str] | None:
    """(cache entries, uniform test hit rate, how the size was found): the LRU size at which
    the profile's traffic hits ``production_hit`` of the time, and what uniform keys over
    ``test_keys`` keys would hit in that same cache (C / K). The size comes from the
    profile's measured LRU curve when it has a locality section (production's own reuse,
    bursts included), else from Che's approximation (independent references, which
    overstates the cache a bursty stream needs). None when no size reaches it."""
    if profile.locality is not None:
        loc = profile.locality
        if not 0 < production_hit < 1 or production_hit > loc.curve_hits[-1]:
            return None
        size = float(np.exp(np.interp(production_hit, loc.curve_hits,
                                      np.log(loc.curve_sizes.astype(np.float64)))))
        return size, min(1.0, size / max(test_keys, 1.0)), "the profile's measured LRU curve"
    from hotshard.sim.cache import che_hit_rates

    rates, mult = profile.dist.popularity()
    total_keys = float(mult.sum())
    if not 0 < production_hit < 1 or total_keys < 2:
        return None
    lo, hi = 0.0, total_keys * 0.999
    if che_hit_rates(rates, mult, hi).hit_rate < production_hit:
        return None
    for _ in range(60):  # bisection on the capacity: hit rate rises with the cache size
        mid = math.sqrt(max(lo, 1.0) * hi) if hi / max(lo, 1.0) > 4 else (lo + hi) / 2
        if che_hit_rates(rates, mult, mid).hit_rate < production_hit:
            lo = mid
        else:
            hi = mid
        if hi - lo <= max(1.0, 1e-3 * hi):
            break
    return hi, min(1.0, hi / max(test_keys, 1.0)), "Che's approximation"
