"""When a shard is hot: per-window shard shares, the peak window and the events of a profile.

A hot shard is hot in a window. An event channel that carries 40% of the requests for ten
minutes of a two-hour trace is 5% of the whole span, so a whole-span prediction names a steady
key's shard and never the one that melts. A profile measured with ``--time`` keeps each head
key's requests in equal windows of its span (``timelines``) and the requests of the whole
stream per minute (``arrivals``); together they give each window's load exactly as the whole
span's is given: head keys placed exactly, the tail spread by its mean and variance.

* A window's requests are the arrivals section's counts over it (bins split in proportion
  where a bin straddles a window edge). Without arrivals the tail is taken as steady (its
  requests spread evenly over the windows) and the result says so.
* The *peak* is the window and shard with the largest share of that window's requests, among
  windows carrying at least a tenth of an average window's requests: a near-empty window can
  show any share (three requests on one shard are 100%), and cannot melt anything.
* An *event* is a head key far hotter in a window than over the whole span, by the profile's
  one rule (``profile.timelines.event_mask``). Adjacent windows of one key's event are one
  event. Where the profile kept the event's detail (sub-windows of a tenth of a window), its
  start, end and share are read there: the sub-windows around its busiest one where it keeps
  at least half that share (a ten-minute event across two ten-minute windows is one ten-minute
  event at its own share, not two windows at half of it). Its share is of all the requests
  in its span.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hotshard.mitigations import Mitigations
from hotshard.profile.document import Profile
from hotshard.profile.timelines import EVENT_MIN_SHARE, busy_windows, event_mask
from hotshard.shards.partitioners import Partitioner

__all__ = ["KeyEvent", "TimelinePrediction", "predict_windows"]

MAX_EVENTS = 20


@dataclass(frozen=True)
class KeyEvent:
    """A head key far hotter in a span of windows than over the whole profile."""

    key: str
    shard: int
    start_s: float
    end_s: float
    share: float            # of all the requests in [start_s, end_s)
    overall_share: float    # of all the profile's requests

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "shard": self.shard, "start_s": self.start_s,
                "end_s": self.end_s, "share": self.share, "overall_share": self.overall_share}


@dataclass(frozen=True)
class TimelinePrediction:
    """Each window's per-shard shares (``shares[w, s]``), the peak window's full prediction
    (its hottest shard and keys, CPU at the window's own rate, mitigations), and the events."""

    edges_s: NDArray[np.float64]          # window w is [edges_s[w], edges_s[w + 1])
    requests: NDArray[np.float64]         # each window's requests
    shares: NDArray[np.float64]           # windows x shards
    peak_window: int
    peak: Any                             # a shards.predict.Prediction
    events: tuple[KeyEvent, ...]
    tail_steady: bool                     # no arrivals section: the tail spread evenly
    # the peak read in an event's detail (its own span, not the window's), when it was
    peak_span: tuple[float, float] | None = None
    peak_requests: float = 0.0            # requests in the peak's span

    @property
    def peak_start_s(self) -> float:
        return self.peak_span[0] if self.peak_span else float(self.edges_s[self.peak_window])

    @property
    def peak_end_s(self) -> float:
        return (self.peak_span[1] if self.peak_span
                else float(self.edges_s[self.peak_window + 1]))

    def to_dict(self) -> dict[str, Any]:
        peak = self.peak
        hot = peak.hottest
        out: dict[str, Any] = {
            "peak": {
                "start_s": self.peak_start_s, "end_s": self.peak_end_s,
                "requests": float(self.peak_requests),
                "shards": [{"shard": s, "share": float(v)} for s, v in enumerate(peak.shares)],
                "hottest": {"shard": hot, "share": float(peak.shares[hot]),
                            "top_keys": [{"key": k, "share": v}
                                         for k, v in peak.hottest_keys]},
            },
            "events": [e.to_dict() for e in self.events],
            "windows": [{"start_s": float(self.edges_s[w]), "end_s": float(self.edges_s[w + 1]),
                         "requests": float(self.requests[w]),
                         "shards": [{"shard": s, "share": float(v)}
                                    for s, v in enumerate(self.shares[w])]}
                        for w in range(self.shares.shape[0])],
            "tail_steady": self.tail_steady,
        }
        if peak.cpu is not None:
            out["peak"]["rps"] = peak.rps
            out["peak"]["hottest"]["cpu"] = float(peak.cpu[hot])
            out["peak"]["saturated"] = list(peak.saturated)
        if peak.after is not None:
            out["peak"]["after"] = peak.after.to_dict()
        return out


def window_requests(profile: Profile, edges_s: NDArray[np.float64],
                    head_per_window: NDArray[np.float64]) -> tuple[NDArray[np.float64], bool]:
    """Each window's requests, and whether the tail had to be taken as steady."""
    windows = edges_s.size - 1
    arrivals = profile.arrivals
    if arrivals is None or arrivals.events <= 0:
        steady = head_per_window + profile.tail.events / windows
        return steady, True
    totals = arrivals.requests_between(edges_s)
    # the same requests, on the profile's count: the arrivals may cover a sample's span only
    totals *= profile.events / max(float(totals.sum()), 1.0)
    return np.maximum(totals, head_per_window), False


def predict_windows(profile: Profile, partitioner: Partitioner, placed: NDArray[np.int64],
                    whole: Any, predict_load: Callable[..., Any], *, rps: float | None,
                    capacity: float | None, mitigations: Mitigations | None
                    ) -> TimelinePrediction:
    """Per-window load of ``profile`` (which has ``timelines``) on ``partitioner``.

    ``whole`` is the whole span's ``shards.predict.KeyLoad`` and ``predict_load`` the function
    that predicts one (passed in: ``shards.predict`` calls this module, not the reverse).

    ``rps`` is the whole span's mean rate: a window's rate is it scaled by the window's
    requests against an average window's, so the peak's CPU is at the rate the peak had.
    Mitigations on the peak window apply to its own top keys (the keys a detector would
    report then), not the whole span's.
    """
    tl = profile.timelines
    n = partitioner.n_shards
    counts = tl.counts.astype(np.float64)          # head keys x windows
    n_windows = counts.shape[1]
    edges = np.linspace(0.0, float(tl.seconds), n_windows + 1)
    head_w = counts.sum(axis=0)
    requests, steady = window_requests(profile, edges, head_w)
    tail_w = np.maximum(requests - head_w, 0.0)
    onehot = np.zeros((n, counts.shape[0]))
    onehot[placed, np.arange(counts.shape[0])] = 1.0
    head_load = onehot @ counts                      # shards x windows
    tail_events = max(float(whole.tail_mean.sum()), 1e-300)
    tail_shape = whole.tail_mean / tail_events
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = ((head_load + np.outer(tail_shape, tail_w)) / requests[None, :]).T
    shares = np.nan_to_num(shares)
    busy = busy_windows(requests)
    masked = np.where(busy[:, None], shares, -1.0)
    peak_w = int(np.unravel_index(int(np.argmax(masked)), masked.shape)[0])
    peak = predict_load(_window_load(whole, counts[:, peak_w], tail_w[peak_w], tail_shape,
                                     tail_events, requests[peak_w]),
                        partitioner, rps=_window_rate(rps, requests, peak_w),
                        capacity=capacity, mitigations=mitigations)
    details = {d.key: d for d in tl.detail}
    events, spans = _events(whole, counts, requests, edges, details)
    # the peak's own key an event read in detail: the peak is that event's span, its other
    # keys and tail at their share of the windows it falls in
    span, peak_requests = None, float(requests[peak_w])
    if peak.hottest_keys:
        top = whole.keys.index(peak.hottest_keys[0][0])
        for (i, first), (last, start_s, end_s, key_count, total) in spans.items():
            if i == top and first <= peak_w <= last:
                cover = slice(first, last + 1)
                others = requests[cover].sum() - counts[i, cover].sum()
                scale = max(total - key_count, 0.0) / others if others > 0 else 0.0
                fine = counts[:, cover].sum(axis=1) * scale
                fine[i] = key_count
                peak = predict_load(
                    _window_load(whole, fine, tail_w[cover].sum() * scale, tail_shape,
                                 tail_events, total), partitioner,
                    rps=None if rps is None else rps * (total / (end_s - start_s))
                    / (requests.sum() / float(tl.seconds)),
                    capacity=capacity, mitigations=mitigations)
                span, peak_requests = (start_s, end_s), total
                break
    return TimelinePrediction(edges, requests, shares, peak_w, peak, events, steady, span,
                              peak_requests)


def _window_rate(rps: float | None, requests: NDArray[np.float64], w: int) -> float | None:
    """The whole span's mean rate scaled to window w's requests (equal windows)."""
    if rps is None:
        return None
    mean = float(requests.mean())
    return rps * float(requests[w]) / mean if mean > 0 else rps


def _window_load(whole: Any, counts: NDArray[np.float64], tail: float,
                 tail_shape: NDArray[np.float64], tail_events: float, total: float) -> Any:
    """One window's ``KeyLoad``: its head keys ranked by their requests in it (the top keys a
    mitigation would reach then), its tail a thinned whole-span tail (its variance scales by
    the thinning squared: every tail key's requests thin alike)."""
    order = np.argsort(-counts, kind="stable")
    thin = tail / tail_events
    return replace(whole, keys=[whole.keys[i] for i in order], counts=counts[order],
                   placed=whole.placed[order], tail_mean=tail_shape * tail,
                   tail_var=whole.tail_var * thin**2, events=max(total, 1.0),
                   tail_exact=False)


def _events(whole: Any, counts: NDArray[np.float64], requests: NDArray[np.float64],
            edges: NDArray[np.float64], details: dict) -> tuple[tuple[KeyEvent, ...], dict]:
    """Head keys far hotter in some windows than overall (module notes), hottest first; and
    the events read in detail, by (key index, first window): (last window, start_s, end_s,
    the key's requests, all requests)."""
    overall = whole.counts / whole.events                      # each key's whole-span share
    hot = event_mask(counts, overall, requests)
    out: list[KeyEvent] = []
    spans: dict = {}
    for i in np.flatnonzero(hot.any(axis=1)):
        row = hot[i]
        w = 0
        while w < row.size:
            if not row[w]:
                w += 1
                continue
            end = w
            while end + 1 < row.size and row[end + 1]:
                end += 1
            span = slice(w, end + 1)
            start_s, end_s = float(edges[w]), float(edges[end + 1])
            share = float(counts[i, span].sum() / requests[span].sum())
            fine = _refined(details.get(int(i)), edges, w, end)
            if fine is not None:
                start_s, end_s, key_count, total = fine
                share = key_count / total
                spans[(int(i), w)] = (end, start_s, end_s, key_count, total)
            out.append(KeyEvent(whole.keys[i], int(whole.placed[i]), start_s, end_s, share,
                                float(overall[i])))
            w = end + 1
    out.sort(key=lambda e: -e.share)
    return tuple(out[:MAX_EVENTS]), spans


def _refined(detail, edges: NDArray[np.float64], first: int, last: int
             ) -> tuple[float, float, float, float] | None:
    """(start_s, end_s, its requests, all requests) of an event over windows first..last,
    read in the profile's
    sub-windows: the run of sub-windows around the busiest where the key keeps at least half
    its busiest share (and ``EVENT_MIN_SHARE``). None without detail covering them."""
    if detail is None:
        return None
    bins = detail.bins_per_window
    lo = (first - detail.from_window) * bins
    hi = (last + 1 - detail.from_window) * bins
    if lo < 0 or hi > detail.counts.size:
        return None
    c = detail.counts.astype(np.float64)
    t = detail.totals.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.nan_to_num(c / t)
    peak = lo + int(np.argmax(share[lo:hi]))
    keep = max(0.5 * share[peak], EVENT_MIN_SHARE)
    a = peak
    while a - 1 >= 0 and share[a - 1] >= keep:
        a -= 1
    b = peak
    while b + 1 < share.size and share[b + 1] >= keep:
        b += 1
    width = (edges[1] - edges[0]) / bins
    origin = edges[0] + detail.from_window * (edges[1] - edges[0])
    total = t[a:b + 1].sum()
    if total <= 0:
        return None
    return (float(origin + a * width), float(origin + (b + 1) * width),
            float(c[a:b + 1].sum()), float(total))
