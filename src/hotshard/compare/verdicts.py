"""What a check says and when: a verdict (pass / warn / fail), one check's result, and the
thresholds that decide it.

Shared by the orchestrator (``hotshard.compare.check``) and the checks that live in their own
modules (``working_set``, ``burstiness``), so that none of them imports another. Every
threshold is a named field of ``Thresholds`` with the reason for its default, and can be
overridden.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from hotshard.errors import InputError

__all__ = ["Check", "Thresholds", "Verdict", "worst"]

Verdict = Literal["pass", "warn", "fail"]
_ORDER = {"pass": 0, "warn": 1, "fail": 2}


def worst(*verdicts: Verdict) -> Verdict:
    """The worst of ``verdicts`` (fail over warn over pass); pass when there are none."""
    return max(verdicts, key=_ORDER.__getitem__, default="pass")


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
