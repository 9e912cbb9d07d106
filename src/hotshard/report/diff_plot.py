"""Rank-shift picture of a profile diff: a slope chart of the top keys' shares in A and in B."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from hotshard.compare.diff import KeyMove, ProfileDiff
from hotshard.report.image_files import save_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["diff_figure", "plot_diff"]

_UP = "#c0392b"
_DOWN = "#2471a3"
_UNCLEAR = "#95a5a6"
_FLOOR = "#7f8c8d"
_COLOUR = {"up": _UP, "down": _DOWN, "same": _UNCLEAR, "unclear": _UNCLEAR}


def _chosen(d: ProfileDiff, n: int) -> list[KeyMove]:
    """The keys drawn: the ``n`` largest risers and fallers and each head's top ``n``."""
    keys = d.keys
    top_a = sorted((m for m in keys if m.rank_a is not None), key=lambda m: m.rank_a)[:n]
    top_b = sorted((m for m in keys if m.rank_b is not None), key=lambda m: m.rank_b)[:n]
    seen: dict[str, KeyMove] = {}
    for m in (*d.risers[:n], *d.fallers[:n], *top_a, *top_b):
        seen.setdefault(m.key, m)
    return list(seen.values())


def _spread(values: list[float], low: float, high: float, gap: float = 0.02) -> list[float]:
    """Label heights for points at ``values`` on a log axis from ``low`` to ``high``: labels
    closer than ``gap`` of the axis's decades are stacked ``gap`` apart, centred on their
    points' mean height; lone labels stay level with their points."""
    if not values:
        return []
    logs = np.log10(values)
    step = gap * max(np.log10(high) - np.log10(low), 0.5)
    order = np.argsort(logs)
    groups: list[list[float]] = []  # each: the target heights of labels stacked together

    def start(g: list[float]) -> float:
        return float(np.mean(g)) - (len(g) - 1) * step / 2

    for y in logs[order]:
        groups.append([float(y)])
        while len(groups) > 1 and start(groups[-2]) + len(groups[-2]) * step > start(groups[-1]):
            last = groups.pop()
            groups[-1].extend(last)
    placed = np.array([start(g) + i * step for g in groups for i in range(len(g))])
    out = np.empty_like(placed)
    out[order] = placed
    return (10.0 ** out).tolist()


def diff_figure(d: ProfileDiff, *, keys: int = 10, title: str | None = None) -> Figure:
    """A slope chart: each key's share of events in A (left) and B (right), log scale.

    Risers are red, fallers blue, keys whose direction the profiles cannot tell grey. A key
    outside a head is drawn at that head's floor (the most it can carry) with a hollow marker:
    on the left for keys that entered B's head, on the right for keys that left A's; the floors
    are the dotted lines. Drawn: the ``keys`` largest risers and fallers and each head's top
    ``keys``. The figure is not attached to pyplot, so it needs no closing.
    """
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    fig = Figure(figsize=(7, 7.5), dpi=120)
    ax = fig.add_subplot()
    chosen = _chosen(d, keys)
    for m in chosen:
        colour = _COLOUR[m.direction]
        ax.plot([0, 1], [m.share_a * 100, m.share_b * 100], color=colour, lw=1.2, alpha=0.8)
        for x, share, exact in ((0, m.share_a, m.exact_a), (1, m.share_b, m.exact_b)):
            ax.plot(x, share * 100, "o", ms=4, color=colour,
                    mfc=colour if exact else "white")
    shares = [100 * s for m in chosen for s, e in ((m.share_a, m.exact_a), (m.share_b, m.exact_b))
              if e and s > 0] + [100 * f for f in (d.floor_a, d.floor_b) if f > 0]
    low, high = (min(shares), max(shares)) if shares else (1.0, 1.0)
    for x, side in ((0, "a"), (1, "b")):
        named = [(100 * getattr(m, f"share_{side}"), m) for m in chosen
                 if getattr(m, f"exact_{side}") and getattr(m, f"share_{side}") > 0]
        for y, (share, m) in zip(_spread([v for v, _ in named], low, high), named, strict=True):
            ax.annotate(m.key, (x, share), xytext=(x - 0.04 if x == 0 else x + 0.04, y),
                        textcoords="data", ha="right" if x == 0 else "left", va="center",
                        fontsize=6.5, color=_COLOUR[m.direction])
    for x, floor, name in ((0, d.floor_a, "A"), (1, d.floor_b, "B")):
        if floor > 0:
            ax.plot([x - 0.08, x + 0.08], [floor * 100] * 2, ":", color=_FLOOR, lw=1.5)
            ax.annotate(f"{name}'s head floor", (x, floor * 100), xytext=(0, -9),
                        textcoords="offset points", ha="center", fontsize=7, color=_FLOOR)
    ax.set_yscale("log")
    ax.set_xlim(-0.45, 1.45)
    ax.set_xticks([0, 1], [f"A: {d.label_a}", f"B: {d.label_b}"])
    ax.set_ylabel("share of events (%)")
    ax.grid(True, axis="y", which="major", alpha=0.3)
    ax.set_title(title or f"How the hot keys moved: top {d.top:,} keys of each, "
                          f"{len(d.entered):,} entered, {len(d.left):,} left", fontsize=10)
    handles = [Line2D([], [], color=_UP, marker="o", label="rose"),
               Line2D([], [], color=_DOWN, marker="o", label="fell"),
               Line2D([], [], color=_UNCLEAR, marker="o", label="direction unknown"),
               Line2D([], [], color=_FLOOR, marker="o", mfc="white", ls="",
                      label="outside that head: at most its floor (entered / left)")]
    ax.legend(handles=handles, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, -0.16),
              ncol=2, frameon=False)
    fig.tight_layout()
    return fig


def plot_diff(d: ProfileDiff, path: str | os.PathLike[str], *, keys: int = 10,
              title: str | None = None) -> None:
    """Draw ``diff_figure`` to a PNG, SVG or PDF file, atomically.

    Raises
    ------
    InputError
        The file name is not .png, .svg or .pdf, or the file cannot be written.
    """
    save_figure(path, lambda: diff_figure(d, keys=keys, title=title))
