"""Redis's LFU counters, as ``redis-cli --hotkeys`` reads them (``OBJECT FREQ``), and what a
counter can mean in requests.

Redis keeps, under an LFU ``maxmemory-policy``, one 8-bit counter per key: a new key starts at
``LFU_INIT_VAL`` (5); each access increments it with probability
``1 / ((counter - 5) x lfu-log-factor + 1)`` (never past 255); and when a key is read after
``lfu-decay-time`` minutes or more without an access, it first loses one per such period. So
a counter is a logarithm of the hits since the key was created (or last idle), saturating
after about ``5 n^2`` hits (n = 250 at the default factor 10: ~311 K; Redis's docs round it to
"1 M hits: 255"), and it says nothing of *when* they came: no window, no rate.

What it can mean: reaching counter c from 5 takes ``expected_hits(c)`` accesses on average
(the sum of ``(k - 5) f + 1`` for k = 5..c-1), and a key still at c has had fewer than
``expected_hits(c + 1)``; two readings ``seconds`` apart bound the key's rate between them
(``rate_range``). These are expectations: the increments are random, and ``distribution``
gives a counter's exact law after n hits (what the live check against Redis uses).

``LfuCounters`` is the same rule as a detector (``score.Detector``) for the scoreboard: the
shares it reports are each key's hits estimated from its counter over all keys' estimates, as
a reader of ``--hotkeys`` would take them.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import InputError

__all__ = ["DEFAULT_DECAY_MINUTES", "DEFAULT_LOG_FACTOR", "LFU_INIT_VAL", "MAX_COUNTER",
           "LfuCounters", "distribution", "expected_hits", "hits_range", "rate_range"]

LFU_INIT_VAL = 5
MAX_COUNTER = 255
DEFAULT_LOG_FACTOR = 10
DEFAULT_DECAY_MINUTES = 1


def _factor(log_factor: float) -> float:
    if isinstance(log_factor, bool) or not isinstance(log_factor, int | float) \
            or not (math.isfinite(log_factor) and log_factor >= 0):
        raise InputError(f"lfu-log-factor must be a number >= 0, got {log_factor!r}")
    return float(log_factor)


def _counter(counter: int) -> int:
    if isinstance(counter, bool) or not isinstance(counter, int | np.integer) \
            or not 0 <= counter <= MAX_COUNTER:
        raise InputError(f"an LFU counter is 0..{MAX_COUNTER}, got {counter!r}")
    return int(counter)


def expected_hits(counter: int, log_factor: float = DEFAULT_LOG_FACTOR) -> float:
    """Accesses that take a new key (counter ``LFU_INIT_VAL``) to ``counter``, on average;
    0 at or below the initial value."""
    n = _counter(counter) - LFU_INIT_VAL
    if n <= 0:
        return 0.0
    return n + _factor(log_factor) * n * (n - 1) / 2.0


def hits_range(counter: int, log_factor: float = DEFAULT_LOG_FACTOR) -> tuple[float, float]:
    """(fewest, most) hits, on average, that leave a key at ``counter``: from reaching it to
    the next increment (infinite at 255, where it saturates). A counter below the initial
    value is a key that went idle and decayed: its hits since are (0, 0)."""
    c = _counter(counter)
    if c < LFU_INIT_VAL:
        return 0.0, 0.0
    high = math.inf if c == MAX_COUNTER else expected_hits(c + 1, log_factor)
    return expected_hits(c, log_factor), high


def rate_range(before: int, after: int, seconds: float,
               log_factor: float = DEFAULT_LOG_FACTOR) -> tuple[float, float]:
    """Requests per second a key can have had between two readings of its counter
    ``seconds`` apart (no idle decay between them): at least what takes it from the top of
    ``before`` to the bottom of ``after``, at most from the bottom of one to the top of the
    other (infinite once saturated)."""
    if not (math.isfinite(seconds) and seconds > 0):
        raise InputError(f"the readings must be > 0 seconds apart, got {seconds!r}")
    lo_a, hi_a = hits_range(max(before, LFU_INIT_VAL), log_factor)
    lo_b, hi_b = hits_range(max(after, LFU_INIT_VAL), log_factor)
    return max(0.0, lo_b - hi_a) / seconds, (hi_b - lo_a) / seconds


def distribution(hits: int, log_factor: float = DEFAULT_LOG_FACTOR,
                 start: int = LFU_INIT_VAL) -> NDArray[np.float64]:
    """The exact law of a counter after ``hits`` accesses from ``start``: P(counter = c) for
    c in 0..255 (a Markov chain: at c, one step up with Redis's probability)."""
    f = _factor(log_factor)
    c = np.arange(MAX_COUNTER + 1, dtype=np.float64)
    up = 1.0 / (np.maximum(c - LFU_INIT_VAL, 0.0) * f + 1.0)
    up[MAX_COUNTER] = 0.0
    p = np.zeros(MAX_COUNTER + 1)
    p[_counter(start)] = 1.0
    for _ in range(int(hits)):
        moved = p * up
        p = p - moved
        p[1:] += moved[:-1]
    return p


class LfuCounters:
    """Redis's LFU counter for every key (module notes), as a detector read the way
    ``redis-cli --hotkeys`` reads it: a full scan, every key's counter decayed for its idle
    minutes, the ``top`` highest reported (16, as ``--hotkeys``).

    Parameters
    ----------
    log_factor, decay_minutes : Redis's ``lfu-log-factor`` and ``lfu-decay-time``.
    seed : the increments' random numbers (Redis uses rand()): same seed, same counters.
    top : keys a reading reports.
    """

    def __init__(self, *, log_factor: float = DEFAULT_LOG_FACTOR,
                 decay_minutes: float = DEFAULT_DECAY_MINUTES, seed: int = 0,
                 top: int = 16) -> None:
        self.log_factor = _factor(log_factor)
        if not (math.isfinite(decay_minutes) and decay_minutes >= 0):
            raise InputError(f"lfu-decay-time must be >= 0 minutes, got {decay_minutes!r}")
        self.decay_minutes = float(decay_minutes)
        self.top = int(top)
        self._rng = np.random.default_rng(seed)
        self._draws = self._rng.random(4096)
        self._next = 0
        self._index: dict[str, int] = {}
        self._names: list[str] = []
        self._counter = np.zeros(1024, dtype=np.int64)
        self._minute = np.zeros(1024, dtype=np.int64)   # of the last access
        # each counter's hits as a reader takes them: its range's middle (a saturated
        # counter, its floor)
        self._estimate = np.array([lo if math.isinf(hi) else (lo + hi) / 2.0
                                   for lo, hi in (hits_range(c, self.log_factor)
                                                  for c in range(MAX_COUNTER + 1))])
        self._up = 1.0 / (np.maximum(np.arange(MAX_COUNTER + 1) - LFU_INIT_VAL, 0)
                          * self.log_factor + 1.0)

    def _decay(self, counter, minute, now_minute):
        if self.decay_minutes <= 0:
            return counter
        periods = (now_minute - minute) // self.decay_minutes
        return np.maximum(counter - periods.astype(np.int64), 0)

    def _random(self) -> float:
        if self._next == self._draws.size:
            self._draws, self._next = self._rng.random(4096), 0
        self._next += 1
        return float(self._draws[self._next - 1])

    def add(self, key: str, *, now: float) -> None:
        """One access to ``key`` at ``now`` (seconds): created at the initial value, else
        decayed for its idle minutes, then incremented with Redis's probability."""
        minute = int(math.floor(now / 60.0))
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self._names)
            self._names.append(key)
            if i == self._counter.size:
                self._counter = np.concatenate([self._counter, np.zeros_like(self._counter)])
                self._minute = np.concatenate([self._minute, np.zeros_like(self._minute)])
            self._counter[i], self._minute[i] = LFU_INIT_VAL, minute
            return
        counter = int(self._counter[i])
        if self.decay_minutes > 0:
            counter = max(0, counter - int((minute - int(self._minute[i]))
                                           // self.decay_minutes))
        if counter < MAX_COUNTER and self._random() < self._up[counter]:
            counter += 1
        self._counter[i], self._minute[i] = counter, minute

    def counter(self, key: str, *, now: float) -> int | None:
        """``OBJECT FREQ key`` at ``now`` (None: no such key)."""
        i = self._index.get(key)
        if i is None:
            return None
        return int(self._decay(self._counter[i:i + 1], self._minute[i:i + 1],
                               int(math.floor(now / 60.0)))[0])

    def shares(self, *, now: float, min_total: int = 1) -> dict[str, float]:
        """The ``top`` keys by counter, each with its estimated hits (``hits_range``'s
        middle) over all keys' estimates."""
        n = len(self._names)
        if n == 0:
            return {}
        counters = self._decay(self._counter[:n], self._minute[:n], int(math.floor(now / 60)))
        est = self._estimate[counters]
        total = float(est.sum())
        if total <= 0 or total < min_total:
            return {}
        k = min(self.top, n)
        best = np.argpartition(-counters, k - 1)[:k] if k < n else np.arange(n)
        return {self._names[i]: float(est[i]) / total for i in best.tolist()}
