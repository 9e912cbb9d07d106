"""One judge per explanation: the expert's reasoning, each verdict with its numbers.

A judge reads the ``Evidence`` (observations, profile, and the statistics computed from them)
and returns a ``Finding``. Judges never raise on missing data: what they lack becomes a
``cannot judge`` verdict naming the missing fields, so a hand-written observations file with
half the fields still gets every answer it can support.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hotshard._format import count, ms, pct, rps, times
from hotshard.diagnose.evidence import (
    CostSpread,
    LoadSpread,
    cost_ratios,
    rate_of,
    uniform_cache_hit,
)
from hotshard.diagnose.findings import Finding
from hotshard.observations import Observations
from hotshard.profile.document import Profile
from hotshard.profile.shape import ProfileShape

__all__ = ["JUDGES", "Evidence", "TYPICAL_CROSS_ZONE_RTT_MS", "finding_numbers"]

# A cross-zone round trip inside one cloud region: about a millisecond (0.5-2 ms); used when
# the observations do not give network.cross_zone_rtt_ms, and said so.
TYPICAL_CROSS_ZONE_RTT_MS = 1.0
# A request crosses the extra hop a few times at most (request and response, plus a connection
# set-up when connections are not reused): a gap beyond this many RTTs is not the hop's.
HOP_ROUND_TRIPS = 3
# Uniform keys over this many distinct keys are a "huge key space" for any cache.
# (100 M keys: more than any per-process cache or page cache holds; 1 M would fit in a GB)
HUGE_KEY_SPACE = 100_000_000
# CPU per request on one shard at least this many times the median shard's means that shard's
# machine is slow; below HOT_NODE_CLEAR it is busy only because it serves more requests.
HOT_NODE_RATIO = 2.0
HOT_NODE_CLEAR = 1.5


@dataclass(frozen=True, slots=True)
class Evidence:
    production: Observations
    baseline: Observations | None
    profile: Profile | None
    spread: LoadSpread | None  # production's
    baseline_spread: LoadSpread | None
    cost: CostSpread | None  # production's
    baseline_cost: CostSpread | None
    shape: ProfileShape | None

    @property
    def hot_shard(self) -> bool:
        """Production's load is beyond anything uniform keys produce."""
        return self.spread is not None and self.spread.outside

    @property
    def even(self) -> bool:
        """Production's load is as even as uniform keys make it, with data enough to say."""
        return self.spread is not None and self.spread.even


# -- words --------------------------------------------------------------------------------------
def _spread_words(s: LoadSpread, who: str) -> str:
    """One sentence: the hottest shard against the uniform band."""
    if s.basis == "requests":
        band = (f"uniform keys over {count(s.requests)} requests"
                + (f" and {count(s.keys)} keys" if s.keys else "")
                + f" keep every shard below {times(s.band_max_over_mean)} the mean (99.9%, all "
                  f"{s.shards} shards)")
        return (f"{who}'s shard {s.hottest.id} served {pct(s.hottest_share)} of the requests, "
                f"{times(s.max_over_mean)} the mean share of {pct(1 / s.shards)}; {band}")
    cpu_hot = s.hottest.cpu if s.hottest.cpu is not None else 0.0
    head = (f"{who}'s shard {s.hottest.id} ran at {pct(cpu_hot)} CPU against a median of "
            f"{pct(s.median_value)} ({times(s.max_over_mean)} the mean over {s.shards} shards)")
    if s.band_max_over_mean is not None:
        return (head + f"; with CPU following requests, uniform keys over {count(s.requests)} "
                f"requests keep every shard below {times(s.band_max_over_mean)} the mean")
    if s.requests_needed is not None and math.isfinite(s.requests_needed):
        return (head + f"; uniform keys spread CPU this unevenly only over windows of fewer "
                f"than {count(max(s.requests_needed, 1))} requests")
    return head


def _latency_gap(ev: Evidence) -> tuple[float, float] | None:
    """(production p99, test p99) when both are known."""
    p = ev.production.latency_ms
    t = ev.baseline.latency_ms if ev.baseline is not None else None
    if p is None or t is None or p.p99 is None or t.p99 is None:
        return None
    return p.p99, t.p99


def measured_at(obs: Observations) -> str:
    """Where a run's latency was measured, in words: at the client (a load driver, from each
    request's intended send), at the server (a service's own histogram read by an
    observer), or by a model."""
    if isinstance(obs.extra.get("drive"), dict):
        return "at the client (drive, from the intended send)"
    if isinstance(obs.extra.get("simulation"), dict):
        return "by the model (simulate)"
    source = obs.extra.get("observe", {})
    kind = source.get("source") if isinstance(source, dict) else None
    if kind in ("prometheus", "redis-cluster"):
        return f"at the server ({kind})"
    if kind in ("k6", "locust"):
        return f"at the client ({kind})"
    return "where the file does not say"


def _where(ev: Evidence) -> str:
    """The two p99s' places, when they differ: a server's p99 leaves out the network and the
    client's queue a client's holds, so the two are not the same quantity."""
    if ev.baseline is None:
        return ""
    a, b = measured_at(ev.production), measured_at(ev.baseline)
    if a == b:
        return ""
    return f" (production's measured {a}, the test's {b}: not the same quantity)"


def _not_slower(ev: Evidence) -> tuple[float, float] | None:
    """(production p99, test p99) when production is not slower than the test (within 10%):
    then there is no latency gap for a measuring or environment cause to explain."""
    gap = _latency_gap(ev)
    if gap is not None and gap[0] <= 1.1 * gap[1]:
        return gap
    return None


def _shard_p99_spread(obs: Observations) -> tuple[str, float, float] | None:
    """(slowest shard id, its p99, the median shard's p99) when every shard reports p99."""
    values = [s.p99_ms for s in obs.shards]
    if len(values) < 2 or any(v is None for v in values):
        return None
    slow = max(range(len(values)), key=values.__getitem__)
    return obs.shards[slow].id, float(values[slow]), float(np.median(values))


# -- the judges ---------------------------------------------------------------------------------
def judge_key_skew(ev: Evidence) -> Finding:
    s = ev.spread
    if s is None:
        return Finding("key-skew", "cannot judge", 0.3, (
            "production has no per-shard load to test against uniform keys",),
            ("per-shard requests (or CPU) in production's shards",))
    evidence = [_spread_words(s, "production")]
    if ev.shape is not None:
        fair = 1 / s.shards
        evidence.append(f"the profile's busiest key alone carries {pct(ev.shape.top1_share)} of "
                        f"events ({times(ev.shape.top1_share / fair)} one shard's fair share) "
                        f"and its top 1% of keys {pct(ev.shape.top1pct_share)}")
    b = ev.baseline_spread
    if b is not None:
        gen = ev.baseline.key_generator if ev.baseline is not None else None
        evidence.append(
            f"the load test{' (' + gen + ' keys)' if gen else ''} spread its load "
            + ("evenly" if not b.outside else "unevenly too")
            + f": hottest shard {times(b.max_over_mean)} the mean"
            + (", so it could not show a hot shard" if not b.outside else ""))
    slow = _shard_p99_spread(ev.production)
    if slow is not None and slow[2] > 0 and slow[1] >= 3 * slow[2]:
        from hotshard.diagnose.windows import slow_shard_words

        evidence.append(slow_shard_words(ev.production, slow[0], slow[1], slow[2],
                                         s.hottest.id))
    if s.even:
        # the narrower the band (the more requests), the firmer the rejection
        firm = 1.0 if s.band_max_over_mean is None else min(
            1.0, 0.1 / max(s.band_max_over_mean - 1, 1e-9))
        return Finding("key-skew", "contradicted", 0.5 + 0.45 * firm,
                       (evidence[0] + ": production's load is as even as uniform keys make it",
                        *evidence[1:]))
    if not s.outside:
        why = ("too few requests to tell: uniform keys alone could put "
               f"{times(s.band_max_over_mean)} the mean on one shard"
               if s.basis == "requests" else
               "a CPU spread this small is within what background work and measurement "
               "move a shard's CPU")
        return Finding("key-skew", "cannot judge", 0.4, (evidence[0], why, *evidence[1:]),
                       ("per-shard requests over a longer window",))
    score = 1 - 0.5 / max(s.excess, 1.0)
    if s.basis == "cpu":
        score *= 0.85
        evidence.append("per-shard request counts would confirm that the hot shard serves more "
                        "requests rather than slower ones")
    return Finding("key-skew", "fits", score, (*evidence, "this spread is not noise: the keys "
                                               "concentrate load on one shard"))


def judge_coordinated_omission(ev: Evidence) -> Finding:
    t = ev.baseline
    if t is None:
        return Finding("coordinated-omission", "cannot judge", 0.3, (
            "no load test to judge: coordinated omission is a flaw of how a test measures",),
            ("the load test's observations, with its model and rate",))
    if t.model is None:
        return Finding("coordinated-omission", "cannot judge", 0.3, (
            "the load test does not say whether it ran open- or closed-loop",),
            ('the load test\'s "model": "open" or "closed"',))
    if t.model == "open":
        evidence = ["the load test ran open-loop: each request was sent on its schedule and "
                    "timed from its intended send, so no waiting was omitted"]
        if t.latency_ms is not None and t.service_time_ms is not None \
                and t.latency_ms.p99 is not None and t.service_time_ms.p99 is not None:
            evidence.append(f"its p99 from intended send {ms(t.latency_ms.p99)} against "
                            f"{ms(t.service_time_ms.p99)} from actual send")
        return Finding("coordinated-omission", "contradicted", 0.9, tuple(evidence))
    t_rate, p_rate = rate_of(t), rate_of(ev.production)
    evidence = ["the load test ran closed-loop: a fixed pool of clients each waiting for its "
                "answer sends less while the service is slow, and omits those waits"]
    reasons = []
    if ev.hot_shard:
        reasons.append("it makes a test under-report latency for every request alike; it "
                       f"cannot put {pct(ev.spread.hottest_share)} of production's load on "
                       f"shard {ev.spread.hottest.id}")
    same = _not_slower(ev)
    if same is not None:
        reasons.append(f"production's p99 ({ms(same[0])}) is not above the test's "
                       f"({ms(same[1])}){_where(ev)}: nothing was hidden that production "
                       "shows")
    if t_rate is not None and p_rate is not None and t_rate > 1.05 * p_rate:
        reasons.append(f"the test pushed {rps(t_rate)}, more than production's {rps(p_rate)}: "
                       "omitted waits lower a test's load, and this one still out-sent production")
    if reasons:
        return Finding("coordinated-omission", "contradicted",
                       0.85 if len(reasons) >= 2 else 0.7, (*evidence, *reasons))
    if t_rate is not None and p_rate is not None:
        evidence.append(f"the test's throughput {rps(t_rate)} is at or below production's "
                        f"{rps(p_rate)}, as a stalled closed loop's is")
    gap = _latency_gap(ev)
    if gap is not None:
        evidence.append(f"p99 {ms(gap[1])} in the test against {ms(gap[0])} in production"
                        f"{_where(ev)}")
    if ev.even and t_rate is not None and p_rate is not None:
        evidence.append("production's shards are evenly loaded "
                        f"({times(ev.spread.max_over_mean)} the mean at most), so the gap is in "
                        "how the test measured, not where keys landed")
        return Finding("coordinated-omission", "fits", 0.8, tuple(evidence))
    missing = []
    if t_rate is None or p_rate is None:
        missing.append("the achieved rate of both runs (a closed loop that omitted waits "
                       "sent less than production)")
    if not ev.even:
        missing.append("per-shard requests in production, enough to show them even")
    return Finding("coordinated-omission", "cannot judge", 0.5, (
        *evidence, "the evidence that would make it fit is incomplete"), tuple(missing))


def judge_cache_warmth(ev: Evidence) -> Finding:
    t, p = ev.baseline, ev.production
    if t is None:
        return Finding("cache-warmth", "cannot judge", 0.2, (
            "no load test to compare caches with",),
            ("the load test's observations, with cache_hit_rate",))
    evidence: list[str] = []
    uniform = (t.key_generator or "").lower().startswith("uniform")
    inferred = None
    if uniform and ev.profile is not None and p.cache_hit_rate is not None and t.distinct_keys:
        inferred = uniform_cache_hit(ev.profile, p.cache_hit_rate, t.distinct_keys)
        if inferred is not None:
            evidence.append(
                f"a cache that gives production's keys (the profile) a {pct(p.cache_hit_rate)} "
                f"hit rate holds about {count(inferred[0])} keys ({inferred[2]}); uniform "
                f"keys over the test's {count(t.distinct_keys)} keys hit it "
                f"{pct(inferred[1])} of the time")
    if t.cache_hit_rate is not None and p.cache_hit_rate is not None:
        diff = t.cache_hit_rate - p.cache_hit_rate
        words = (f"the test's cache hit rate was {pct(t.cache_hit_rate)} against production's "
                 f"{pct(p.cache_hit_rate)}")
        if diff <= 0.02:
            return Finding("cache-warmth", "contradicted", min(0.95, 0.6 + abs(diff)), (
                words + (": its cache was colder, which made the test pessimistic on this "
                         "axis, not optimistic" if diff < 0 else
                         ": no warmer than production's"), *evidence))
        reason = [words + ": the test's cache was warmer"]
        if ev.hot_shard:
            reason.append("a warm cache lowers latency on every shard; it does not explain "
                          "one hot shard")
        return Finding("cache-warmth", "fits", min(0.9, 0.4 + diff) * (0.5 if ev.hot_shard else 1),
                       (*reason, *evidence))
    if inferred is not None and inferred[1] < p.cache_hit_rate:
        return Finding("cache-warmth", "contradicted", 0.8, (
            *evidence, "so the test's cache must have been colder than production's"))
    if inferred is not None and inferred[1] > p.cache_hit_rate + 0.02:
        return Finding("cache-warmth", "fits", 0.5 if ev.hot_shard else 0.7, (
            *evidence, "so the test's cache must have been warmer than production's (its "
                       "key space nearly fits the cache)"),
            ("the test's measured cache_hit_rate would confirm it",))
    if uniform and t.distinct_keys and t.distinct_keys >= HUGE_KEY_SPACE:
        return Finding("cache-warmth", "contradicted", 0.65, (
            f"the test drew uniform keys over {count(t.distinct_keys)} keys: an LRU cache of C "
            "entries then hits C/K, the least any key popularity gives, so it could not be "
            "warmer than production's unless it held most of the key space",),
            ("cache_hit_rate in both observations would measure it",))
    missing = [name for name, obs in (("the test", t), ("production", p))
               if obs.cache_hit_rate is None]
    return Finding("cache-warmth", "cannot judge", 0.3, (
        "hit rates are not known for " + " and ".join(missing),),
        tuple(f"cache_hit_rate in {m}'s observations" for m in missing)
        + (("the test's key_generator and distinct_keys",) if not uniform else ()))


def judge_network(ev: Evidence) -> Finding:
    p, t = ev.production, ev.baseline
    rtt = None
    for obs in (p, t):
        if obs is not None and obs.network and isinstance(
                obs.network.get("cross_zone_rtt_ms"), int | float):
            rtt = float(obs.network["cross_zone_rtt_ms"])
            break
    assumed = rtt is None
    rtt = TYPICAL_CROSS_ZONE_RTT_MS if rtt is None else rtt
    hop = (f"the {ms(rtt)} a cross-zone round trip costs"
           + (" (a typical in-region figure; give network.cross_zone_rtt_ms)" if assumed
              else ""))
    gap = _latency_gap(ev)
    evidence = []
    if gap is not None:
        extra = gap[0] - gap[1]
        evidence.append(
            f"production's p99 is {ms(gap[0])} against the test's {ms(gap[1])}{_where(ev)}: "
            + (f"{ms(extra)} more, {times(extra / rtt)} {hop}" if extra > 0 and rtt > 0 else
               f"{ms(extra)} more, where the hop costs nothing measurable" if extra > 0 else
               f"no extra latency for a hop to explain ({hop})"))
    if ev.hot_shard:
        return Finding("network", "contradicted", 0.9, (
            *evidence, "a network hop adds the same to every shard's requests and no server "
                       f"CPU; production's load is {times(ev.spread.max_over_mean)} the mean on "
                       f"shard {ev.spread.hottest.id} alone"))
    if gap is None:
        return Finding("network", "cannot judge", 0.3, (
            f"no latency gap to compare with {hop}",),
            ("latency_ms.p99 in production and in the load test",))
    extra = gap[0] - gap[1]
    if _not_slower(ev) is not None:
        return Finding("network", "contradicted", 0.7, (
            *evidence, "production is not slower than the test: there is no gap to explain"))
    if extra <= HOP_ROUND_TRIPS * rtt:
        return Finding("network", "fits", 0.7 if not assumed else 0.55, (
            *evidence, f"a gap within {HOP_ROUND_TRIPS} round trips is what an extra hop costs"))
    return Finding("network", "contradicted", 0.6 if not assumed else 0.5, (
        *evidence, f"a hop adds at most a few round trips ({ms(HOP_ROUND_TRIPS * rtt)}); only "
                   "packet loss (retransmission timeouts of 200 ms and more) reaches hundreds, "
                   "and that would show in the network's own counters"))


def judge_payload_size(ev: Evidence) -> Finding:
    p, t = ev.production, ev.baseline
    ratio = None
    evidence = []
    if t is not None and p.payload_bytes_mean and t.payload_bytes_mean:
        ratio = p.payload_bytes_mean / t.payload_bytes_mean
        sizes = (f"production's mean payload is {count(p.payload_bytes_mean)} B against the "
                 f"test's {count(t.payload_bytes_mean)} B ({times(ratio)})")
        evidence.append(sizes + (f": the cost of bytes is roughly linear, so every shard's work "
                                 f"would grow about {times(ratio)}" if ratio > 1.1 else
                                 ": production's requests are not bigger"))
    if ev.hot_shard:
        return Finding("payload-size", "contradicted", 0.85, (
            *evidence, "payload cost is paid per request on every shard alike; it cannot make "
                       f"shard {ev.spread.hottest.id} carry {times(ev.spread.max_over_mean)} "
                       "the mean shard's load"))
    if ratio is None:
        unknown = [name for name, obs in (("production", p), ("the test", t))
                   if obs is None or not obs.payload_bytes_mean]
        return Finding("payload-size", "cannot judge", 0.3, (
            "payload sizes are not known for " + " or ".join(unknown),),
            ("payload_bytes_mean in production and in the load test",))
    if ratio <= 1.1:
        return Finding("payload-size", "contradicted", 0.8, tuple(evidence))
    cost_p, cost_t = _cpu_per_request(p), _cpu_per_request(t)
    if cost_p is not None and cost_t is not None and cost_t > 0:
        # the direct evidence: CPU per request follows the bytes (latency near saturation
        # grows far faster than the work, so it is no measure of the cost)
        grew = cost_p / cost_t
        evidence.append(f"CPU per request grew {times(grew)} (from {cost_t * 1000:.2f} to "
                        f"{cost_p * 1000:.2f} ms of CPU)")
        if ratio / 2 <= grew <= 2 * ratio and grew > 1.1:
            return Finding("payload-size", "fits", 0.75, (
                *evidence, "the work per request grew with the bytes, on every shard"))
        return Finding("payload-size", "contradicted", 0.65, (
            *evidence, f"{times(ratio)} the bytes did not change the work per request by as "
                       "much"))
    gap = _latency_gap(ev)
    if gap is not None and gap[1] > 0:
        seen = gap[0] / gap[1]
        evidence.append(f"latency grew {times(seen)} (p99)")
        if seen <= 1.1:
            return Finding("payload-size", "contradicted", 0.6, (
                *evidence, "bigger payloads did not make production slower"))
        if seen <= 2 * ratio:
            return Finding("payload-size", "fits", 0.65, (
                *evidence, "growth in line with the bytes, on every shard"))
        return Finding("payload-size", "contradicted", 0.6, (
            *evidence, f"bigger payloads by {times(ratio)} cannot make {times(seen)}"))
    return Finding("payload-size", "fits", 0.4, tuple(evidence),
                   ("latency_ms.p99 in both runs, to check the size of the effect",))


def _cpu_per_request(obs: Observations | None) -> float | None:
    """CPU-seconds per request over all shards (the busy fractions summed over the rate)."""
    if obs is None:
        return None
    cpu, rate = obs.shard_cpu, rate_of(obs)
    if cpu is None or not rate:
        return None
    return sum(cpu) / rate


def _cost_ratio_of(obs: Observations, shard_id: str) -> float | None:
    """``shard_id``'s CPU per request over the median shard's in ``obs``, when it says."""
    ratios = cost_ratios(obs)
    ids = [s.id for s in obs.shards]
    if ratios is None or shard_id not in ids:
        return None
    return float(ratios[ids.index(shard_id)])

def _other_keys(ev: Evidence) -> bool:
    """The load test drew other keys than production's (uniform, zipf, ...): then a shard that
    stays slow in it is slow whatever keys it holds."""
    gen = (ev.baseline.key_generator or "").lower() if ev.baseline is not None else ""
    return bool(gen) and gen not in ("profile", "production")


def judge_hot_node(ev: Evidence) -> Finding:
    c = ev.cost
    tb = ev.baseline_cost
    evidence = []
    other = _other_keys(ev)
    if tb is not None and other and tb.ratio >= HOT_NODE_RATIO:
        evidence.append(f"in the load test ({ev.baseline.key_generator} keys) shard "
                        f"{tb.hottest.id} also paid {times(tb.ratio)} the median CPU per request")
    if c is not None and c.ratio >= HOT_NODE_RATIO and other:
        in_test = _cost_ratio_of(ev.baseline, c.hottest.id)
        if in_test is not None and in_test <= HOT_NODE_CLEAR:
            return Finding("hot-node", "contradicted", 0.8, (
                f"shard {c.hottest.id} pays {times(c.ratio)} the median CPU per request in "
                f"production but {times(in_test)} with the test's {ev.baseline.key_generator} "
                "keys: the cost follows production's keys (a key whose requests cost more, "
                "such as a huge history), not the machine",))
    if c is None:
        s = ev.spread
        if other and s is not None and s.basis == "cpu" and ev.baseline_spread is not None \
                and ev.baseline_spread.outside and ev.baseline_spread.basis == "cpu" \
                and ev.baseline_spread.hottest.id == s.hottest.id:
            return Finding("hot-node", "fits", 0.6, (
                f"shard {s.hottest.id} is the hottest in production and in the load test "
                "alike, whatever keys each sent it",))
        return Finding("hot-node", "cannot judge", 0.3, (
            "CPU per request (which tells a slow node from a busy one) needs per-shard CPU and "
            "requests",),
            ("per-shard cpu and requests in production",))
    share = f"{pct(c.hottest_request_share)} of the requests"
    if c.slow_node is not None:
        return Finding("hot-node", "fits", min(0.95, 0.6 + 0.05 * c.slow_node_ratio), (
            f"every shard on node {c.slow_node} pays at least {times(c.slow_node_ratio)} the "
            "median CPU per request: the node is slow on every key it holds", *evidence))
    if c.ratio >= HOT_NODE_RATIO:
        even = ev.spread is not None and ev.spread.basis == "requests" and not ev.spread.outside
        return Finding("hot-node", "fits", min(0.95, 0.5 + 0.1 * c.ratio) if even else 0.6, (
            f"shard {c.hottest.id} runs at {pct(c.hottest.cpu)} CPU on {share}: "
            f"{times(c.ratio)} the median shard's CPU per request, so its machine is slow "
            "(noisy neighbour, CPU steal, a failing disk, a background job), not its keys hot",
            *evidence))
    if c.ratio <= HOT_NODE_CLEAR:
        busy = c.hottest_request_share > 1.5 / len(ev.production.shards)
        return Finding("hot-node", "contradicted", min(0.95, 0.9 - 0.2 * abs(c.ratio - 1)), (
            f"the busiest shard by CPU, {c.hottest.id}, pays {times(c.ratio)} the median "
            f"shard's CPU per request while serving {share}: "
            + ("it is busy because it serves more requests, not slow" if busy else
               "its CPU follows its requests; no machine is slower than the others"),
            *evidence))
    return Finding("hot-node", "cannot judge", 0.4, (
        f"shard {c.hottest.id} pays {times(c.ratio)} the median CPU per request: between a "
        "busy shard and a slow node", *evidence),
        ("the same shard's CPU per request in a run with other keys (a uniform load test)",))


def judge_no_hot_spot(ev: Evidence) -> Finding:
    shape, s = ev.shape, ev.spread
    evidence = []
    if shape is not None:
        evidence.append(f"the profile's busiest key carries {pct(shape.top1_share)} of "
                        f"{count(shape.events)} events over {count(shape.keys)} keys, its top 1% "
                        f"of keys {pct(shape.top1pct_share)} "
                        f"({times(shape.top1pct_vs_uniform)} what uniform keys give)"
                        if not math.isnan(shape.top1pct_vs_uniform) else
                        f"the profile's busiest key carries {pct(shape.top1_share)} of events")
        if shape.uuid_keys:
            evidence.append("its keys are random identifiers (UUID-like): no natural grouping "
                            "queries them together")
    if s is not None and s.basis == "requests":
        evidence.append(f"production's requests sit within the uniform band on every shard "
                        f"({times(s.max_over_mean)} the mean at most)" if s.even else
                        f"production's requests are {times(s.max_over_mean)} the mean on shard "
                        f"{s.hottest.id}, beyond the uniform band" if s.outside else
                        f"production's {count(s.requests)} requests are too few to show how "
                        "evenly keys spread")
    skewed_profile = shape is not None and not shape.near_uniform
    if skewed_profile or (s is not None and s.basis == "requests" and s.outside):
        why = ("a semantic hot spot exists: uniform synthetic keys would hide it"
               if skewed_profile else "production's own request spread rules it out")
        return Finding("no-hot-spot", "contradicted", 0.9, (*evidence, why))
    if shape is None and (s is None or s.basis != "requests" or not s.even):
        return Finding("no-hot-spot", "cannot judge", 0.2, (
            *evidence, "neither a profile nor enough per-shard requests say how keys are used"),
            ("a profile of production's keys, or per-shard requests over a longer window",))
    score = 0.9 if (shape is not None and s is not None and s.even) else 0.7
    return Finding("no-hot-spot", "fits", score, (
        *evidence, "no key concentrates traffic: uniform synthetic keys are right for this "
                   "store, and profile-driven keys would add nothing"))


def _clean(values: dict) -> dict:
    """Finite numbers, strings and booleans only (JSON-safe), Nones dropped."""
    out = {}
    for key, value in values.items():
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            continue
        out[key] = float(value) if isinstance(value, np.floating) else value
    return out


def finding_numbers(cause: str, ev: Evidence) -> dict:
    """The measurements a cause's verdict rests on, by name."""
    p, t, s = ev.production, ev.baseline, ev.spread
    gap = _latency_gap(ev)
    common = {"production_p99_ms": gap[0] if gap else None,
              "test_p99_ms": gap[1] if gap else None}
    if cause == "key-skew":
        if s is None:
            return {}
        return _clean({"basis": s.basis, "shards": s.shards, "hottest_shard": s.hottest.id,
                       "hottest_share": s.hottest_share, "max_over_mean": s.max_over_mean,
                       "uniform_band_max_over_mean": s.band_max_over_mean,
                       "requests": s.requests, "keys": s.keys,
                       "requests_needed": s.requests_needed,
                       "test_max_over_mean": (ev.baseline_spread.max_over_mean
                                              if ev.baseline_spread else None),
                       "profile_top1_share": ev.shape.top1_share if ev.shape else None})
    if cause == "coordinated-omission":
        return _clean({"test_model": t.model if t else None,
                       "test_rps": rate_of(t) if t else None,
                       "production_rps": rate_of(p), **common})
    if cause == "cache-warmth":
        return _clean({"test_hit_rate": t.cache_hit_rate if t else None,
                       "production_hit_rate": p.cache_hit_rate,
                       "test_distinct_keys": t.distinct_keys if t else None,
                       "test_key_generator": t.key_generator if t else None})
    if cause == "network":
        rtt = next((float(o.network["cross_zone_rtt_ms"]) for o in (p, t)
                    if o is not None and o.network
                    and isinstance(o.network.get("cross_zone_rtt_ms"), int | float)), None)
        return _clean({"cross_zone_rtt_ms": rtt, "rtt_assumed": rtt is None, **common})
    if cause == "payload-size":
        return _clean({"production_payload_bytes": p.payload_bytes_mean,
                       "test_payload_bytes": t.payload_bytes_mean if t else None, **common})
    if cause == "hot-node":
        c = ev.cost
        return _clean({} if c is None else {
            "shard": c.hottest.id, "cpu_per_request_vs_median": c.ratio,
            "request_share": c.hottest_request_share, "slow_node": c.slow_node,
            "slow_node_ratio": c.slow_node_ratio})
    if cause == "no-hot-spot":
        sh = ev.shape
        return _clean({} if sh is None else {
            "profile_top1_share": sh.top1_share, "profile_top1pct_share": sh.top1pct_share,
            "profile_top1pct_vs_uniform": sh.top1pct_vs_uniform, "uuid_keys": sh.uuid_keys,
            "near_uniform": sh.near_uniform})
    return {}


JUDGES: tuple[Callable[[Evidence], Finding], ...] = (
    judge_key_skew, judge_coordinated_omission, judge_cache_warmth, judge_network,
    judge_payload_size, judge_hot_node, judge_no_hot_spot)
