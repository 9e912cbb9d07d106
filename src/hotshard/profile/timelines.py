"""When each head key was hot: the profile's ``timelines`` section (with ``--time``).

A head key's total says how much traffic it had, not when: an event channel that carried 40%
for twenty minutes and nothing before looks, in the total, like a steady 2%. So for every
head key (the keys the profile names anyway) the section keeps its requests in each of
``WINDOWS`` equal windows of the profile's span, in head order. Counts only, and only for keys
already in the head. ``generate`` places a head key's requests by its timeline, so the event
channel is hot when it was hot.

Twelve windows are coarse for the question this section answers: a ten-minute event in a
two-hour trace straddles two of them and reads as two windows at half its share. So for the
head keys that are *events* (the rule below: ``event_mask``) the section also keeps
``detail``: the key's requests and all requests in ``DETAIL_BINS`` sub-windows of each window
from one before its first hot window to one after its last, at most ``MAX_DETAILED`` keys.
A few hundred numbers more, and the event's start, end and share are read at a tenth of a
window.

The event rule (one place: ``predict`` reads events by it too). A head key is an event in a
window when its share of that window's requests is at least ``EVENT_RATIO`` times its share
of the whole span, at least ``EVENT_MIN_SHARE`` of the window (below that no key makes a
shard hot), and more requests than its steady share would give by ``EVENT_SIGMAS`` Poisson
standard deviations (so a rare key's noise in a quiet window is not an event), in a window
carrying at least ``QUIET_WINDOW`` of an average window's requests (a near-empty window can
show any share).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hotshard._validate import Fields, at, item
from hotshard.errors import ProfileError

__all__ = ["DETAIL_BINS", "EVENT_MIN_SHARE", "EVENT_RATIO", "EVENT_SIGMAS", "EventDetail",
           "WINDOWS", "Timelines", "busy_windows", "event_mask", "timelines_from_fine"]

WINDOWS = 12  # a year in months, a day in two-hour steps: 500 keys x 12 stay ~40 KB
DETAIL_BINS = 10
MAX_DETAILED = 20
EVENT_RATIO = 3.0
EVENT_MIN_SHARE = 0.01
EVENT_SIGMAS = 5.0
QUIET_WINDOW = 0.1


def busy_windows(requests: NDArray) -> NDArray[np.bool_]:
    """The windows with traffic enough to judge (at least ``QUIET_WINDOW`` of an average
    window's requests): a near-empty window can show any share."""
    requests = np.asarray(requests, dtype=np.float64)
    return requests >= QUIET_WINDOW * requests.mean() if requests.size else requests > 0


def event_mask(counts: NDArray, overall: NDArray, requests: NDArray) -> NDArray[np.bool_]:
    """``mask[i, w]``: head key i is an event in window w (the module's rule). ``counts`` are
    the keys' requests per window, ``overall`` their shares of the whole span, ``requests``
    every window's requests."""
    counts = np.asarray(counts, dtype=np.float64)
    requests = np.asarray(requests, dtype=np.float64)
    expected = np.outer(overall, requests)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.nan_to_num(counts / requests[None, :])
    busy = busy_windows(requests)
    return ((share >= EVENT_RATIO * np.asarray(overall)[:, None]) & (share >= EVENT_MIN_SHARE)
            & (counts - expected > EVENT_SIGMAS * np.sqrt(np.maximum(expected, 1.0)))
            & busy[None, :])


@dataclass(frozen=True)
class EventDetail:
    """An event key's requests (``counts``) and all requests (``totals``) in sub-windows of
    ``1 / DETAIL_BINS`` of a window, from window ``from_window`` on."""

    key: int
    from_window: int
    bins_per_window: int
    counts: NDArray[np.int64]
    totals: NDArray[np.int64]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "from_window": self.from_window,
                "bins_per_window": self.bins_per_window, "counts": self.counts.tolist(),
                "totals": self.totals.tolist()}


@dataclass(frozen=True)
class Timelines:
    """``counts[i, w]``: head key i's requests in window w of ``seconds`` / windows."""

    start: float
    seconds: float
    counts: NDArray[np.int64]
    detail: tuple[EventDetail, ...] = ()

    @property
    def windows(self) -> int:
        return int(self.counts.shape[1])

    def to_dict(self) -> dict[str, Any]:
        out = {"start": float(self.start), "seconds": float(self.seconds),
               "windows": self.windows, "counts": self.counts.tolist()}
        if self.detail:
            out["detail"] = [d.to_dict() for d in self.detail]
        return out

    @classmethod
    def from_dict(cls, doc: Any, where: str = "timelines") -> Timelines:
        """The section read field by field (``_validate.Fields``), then the rules that span
        fields (each row as long as ``windows``; each detail inside its key's timeline)."""
        f = _FIELDS
        f.mapping(doc, where)
        start = f.required(doc, "start", where, f.real, "a number: the span's first instant")
        seconds = f.required(doc, "seconds", where, f.positive, "a number > 0")
        windows = f.required(doc, "windows", where, f.count, "an integer >= 1")
        if windows < 1:
            raise f.wrong(at(where, "windows"), "an integer >= 1", windows, numeric=True)
        rows = f.required(doc, "counts", where, f.array, "one list of counts per head key")
        for i, row in enumerate(rows):
            path = item(at(where, "counts"), i)
            f.integers(row, path)
            if len(row) != windows:
                raise f.fail(path, f"must hold {windows} counts (windows), got {len(row)}")
        counts = np.asarray(rows, dtype=np.int64).reshape(len(rows), windows)
        detail = _details(doc.get("detail"), counts, where)
        return cls(float(start), float(seconds), counts, detail)

    def cumulative(self) -> NDArray[np.float64]:
        """Each key's cumulative share at the window edges (keys x windows + 1), for placing
        its requests in time; a key with no requests is uniform."""
        totals = self.counts.sum(axis=1, keepdims=True).astype(np.float64)
        edges = np.concatenate([np.zeros((self.counts.shape[0], 1)),
                                np.cumsum(self.counts, axis=1)], axis=1)
        uniform = np.linspace(0.0, 1.0, self.windows + 1)[None, :]
        return np.where(totals > 0, edges / np.maximum(totals, 1.0), uniform)


def _details(doc: Any, counts: NDArray[np.int64], where: str) -> tuple[EventDetail, ...]:
    """The ``detail`` list, each entry checked against the key's own window counts."""
    if doc is None:
        return ()
    f = _FIELDS
    f.array(doc, at(where, "detail"), f"a list of at most {MAX_DETAILED} objects")
    if len(doc) > MAX_DETAILED:
        raise f.fail(at(where, "detail"), f"must hold at most {MAX_DETAILED} entries, got "
                                          f"{len(doc)}")
    keys, windows = counts.shape
    out = []
    for j, entry in enumerate(doc):
        path = item(at(where, "detail"), j)
        f.mapping(entry, path)
        key, first, bins = (f.required(entry, n, path, f.count, "an integer >= 0")
                            for n in ("key", "from_window", "bins_per_window"))
        c, t = (np.asarray(f.required(entry, n, path, f.integers, "a list of integers >= 0"),
                           dtype=np.int64) for n in ("counts", "totals"))
        span = c.size // bins if bins else 0
        if key >= keys or bins < 1 or c.size != t.size or c.size % bins or span < 1 \
                or first + span > windows or np.any(c > t) \
                or not np.array_equal(c.reshape(span, bins).sum(axis=1),
                                      counts[key, first:first + span]):
            raise f.fail(path, "does not fit its key's timeline: counts must fill whole "
                               "windows inside the timeline, add up to the key's count in "
                               "each, and never exceed the totals")
        heads = counts[:, first:first + span].sum(axis=0)
        if np.any(t.reshape(span, bins).sum(axis=1) < heads):
            raise f.fail(at(path, "totals"), "are fewer than the head keys' requests in their "
                                             "windows: they count every request of each "
                                             "sub-window")
        out.append(EventDetail(key, first, bins, c, t))
    return tuple(out)


_FIELDS = Fields(ProfileError)


def timelines_from_fine(start: float, seconds: float, fine: NDArray[np.int64],
                        totals: NDArray[np.int64], windows: int = WINDOWS) -> Timelines:
    """The section from its counts (``profile.time_counts`` makes them): ``fine[i, b]``, head
    key i's requests in sub-window b (``windows`` x ``DETAIL_BINS`` of them over the span),
    and ``totals[b]``, every request's. A window is ``DETAIL_BINS`` sub-windows, so an event's
    detail adds up to its windows exactly."""
    fine = np.asarray(fine, dtype=np.int64).reshape(-1, windows * DETAIL_BINS)
    totals = np.asarray(totals, dtype=np.int64)
    counts = fine.reshape(fine.shape[0], windows, DETAIL_BINS).sum(axis=2)
    requests = totals.reshape(windows, DETAIL_BINS).sum(axis=1)
    overall = counts.sum(axis=1) / max(int(totals.sum()), 1)
    hot = event_mask(counts, overall, requests)
    flagged = np.flatnonzero(hot.any(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        peak = np.nan_to_num(counts / requests[None, :]).max(axis=1)
    flagged = flagged[np.argsort(-peak[flagged], kind="stable")][:MAX_DETAILED]
    detail = []
    for i in sorted(flagged.tolist()):
        w = np.flatnonzero(hot[i])
        first, last = max(int(w[0]) - 1, 0), min(int(w[-1]) + 1, windows - 1)
        lo, hi = first * DETAIL_BINS, (last + 1) * DETAIL_BINS
        detail.append(EventDetail(int(i), first, DETAIL_BINS, fine[i, lo:hi].copy(),
                                  totals[lo:hi].copy()))
    return Timelines(float(start), float(seconds), counts, tuple(detail))
