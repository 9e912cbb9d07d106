"""Per-shard CPU and latency percentiles of one or more runs, side by side.

The left column has one row of bars per observation: each shard's CPU in percent of one core,
the hottest shard in another colour and a dashed line at the median shard, so a hot shard
shows as one tall bar over an even floor. The right panel draws each observation's latency
percentiles (p50, p90, p99, p999, max) as a line on a log axis, so "load test" and
"production" can be compared at a glance. Missing data gets a note, never an error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hotshard._format import pct
from hotshard.errors import InputError
from hotshard.observations import Observations
from hotshard.report.image_files import save_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["LATENCY_PLOTTED", "latency_panel", "observations_figure", "plot_observations",
           "run_colours"]

# The latency summaries drawn, left to right (those an observation has).
LATENCY_PLOTTED = ("p50", "p90", "p99", "p999", "max")

_BAR = "#5b7fa6"
_HOT = "#c0392b"
_MEDIAN = "#2c3e50"
_GAP = "#7f8c8d"
# one colour per observation (latency line and its CPU row's title); no red, that marks heat
_LINES = ("#2c3e50", "#27ae60", "#8e44ad", "#d68910", "#16a085", "#2980b9", "#7f8c8d",
          "#6e2c00")
_NOTE = {"ha": "center", "va": "center", "fontsize": 9, "color": "#555555"}


def run_colours(n: int) -> list[str]:
    """One colour for each of ``n`` runs, the same in every figure of one report."""
    return [_LINES[i % len(_LINES)] for i in range(n)]


def _as_list(obs: Observations | Sequence[Observations]) -> list[Observations]:
    items = [obs] if isinstance(obs, Observations) else list(obs)
    if not items:
        raise InputError("nothing to draw: no observations given")
    for item in items:
        if not isinstance(item, Observations):
            raise TypeError(f"expected Observations, got {type(item).__name__}")
    return items


def _shard_ticks(ax: Axes, ids: Sequence[str], *, show: bool) -> None:
    """Shard ids on the x axis: all of them when few, every k-th when many (64 stay legible)."""
    n = len(ids)
    step = max(1, math.ceil(n / 32))
    ticks = list(range(0, n, step))
    ax.set_xticks(ticks)
    if not show:
        ax.tick_params(axis="x", labelbottom=False)
        return
    rotate = n > 12 or any(len(i) > 4 for i in ids)
    ax.set_xticklabels([ids[i] for i in ticks], rotation=90 if rotate else 0,
                       fontsize=7 if n > 24 else 8)


def _cpu_panel(ax: Axes, obs: Observations, colour: str, *, show_ticks: bool) -> None:
    ax.set_title(obs.label, loc="left", fontsize=9, color=colour, fontweight="bold")
    ax.set_ylim(0, 100)
    ax.set_yticks([0, 25, 50, 75, 100])
    ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:g}%")
    ax.set_ylabel("CPU (% of one core)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if not obs.shards:
        ax.set_xticks([])
        ax.text(0.5, 0.5, "no per-shard data", transform=ax.transAxes, **_NOTE)
        return
    ids = [s.id for s in obs.shards]
    cpu = np.array([np.nan if s.cpu is None else 100.0 * s.cpu for s in obs.shards])
    x = np.arange(len(ids))
    ax.set_xlim(-0.6, len(ids) - 0.4)
    _shard_ticks(ax, ids, show=show_ticks)
    present = ~np.isnan(cpu)
    missing = np.flatnonzero(~present)
    if missing.size:  # a gap, marked at the floor so it is not read as 0%
        ax.plot(missing, np.zeros(missing.size), "x", color=_GAP, ms=5, clip_on=False,
                label=f"no CPU reported ({missing.size} shard{'s' * (missing.size > 1)})")
    if not present.any():
        ax.text(0.5, 0.5, "no shard reports CPU", transform=ax.transAxes, **_NOTE)
        ax.legend(fontsize=7, loc="upper right")
        return
    hot = int(np.nanargmax(cpu))  # ties go to the first, as in Observations.hottest_shard
    heights = np.minimum(np.nan_to_num(cpu, nan=0.0), 100.0)
    colours = [_HOT if i == hot else _BAR for i in range(len(ids))]
    bars = ax.bar(x[present], heights[present], width=0.8,
                  color=[c for c, p in zip(colours, present, strict=True) if p])
    over = np.flatnonzero(cpu > 100.0)  # cannot come from a validated file; drawn honestly
    for i in over:
        bar = bars[int(np.count_nonzero(present[:i]))]
        bar.set_hatch("//")
        bar.set_edgecolor("white")
        ax.text(i, 98, ">100%", rotation=90, ha="center", va="top", fontsize=6,
                color="white", fontweight="bold")
    # legend handles: one normal bar, the hot bar, the clipped bar
    normal = next((b for i, b in zip(np.flatnonzero(present), bars, strict=True) if i != hot),
                  None)
    if normal is not None:
        normal.set_label("shard")
    hot_bar = bars[int(np.count_nonzero(present[:hot]))]
    hot_bar.set_label(f"hottest: shard {ids[hot]} ({pct(cpu[hot] / 100)})")
    if over.size:
        ax.bar([np.nan], [0], color="white", edgecolor=_GAP, hatch="//",
               label=f"clipped at 100% ({over.size})")
    median = float(np.median(cpu[present]))
    ax.axhline(median, color=_MEDIAN, ls="--", lw=1.2,
               label=f"median shard: {pct(median / 100)}")
    ax.legend(fontsize=7, loc="best", framealpha=0.9)


def latency_panel(ax: Axes, observations: Sequence[Observations],
                  colours: Sequence[str]) -> None:
    """Each run's latency percentiles as one line on a log axis (also the report's figure)."""
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title("latency percentiles", fontsize=10)
    lines: list[tuple[Observations, str, list[tuple[str, float]]]] = []
    without = []
    for obs, colour in zip(observations, colours, strict=True):
        values = (obs.latency_ms.to_dict() if obs.latency_ms is not None else {})
        points = [(n, float(values[n])) for n in LATENCY_PLOTTED
                  if values.get(n) is not None and values[n] > 0]  # 0 ms has no log position
        if points:
            lines.append((obs, colour, points))
        else:
            without.append(obs.label)
    if not lines:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no latency measured", transform=ax.transAxes, **_NOTE)
        return
    names = [n for n in LATENCY_PLOTTED if any(n in dict(p) for _o, _c, p in lines)]
    where = {n: i for i, n in enumerate(names)}
    for obs, colour, points in lines:
        ax.plot([where[n] for n, _v in points], [v for _n, v in points], "o-", color=colour,
                lw=1.8, ms=5, label=obs.label)
    ax.set_yscale("log")
    from matplotlib.ticker import LogLocator, NullFormatter

    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:g}")
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_xlim(-0.3, len(names) - 0.7)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    if without:
        ax.text(0.98, 0.02, "no latency: " + ", ".join(without), transform=ax.transAxes,
                ha="right", va="bottom", fontsize=8, color="#555555")


def _default_title(observations: Sequence[Observations]) -> str:
    if len(observations) == 1:
        return f"{observations[0].label}: per-shard CPU and latency"
    return "per-shard CPU and latency: " + " vs ".join(o.label for o in observations)


def observations_figure(obs: Observations | Sequence[Observations], *,
                        title: str | None = None) -> Figure:
    """The figure ``plot_observations`` saves, for inspection or further drawing.

    Left: one row of per-shard CPU bars per observation (shared axes when all observations
    have the same shards). Right: latency percentiles of every observation on one log axis.
    The figure is not attached to pyplot, so it needs no closing.

    Raises
    ------
    InputError
        ``obs`` is an empty sequence.
    """
    observations = _as_list(obs)
    from matplotlib.figure import Figure

    rows = len(observations)
    fig = Figure(figsize=(13, max(4.5, 1.2 + 2.4 * rows)), dpi=120, layout="constrained")
    grid = fig.add_gridspec(rows, 2, width_ratios=(3, 2))
    same_shards = len({tuple(s.id for s in o.shards) for o in observations}) == 1
    colours = run_colours(rows)
    first: Any = None
    for row, (o, colour) in enumerate(zip(observations, colours, strict=True)):
        shared = {"sharex": first, "sharey": first} if same_shards else {"sharey": first}
        ax = fig.add_subplot(grid[row, 0], **shared)
        if first is None:
            first = ax
        last = row == rows - 1
        _cpu_panel(ax, o, colour, show_ticks=last or not same_shards)
        if last or not same_shards:
            ax.set_xlabel("shard id")
    latency_panel(fig.add_subplot(grid[:, 1]), observations, colours)
    fig.suptitle(title or _default_title(observations))
    return fig


def plot_observations(obs: Observations | Sequence[Observations], path: str | os.PathLike[str],
                      *, title: str | None = None) -> None:
    """Draw per-shard CPU and latency percentiles; write PNG, SVG or PDF atomically.

    ``obs`` is one observation or several (e.g. "load test", "production", "mitigated"),
    drawn in the order given.

    Raises
    ------
    InputError
        The file name is not .png, .svg or .pdf, the file cannot be written, or ``obs`` is
        an empty sequence.
    """
    save_figure(path, lambda: observations_figure(obs, title=title))
