"""When each request is due: an absolute arrival schedule, the same whatever the process count.

Arrival i's time is a function of the seed and i alone. Arrivals are drawn in blocks of
``BLOCK`` as a unit-rate process in "operational time" (Poisson: cumulative Exp(1) gaps, block b
from ``default_rng([seed, STREAM, b])``; constant: i) and mapped to real time through the
inverse of the cumulative rate Λ(t) = ∫ rate, which is linear after an optional linear ramp.
Process k of K takes every K-th arrival (i % K == k), so one process or eight send the very same
requests at the very same times.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import InputError

__all__ = ["ARRIVALS", "BLOCK", "Schedule"]

ARRIVALS = ("poisson", "constant", "profile")
BLOCK = 1 << 15
_STREAM = 0x5C4ED  # this module's random stream (keys and ops use others)
MAX_ARRIVALS = 10**10


@dataclass(frozen=True)
class Schedule:
    """Open-loop arrivals at ``rate`` per second for ``duration`` seconds.

    Parameters
    ----------
    rate : target arrivals per second (after the ramp), > 0.
    duration : seconds, > 0 (the ramp is part of it).
    arrivals : "poisson" (independent users, the default), "constant" (evenly spaced), or
        "profile": production's rate shape and burstiness (``model``, a profile's arrivals
        section) in real time at mean ``rate``.
    ramp : seconds over which the rate grows linearly from 0 to ``rate``, in [0, duration].
    seed : the schedule's seed.
    """

    rate: float
    duration: float
    arrivals: str = "poisson"
    ramp: float = 0.0
    seed: int = 0
    model: object | None = None  # an ArrivalModel, for arrivals="profile"

    def __post_init__(self) -> None:
        if not (isinstance(self.rate, int | float) and math.isfinite(self.rate)
                and self.rate > 0):
            raise InputError(f"${{rate}} must be a number > 0 requests/s, got {self.rate!r}")
        if not (math.isfinite(self.duration) and self.duration > 0):
            raise InputError(f"${{duration}} must be > 0 seconds, got {self.duration!r}")
        if self.arrivals not in ARRIVALS:
            raise InputError(f"${{arrivals}} must be one of {', '.join(ARRIVALS)}, got "
                             f"{self.arrivals!r}")
        if self.arrivals == "profile" and self.model is None:
            raise InputError("profile arrivals need a profile with an arrivals section (give "
                             "a PROFILE made by hotshard profile ... --time COL)")
        if self.arrivals == "profile" and self.ramp:
            raise InputError("profile arrivals follow production's own rate shape: give no "
                             "${ramp} with them")
        if not 0 <= self.ramp <= self.duration:
            raise InputError(f"${{ramp}} must be in [0, duration={self.duration:g}] seconds, got "
                             f"{self.ramp!r}")
        if self.expected > MAX_ARRIVALS:
            raise InputError(f"rate x duration asks for {self.expected:.3g} requests; at most "
                             f"{MAX_ARRIVALS:.0e}")
        if self.expected < 1:
            raise InputError(f"rate x duration asks for {self.expected:.3g} requests: less "
                             "than one; raise the rate or the duration")

    @property
    def expected(self) -> float:
        """Expected number of arrivals: Λ(duration)."""
        return self._cumulative(self.duration)

    def _cumulative(self, t: float) -> float:
        if self.ramp and t < self.ramp:
            return self.rate * t * t / (2 * self.ramp)
        return self.rate * (t - self.ramp / 2)

    def _to_real_time(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        """Inverse of Λ: operational time (expected arrivals so far) -> seconds."""
        if not self.ramp:
            return u / self.rate
        knee = self.rate * self.ramp / 2
        return np.where(u < knee, np.sqrt(2 * self.ramp * np.maximum(u, 0) / self.rate),
                        self.ramp + (u - knee) / self.rate)

    def blocks(self) -> Iterator[tuple[int, NDArray[np.float64]]]:
        """(index of the block's first arrival, its times in seconds) for every arrival in
        ``[0, duration)``, in order."""
        if self.arrivals == "profile":
            yield from self._profile_blocks()
            return
        carry = 0.0
        block = 0
        while True:
            first = block * BLOCK
            if self.arrivals == "poisson":
                rng = np.random.default_rng([self.seed, _STREAM, block])
                u = carry + np.cumsum(rng.exponential(1.0, BLOCK))
                carry = float(u[-1])
            else:
                u = np.arange(first, first + BLOCK, dtype=np.float64)
            times = self._to_real_time(u)
            inside = times < self.duration
            if not inside.all():
                cut = int(np.argmin(inside))
                if cut:
                    yield first, times[:cut]
                return
            yield first, times
            block += 1

    def _profile_blocks(self) -> Iterator[tuple[int, NDArray[np.float64]]]:
        """rate x duration arrivals (rounded) with the profile's per-minute shape and
        cascade burstiness in real time (the run's minute m is the profile's minute m, its
        bursts as long as they were); each bin of the shape is made from its own seed, so
        any block is the same whoever makes it."""
        from hotshard.workload.profile_arrivals import CascadeArrivals

        total = int(round(self.rate * self.duration))
        shaped = CascadeArrivals(self.model, total, total / self.duration,  # type: ignore
                                 self.seed, real_time=True)
        for first in range(0, total, BLOCK):
            rows = np.arange(first, min(first + BLOCK, total), dtype=np.int64)
            yield first, np.minimum(shaped.times(rows), np.nextafter(self.duration, 0))

    def extent(self) -> tuple[int, float]:
        """(exact number of arrivals, time of the last one) for this seed."""
        count, last = 0, 0.0
        for _, times in self.blocks():
            count += times.size
            last = float(times[-1])
        return count, last

    def for_process(self, process: int = 0, processes: int = 1
                    ) -> Iterator[tuple[NDArray[np.int64], NDArray[np.float64]]]:
        """(global arrival indices, times) of this process's share: every ``processes``-th
        arrival starting at ``process``."""
        if not (isinstance(processes, int) and processes >= 1):
            raise InputError(f"processes must be an integer >= 1, got {processes!r}")
        if not (isinstance(process, int) and 0 <= process < processes):
            raise InputError(f"process must be in 0..{processes - 1}, got {process!r}")
        for first, times in self.blocks():
            offset = (process - first) % processes
            index = np.arange(first + offset, first + times.size, processes, dtype=np.int64)
            yield index, times[index - first]
