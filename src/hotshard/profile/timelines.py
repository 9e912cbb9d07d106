"""When each head key was hot: the profile's ``timelines`` section (with ``--time``).

A head key's total says how much traffic it had, not when: an event channel that carried 40%
for twenty minutes and nothing before looks, in the total, like a steady 2%. So for every
head key (the keys the profile names anyway) the section keeps its requests in each of
``WINDOWS`` equal windows of the profile's span, in head order. Counts only, and only for keys
already in the head. ``generate`` places a head key's requests by its timeline, so the event
channel is hot when it was hot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import ProfileError

__all__ = ["WINDOWS", "Timelines", "measure_timelines"]

WINDOWS = 12  # a year in months, a day in two-hour steps: 500 keys x 12 stay ~40 KB


@dataclass(frozen=True)
class Timelines:
    """``counts[i, w]``: head key i's requests in window w of ``seconds`` / windows."""

    start: float
    seconds: float
    counts: NDArray[np.int64]

    @property
    def windows(self) -> int:
        return int(self.counts.shape[1])

    def to_dict(self) -> dict[str, Any]:
        return {"start": float(self.start), "seconds": float(self.seconds),
                "windows": self.windows, "counts": self.counts.tolist()}

    @classmethod
    def from_dict(cls, doc: Any, where: str = "timelines") -> Timelines:
        if not isinstance(doc, Mapping):
            raise ProfileError(f"{where} must be an object")
        for name in ("start", "seconds"):
            value = doc.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ProfileError(f"{where}.{name} must be a number, got {value!r}")
        if not doc["seconds"] > 0:
            raise ProfileError(f"{where}.seconds must be > 0")
        windows = doc.get("windows")
        rows = doc.get("counts")
        if not isinstance(windows, int) or windows < 1 or not isinstance(rows, list) or not all(
                isinstance(r, list) and len(r) == windows and all(
                    isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in r)
                for r in rows):
            raise ProfileError(f"{where}.counts must be one list of {windows!r} integers >= 0 "
                               "per head key")
        counts = np.asarray(rows, dtype=np.int64).reshape(len(rows), windows)
        return cls(float(doc["start"]), float(doc["seconds"]), counts)

    def cumulative(self) -> NDArray[np.float64]:
        """Each key's cumulative share at the window edges (keys x windows + 1), for placing
        its requests in time; a key with no requests is uniform."""
        totals = self.counts.sum(axis=1, keepdims=True).astype(np.float64)
        edges = np.concatenate([np.zeros((self.counts.shape[0], 1)),
                                np.cumsum(self.counts, axis=1)], axis=1)
        uniform = np.linspace(0.0, 1.0, self.windows + 1)[None, :]
        return np.where(totals > 0, edges / np.maximum(totals, 1.0), uniform)


def measure_timelines(stream: NDArray[np.uint64], times: NDArray[np.float64],
                      head_hashes: NDArray[np.uint64], windows: int = WINDOWS
                      ) -> Timelines | None:
    """Timelines of the head keys (given by their hashes, in head order) in a stream of key
    hashes with their sorted times. None without a finite span."""
    finite = np.isfinite(times)
    if finite.sum() < 2:
        return None
    t = times[finite]
    keys = stream[finite]
    start, end = float(t[0]), float(t[-1])
    if end <= start:
        return None
    order = np.argsort(head_hashes, kind="stable")
    sorted_h = head_hashes[order]
    pos = np.clip(np.searchsorted(sorted_h, keys), 0, max(sorted_h.size - 1, 0))
    hit = sorted_h[pos] == keys
    head_index = order[pos[hit]]
    window = np.minimum(((t[hit] - start) / (end - start) * windows).astype(np.int64),
                        windows - 1)
    counts = np.bincount(head_index * windows + window,
                         minlength=head_hashes.size * windows).reshape(-1, windows)
    return Timelines(start, end - start, counts.astype(np.int64))
