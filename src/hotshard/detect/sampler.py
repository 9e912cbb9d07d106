"""A 1-in-N sampler of requests over a sliding window: the hot-key detector of Pelikan
(Twitter's cache, which samples 1 request in 100 and counts keys in the sample) and of most
hand-rolled ones. It keeps every sampled key (no bound on memory but the sample's), and a
share it reports is a sampled count over the sample's total: unbiased, with a binomial error
of sqrt(share (1 - share) / sampled requests)."""

from __future__ import annotations

import math
from collections import Counter

from hotshard.errors import InputError

__all__ = ["SampledCounts"]

_GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def _mix(z: int) -> float:
    """A uniform in [0, 1) from ``z`` (splitmix64's finaliser)."""
    z = (z * _GOLDEN) & _MASK
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & _MASK
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & _MASK
    z ^= z >> 31
    return (z >> 11) / 9007199254740992.0


class SampledCounts:
    """Counts of the sampled requests' keys in the last ``window_s`` seconds, in ``slices``
    slices (each dropped whole when it leaves the window). Request i is sampled when a hash
    of (``seed``, i) falls under 1 / ``every``: the same requests whatever the clock.

    Raises
    ------
    InputError
        ``every`` below 1, a window that is not a finite positive number, or ``slices``
        below 1.
    """

    def __init__(self, *, every: int = 100, window_s: float = 10.0, slices: int = 10,
                 seed: int = 0) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise InputError(f"a sampler takes 1 in N requests, N >= 1; got {every!r}")
        if not (isinstance(window_s, int | float) and math.isfinite(window_s)
                and window_s > 0):
            raise InputError(f"window_s must be a finite number > 0, got {window_s!r}")
        if isinstance(slices, bool) or not isinstance(slices, int) or slices < 1:
            raise InputError(f"slices must be an integer >= 1, got {slices!r}")
        self.every, self.window_s, self.slices = every, float(window_s), slices
        self._width = self.window_s / slices
        self._seed = int(seed) & _MASK
        self._seen = 0
        self._slices: dict[int, Counter[str]] = {}

    def add(self, key: str, *, now: float) -> None:
        """One request for ``key`` at ``now`` (seconds)."""
        i = self._seen
        self._seen += 1
        if self.every > 1 and _mix(self._seed ^ (i * 0xD1342543DE82EF95 & _MASK)) \
                >= 1.0 / self.every:
            return
        index = int(now // self._width)
        self._slices.setdefault(index, Counter())[key] += 1
        for old in [s for s in self._slices if s <= index - self.slices]:
            del self._slices[old]

    def shares(self, *, now: float, min_total: int = 1) -> dict[str, float]:
        """Each sampled key's share of the sample in the window ending at ``now``, by
        descending share (ties by key); empty below ``min_total`` sampled requests."""
        index = int(now // self._width)
        live = [c for s, c in self._slices.items() if index - self.slices < s <= index]
        total = sum(sum(c.values()) for c in live)
        if total <= 0 or total < min_total:
            return {}
        merged: Counter[str] = Counter()
        for c in live:
            merged.update(c)
        return {k: n / total for k, n in sorted(merged.items(), key=lambda r: (-r[1], r[0]))}
