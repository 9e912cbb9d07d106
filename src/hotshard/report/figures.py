"""The report's figures (matplotlib, no pyplot state) and their inline SVG form.

Each figure function returns a ``matplotlib.figure.Figure`` drawn from ``runs``' data;
``figure_svg`` turns one into an ``<svg>`` element that can sit beside others in one HTML page.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from hotshard._format import pct
from hotshard.observations import Observations
from hotshard.report.image_files import quiet_numerics
from hotshard.report.runs import RunSummary, ShardLoad

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["figure_svg", "latency_figure", "mitigation_figure",
           "shard_load_figure"]

_BAR = "#5b7fa6"
_HOT = "#c0392b"
_MEAN = "#2c3e50"
_BAND = "#27ae60"
_MEDIAN_BAR = "#95a5a6"
_NOTE = {"ha": "center", "va": "center", "fontsize": 9, "color": "#555555"}

# ids, and references to them, in matplotlib's SVG: element ids, url(#id), (xlink:)href="#id"
_ID = re.compile(r'(\bid=")([^"]+)(")|(url\(#)([^)]+)(\))|(href=")#([^"]+)(")')


def figure_svg(fig: Figure, *, prefix: str, alt: str) -> str:
    """``fig`` as an inline ``<svg>`` element, its ids made unique with ``prefix``.

    Matplotlib names glyphs, markers and clip paths by ids that repeat across figures (glyph
    "DejaVuSans-14" is a different letter in each), and inline SVGs share one id space per page,
    so every id and every reference to one is prefixed. Text is drawn as paths, so no font is
    needed; dates and random ids are left out, so the same figure gives the same bytes.
    ``alt`` becomes the element's accessible name (it is escaped here).
    """
    import html

    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "hotshard"}), \
            quiet_numerics():
        fig.savefig(buffer, format="svg",
                    metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]  # drop the XML declaration and DOCTYPE

    def rename(match: re.Match[str]) -> str:
        if match.group(1):
            return f"{match.group(1)}{prefix}-{match.group(2)}{match.group(3)}"
        if match.group(4):
            return f"{match.group(4)}{prefix}-{match.group(5)}{match.group(6)}"
        return f"{match.group(7)}#{prefix}-{match.group(8)}{match.group(9)}"

    text = _ID.sub(rename, text)
    # scale with the page: keep the viewBox, drop the fixed size, name it for screen readers
    head_end = text.index(">")
    head = re.sub(r'\s(width|height)="[^"]*"', "", text[:head_end])
    head += f' role="img" aria-label="{html.escape(alt, quote=True)}" class="plot"'
    return head + text[head_end:]


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _shard_ticks(ax: Axes, ids: Sequence[str]) -> None:
    """Shard ids on the x axis: all when few, every k-th when many."""
    n = len(ids)
    step = max(1, math.ceil(n / 32))
    ticks = list(range(0, n, step))
    ax.set_xticks(ticks)
    rotate = n > 12 or any(len(i) > 4 for i in ids)
    ax.set_xticklabels([ids[i] for i in ticks], rotation=90 if rotate else 0,
                       fontsize=7 if n > 24 else 8)


def _load_panel(ax: Axes, load: ShardLoad, top: float) -> None:
    scale = 100.0
    x = np.arange(len(load.ids))
    even = float(np.ptp(load.values)) <= 1e-9 * max(load.peak, 1e-12)  # no hottest to mark
    colours = [_HOT if i == load.hottest and not even else _BAR for i in range(len(load.ids))]
    ax.bar(x, load.values * scale, width=0.8, color=colours)
    if not even:
        ax.bar([np.nan], [0], color=_HOT,
               label=f"hottest: shard {load.hottest_id} ({pct(load.peak)})")
    if load.band is not None:
        low, high = load.band
        ax.axhspan(low * scale, high * scale, color=_BAND, alpha=0.25, lw=0,
                   label=f"uniform keys' band {pct(low)} to {pct(high)}")
    ax.axhline(load.mean * scale, color=_MEAN, ls="--", lw=1,
               label=f"mean shard: {pct(load.mean)}")
    ax.set_xlim(-0.6, len(load.ids) - 0.4)
    ax.set_ylim(0, top * scale)
    ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:g}%")
    ax.set_ylabel("share of requests" if load.unit == "share" else "CPU (% of one core)",
                  fontsize=8)
    ax.set_title(load.title, loc="left", fontsize=9, fontweight="bold")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    _shard_ticks(ax, load.ids)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0)


def shard_load_figure(loads: Sequence[ShardLoad]) -> Figure:
    """One row of per-shard bars per load (uniform, predicted, each run), hottest in red.

    Rows of shares share one y scale, so a hot shard stands as tall in the prediction as in
    production; CPU rows run from 0 to 100% of one core. The green band is what uniform keys
    could produce for the same total; the dashed line is the mean shard.
    """
    if not loads:
        raise ValueError("no per-shard load to draw")
    fig = _new_figure(11, 1.0 + 2.1 * len(loads))
    axes = fig.subplots(len(loads), 1, squeeze=False)[:, 0]
    share_top = max((max(ld.peak, ld.band[1] if ld.band else 0.0)
                     for ld in loads if ld.unit == "share"), default=0.0)
    for ax, load in zip(axes, loads, strict=True):
        top = 1.0 if load.unit == "cpu" else share_top * 1.12
        _load_panel(ax, load, top)
    axes[-1].set_xlabel("shard")
    return fig


def latency_figure(observations: Sequence[Observations]) -> Figure:
    """Every run's latency percentiles on one log axis (``observations_plot``'s panel)."""
    from hotshard.report.observations_plot import latency_panel, run_colours

    fig = _new_figure(8, 4.2)
    latency_panel(fig.add_subplot(), observations, run_colours(len(observations)))
    return fig


def mitigation_figure(runs: Sequence[RunSummary]) -> Figure:
    """Grouped bars per run: hottest and median shard CPU (left), p99 latency (right)."""
    if not runs:
        raise ValueError("no runs to compare")
    fig = _new_figure(11, 4.2)
    cpu_ax, p99_ax = fig.subplots(1, 2, width_ratios=(3, 2))
    x = np.arange(len(runs))
    labels = [r.label for r in runs]
    width = 0.38
    hottest = [np.nan if r.hottest_cpu is None else 100 * r.hottest_cpu for r in runs]
    median = [np.nan if r.median_cpu is None else 100 * r.median_cpu for r in runs]
    cpu_ax.bar(x - width / 2, hottest, width, color=_HOT, label="hottest shard")
    cpu_ax.bar(x + width / 2, median, width, color=_MEDIAN_BAR, label="median shard")
    for i, (h, m) in enumerate(zip(hottest, median, strict=True)):
        for dx, value in ((-width / 2, h), (width / 2, m)):
            text = "n/a" if math.isnan(value) else pct(value / 100)
            cpu_ax.text(i + dx, 0 if math.isnan(value) else value, text, ha="center",
                        va="bottom", fontsize=8)
    cpu_ax.set_ylim(0, 110)
    cpu_ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:g}%")
    cpu_ax.set_ylabel("CPU (% of one core)")
    cpu_ax.set_title("shard CPU", fontsize=10)
    cpu_ax.legend(fontsize=8, loc="upper right")
    p99 = [np.nan if r.p99_ms is None else r.p99_ms for r in runs]
    p99_ax.bar(x, p99, 0.6, color=_MEAN)
    for i, value in enumerate(p99):
        text = "n/a" if math.isnan(value) else f"{value:.0f} ms"
        p99_ax.text(i, 0 if math.isnan(value) else value, text, ha="center", va="bottom",
                    fontsize=8)
    present = [v for v in p99 if not math.isnan(v)]
    if present and min(present) > 0 and max(present) / min(present) > 20:
        p99_ax.set_yscale("log")
        p99_ax.set_ylabel("p99 latency (ms, log scale)")
    else:
        p99_ax.set_ylim(0, (max(present) if present else 1) * 1.2)
        p99_ax.set_ylabel("p99 latency (ms)")
    p99_ax.set_title("p99 latency", fontsize=10)
    if not present:
        p99_ax.text(0.5, 0.5, "no p99 measured", transform=p99_ax.transAxes, **_NOTE)
    for ax in (cpu_ax, p99_ax):
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=20 if len(runs) > 2 else 0, ha="right"
                           if len(runs) > 2 else "center", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    return fig
