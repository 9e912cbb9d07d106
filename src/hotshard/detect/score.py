"""A hot-key detector scored against the truth: a known stream of requests (keys and times)
replayed through it, the detector read every ``every_s`` as a service reads its own, and
compared with the exact shares of the same stream's last ``truth_window_s``.

Detectors in the field publish no accuracy (Redis's ``--hotkeys``, Valkey's sampled
``HOTKEYS``, Cassandra's ``toppartitions``, Pelikan's 1-in-100 sampler), and the question an
engineer brings is how soon a key that turns hot is found, and whether the keys found are
the hot ones. So each reading counts, over the run: a key reported at or above ``threshold``
that truly is (a true positive), that is not (false), a truly hot key not reported (missed);
for the true positives, how far the reported share is from the true one; and, for each
event (a key that turns hot at a known instant), how long after its onset it was first
reported.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from hotshard.errors import InputError

__all__ = ["Detector", "DetectorScore", "ExactCounts", "score_detector"]


class Detector(Protocol):
    """What a detector offers: requests in, shares of the hot keys out."""

    def add(self, key: str, *, now: float) -> None: ...

    def shares(self, *, now: float, min_total: int = 1) -> dict[str, float]: ...


class ExactCounts:
    """Exact counts of every key over the last ``window_s`` seconds (a deque of the requests):
    the truth a detector is scored against, and the baseline every sketch approximates."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._requests: deque[tuple[float, str]] = deque()
        self._counts: Counter[str] = Counter()

    def __len__(self) -> int:
        """Requests in the window (as of the last ``shares``)."""
        return len(self._requests)

    def add(self, key: str, *, now: float) -> None:
        self._requests.append((now, key))
        self._counts[key] += 1

    def shares(self, *, now: float, min_total: int = 1) -> dict[str, float]:
        """Each key's share of the requests in (now - window_s, now]; empty below
        ``min_total`` requests."""
        while self._requests and self._requests[0][0] <= now - self.window_s:
            key = self._requests.popleft()[1]
            self._counts[key] -= 1
            if not self._counts[key]:
                del self._counts[key]
        total = len(self._requests)
        if total < min_total:
            return {}
        return {k: n / total for k, n in self._counts.items()}


@dataclass(frozen=True)
class DetectorScore:
    """How a detector did on one stream (module notes).

    ``precision``: of the keys it reported hot, the share that were (over every reading);
    None when it never reported one. ``recall``: of the keys truly hot, the share it
    reported; None when none was. ``share_error``: mean absolute error of the reported
    share of the true positives. ``latency_s``: per event, its first report after the
    onset less the onset (None: never reported)."""

    detector: str
    precision: float | None
    recall: float | None
    share_error: float | None
    latency_s: tuple[float | None, ...]
    readings: int

    def to_dict(self) -> dict[str, Any]:
        return {"detector": self.detector, "precision": self.precision, "recall": self.recall,
                "share_error": self.share_error, "latency_s": list(self.latency_s),
                "readings": self.readings}


def score_detector(name: str, detector: Detector, keys: Sequence[str], times: Iterable[float],
                   *, threshold: float, every_s: float = 0.5, truth_window_s: float = 10.0,
                   events: Sequence[tuple[str, float]] = (), min_total: int = 100
                   ) -> DetectorScore:
    """Replay ``keys`` at ``times`` (seconds, not decreasing) through ``detector``, read it
    every ``every_s`` and score it (module notes) against the exact shares of the last
    ``truth_window_s``: hot is a share >= ``threshold`` of the window's requests. Readings
    start once the truth's window holds ``min_total`` requests (the detector is asked with
    the same floor). ``events``: (key, onset seconds).

    Raises
    ------
    InputError
        A threshold outside (0, 1], a non-positive reading interval or window, times that
        go back, or keys and times of different lengths.
    """
    if not 0 < threshold <= 1:
        raise InputError(f"the hot share must be in (0, 1], got {threshold!r}")
    if not (every_s > 0 and truth_window_s > 0 and math.isfinite(every_s + truth_window_s)):
        raise InputError("the reading interval and the truth's window must be > 0 seconds")
    t = np.asarray(list(times), dtype=np.float64)
    if t.size != len(keys):
        raise InputError(f"{len(keys)} keys but {t.size} times")
    if t.size and (not np.isfinite(t).all() or np.any(np.diff(t) < 0)):
        raise InputError("times must be finite and never go back")
    exact = ExactCounts(truth_window_s)
    tp = fp = fn = 0
    errors: list[float] = []
    first_seen: dict[str, float] = {}
    onsets = {key: onset for key, onset in events}
    readings = 0
    next_reading = (float(t[0]) if t.size else 0.0) + every_s

    def read(now: float) -> None:
        nonlocal tp, fp, fn, readings
        shares = exact.shares(now=now, min_total=min_total)
        if len(exact) < min_total:
            return
        readings += 1
        truth = {k: share for k, share in shares.items() if share >= threshold}
        said = {k: s for k, s in detector.shares(now=now, min_total=min_total).items()
                if s >= threshold}
        for key, share in said.items():
            if key in truth:
                tp += 1
                errors.append(abs(share - truth[key]))
            else:
                fp += 1
            onset = onsets.get(key)
            if onset is not None and now >= onset and key not in first_seen:
                first_seen[key] = now - onset
        fn += sum(1 for key in truth if key not in said)

    for key, now in zip(keys, t.tolist(), strict=True):
        while now >= next_reading:
            read(next_reading)
            next_reading += every_s
        detector.add(key, now=now)
        exact.add(key, now=now)
    if t.size:
        read(next_reading)
    return DetectorScore(
        name, tp / (tp + fp) if tp + fp else None, tp / (tp + fn) if tp + fn else None,
        float(np.mean(errors)) if errors else None,
        tuple(first_seen.get(key) for key, _ in events), readings)
