"""The report's time axis: per-shard load over time with the events marked, p99 over time.

A hot shard is hot in a window, so the report draws load against time from both sources it
may have: production's evidence with windows (each shard's share of the window's requests, or
its CPU, and the p99 per window) and the profile's prediction from its timelines (each
shard's predicted share per window, the events the profile names). The shards drawn are the
few that are ever hottest, plus the peak shard; every other shard is one grey band (their
range), so a page of 256 shards stays readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hotshard._format import clock
from hotshard.observations import Observations

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["ShardSeries", "observed_series", "predicted_series", "timeline_figure"]

DRAWN = 4
_COLOURS = ("#c0392b", "#5b7fa6", "#8e44ad", "#d68910", "#16a085")


@dataclass(frozen=True)
class ShardSeries:
    """One source's per-shard values over time: ``values[w, s]`` in window w."""

    label: str
    unit: str                       # "share of the window's requests" or "CPU"
    edges_s: NDArray[np.float64]
    shard_ids: tuple[str, ...]
    values: NDArray[np.float64]
    p99_ms: NDArray[np.float64] | None = None      # the window's p99, NaN where unknown
    events: tuple[tuple[str, str, float, float, float], ...] = ()  # key, shard, start, end, share
    marks: tuple[tuple[str, float], ...] = ()   # (what, seconds): a detection, a relief

    @property
    def peak(self) -> tuple[int, int]:
        """(window, shard index) of the largest value."""
        w, s = np.unravel_index(int(np.nanargmax(self.values)), self.values.shape)
        return int(w), int(s)

    def drawn(self) -> list[int]:
        """The shards drawn one by one: the peak's, then those hottest in most windows."""
        order = np.argsort(-np.nanmax(self.values, axis=0), kind="stable")
        out = [self.peak[1]] + [int(s) for s in order if int(s) != self.peak[1]]
        return out[:DRAWN]


def observed_series(obs: Observations) -> ShardSeries | None:
    """Production's windows as a series: requests' shares when every window counts them per
    shard, else CPU when every window reports it; None otherwise."""
    windows = obs.windows
    if not windows or not windows[0].shards:
        return None
    ids = tuple(s.id for s in windows[0].shards)
    if any(tuple(s.id for s in w.shards) != ids for w in windows):
        return None
    edges = np.array([w.start_s for w in windows] + [windows[-1].end_s], dtype=np.float64)
    counts = [w.shard_requests for w in windows]
    if all(c is not None and sum(c) > 0 for c in counts):
        arr = np.asarray(counts, dtype=np.float64)
        values, unit = arr / arr.sum(axis=1, keepdims=True), "share of the window's requests"
    elif all(w.shard_cpu is not None for w in windows):
        values, unit = np.asarray([w.shard_cpu for w in windows], dtype=np.float64), "CPU"
    else:
        return None
    p99 = np.array([w.latency_ms.p99 if w.latency_ms is not None and w.latency_ms.p99
                    is not None else np.nan for w in windows], dtype=np.float64)
    # the events the run injected, and when each was found hot and relieved
    from hotshard.diagnose.transient import event_transients

    events, marks = [], []
    for t in event_transients(obs):
        events.append((t.key, t.shard or "?", t.onset_s, t.end_s, t.share))
        if t.detected_s is not None:
            marks.append((f"{t.key} detected", t.detected_s))
        if t.relief_s is not None:
            marks.append((f"{t.key} relieved", t.relief_s))
    return ShardSeries(obs.label, unit, edges, ids, values,
                       None if np.isnan(p99).all() else p99, tuple(events), tuple(marks))


def predicted_series(prediction: Any) -> ShardSeries | None:
    """A ``hotshard predict`` result's timeline as a series; None without one."""
    tl = getattr(prediction, "timeline", None)
    if tl is None:
        return None
    events = tuple((e.key, str(e.shard), e.start_s, e.end_s, e.share) for e in tl.events)
    return ShardSeries("the profile (predicted)", "share of the window's requests",
                       np.asarray(tl.edges_s, dtype=np.float64),
                       tuple(str(s) for s in range(tl.shares.shape[1])),
                       np.asarray(tl.shares, dtype=np.float64), None, events)


def timeline_figure(series: Sequence[ShardSeries]) -> Figure:
    """One panel per source: the drawn shards' lines, the others' range in grey, the events
    shaded; under a source with p99 per window, its p99 on a log scale."""
    from matplotlib.figure import Figure

    panels = sum(1 + (s.p99_ms is not None) for s in series)
    fig = Figure(figsize=(10, 2.3 * panels), dpi=100, layout="constrained")
    axes = fig.subplots(panels, 1, squeeze=False)[:, 0]
    i = 0
    for s in series:
        ax = axes[i]
        i += 1
        span = float(s.edges_s[-1])
        minutes = s.edges_s / 60.0
        drawn = s.drawn()
        rest = [k for k in range(s.values.shape[1]) if k not in drawn]
        if rest:
            ax.stairs(s.values[:, rest].max(axis=1), minutes,
                      baseline=s.values[:, rest].min(axis=1), fill=True, color="#dddddd",
                      label=f"the other {len(rest)} shards")
        for colour, k in zip(_COLOURS, drawn, strict=False):
            ax.stairs(s.values[:, k], minutes, color=colour, linewidth=1.6,
                      label=f"shard {s.shard_ids[k]}")
        for key, shard, start, end, share in s.events[:3]:
            ax.axvspan(start / 60.0, end / 60.0, color="#f0b400", alpha=0.18)
            ax.annotate(f"event: key {key} ({share:.0%}), shard {shard}",
                        (start / 60.0, ax.get_ylim()[1]), fontsize=8, va="top",
                        color="#8a6d00")
        for (what, at), style in zip(s.marks[:6], ("--", ":") * 3, strict=False):
            ax.axvline(at / 60.0, color="#444444", linestyle=style, linewidth=1.0)
            ax.annotate(what, (at / 60.0, ax.get_ylim()[1] * 0.85), fontsize=7,
                        rotation=90, va="top", ha="right", color="#444444")
        w, k = s.peak
        ax.set_title(f"{s.label}: {s.unit} per window; peak {clock(s.edges_s[w], span)}-"
                     f"{clock(s.edges_s[w + 1], span)} on shard {s.shard_ids[k]}", fontsize=10)
        ax.set_xlabel("minutes from the start")
        ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
        ax.legend(fontsize=8, loc="upper right")
        if s.p99_ms is not None:
            ax = axes[i]
            i += 1
            ax.stairs(s.p99_ms, minutes, color="#2c3e50")
            ax.set_yscale("log")
            ax.set_ylabel("p99 (ms)")
            ax.set_xlabel("minutes from the start")
            ax.set_title(f"{s.label}: p99 per window", fontsize=10)
    return fig
