"""Timestamps with production's rate shape and burstiness (the profile's ``arrivals``).

The run's length is its events over its rate; the profile's window is stretched (or shrunk)
to it, so every bin keeps its share of the requests (largest remainder: exactly the run's
events) and every level of the cascade its proportion of the bin. Inside a bin the requests
are split down the cascade (Dirichlet-multinomial draws with the profile's concentrations)
to 10 ms leaves, then spread uniformly inside their leaf. Each bin is made from its own seed,
so the rows of a chunk get the same instants however the run is cut into chunks or workers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from hotshard.profile.arrivals import ArrivalModel
from hotshard.workload.profile_sampler import _round_keys

__all__ = ["CascadeArrivals"]


@dataclass(frozen=True)
class CascadeArrivals:
    """Event times for ``events`` requests at mean ``rate`` shaped by ``model``; the same
    interface as ``scenario.Arrivals`` (``times``, ``seconds_for``, ``describe``)."""

    model: ArrivalModel
    events: int
    rate: float
    seed: int
    _cum: NDArray[np.int64] = field(init=False, repr=False)
    _stretch: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        counts = _round_keys(self.model.counts.astype(np.float64), int(self.events))
        object.__setattr__(self, "_cum", np.concatenate([[0], np.cumsum(counts)]))
        object.__setattr__(self, "_stretch", (self.events / self.rate) / self.model.seconds)

    def _bin_times(self, b: int) -> NDArray[np.float64]:
        """Sorted offsets (s from the run's start) of bin ``b``'s requests."""
        n = int(self._cum[b + 1] - self._cum[b])
        width = self.model.resolution_s * self._stretch
        if n == 0:
            return np.zeros(0)
        rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(0xA11, b)))
        counts = np.array([n], dtype=np.int64)
        leaf = width
        for parent, child, alpha in self.model.cascade:
            k = int(round(parent / child))
            live = counts > 0
            weights = rng.gamma(alpha, 1.0, size=(int(live.sum()), k))
            weights /= np.maximum(weights.sum(axis=1, keepdims=True), 1e-300)
            weights[~np.isfinite(weights).all(axis=1)] = 1.0 / k  # alpha tiny: all underflow
            split = np.zeros((counts.size, k), dtype=np.int64)
            split[live] = rng.multinomial(counts[live], weights)
            counts = split.reshape(-1)
            leaf = leaf / k
        starts = np.repeat(np.arange(counts.size) * leaf, counts)
        times = starts + rng.random(starts.size) * leaf
        return b * width + np.sort(times)

    def times(self, rows: NDArray[np.int64], u: NDArray[np.float64] | None = None
              ) -> NDArray[np.float64]:
        """Seconds since the start for the events with these row indices (increasing rows
        get non-decreasing times; ``u`` is unused: the bins draw their own)."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty(rows.size)
        if rows.size == 0:
            return out
        bins = np.searchsorted(self._cum, rows, side="right") - 1
        for b in np.unique(bins):
            mine = bins == b
            made = self._bin_times(int(b))
            out[mine] = made[rows[mine] - self._cum[b]]
        return out

    def seconds_for(self, events: int) -> float:
        return self.events / self.rate

    def describe(self) -> dict:
        return {"process": "profile", "rate": self.rate,
                "resolution_s": self.model.resolution_s * self._stretch,
                "cascade": [list(level) for level in self.model.cascade]}
