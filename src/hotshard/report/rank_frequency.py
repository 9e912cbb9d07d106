"""Rank-frequency plot of a profile: head points, the tail histogram, the fitted power law."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from hotshard.profile.document import Profile
from hotshard.profile.powerlaw import DiscretePowerLaw
from hotshard.report.image_files import save_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_rank_frequency", "rank_frequency_figure"]

def _tail_ranks(profile: Profile) -> tuple[np.ndarray, np.ndarray]:
    """(rank, count) steps of the tail classes, most frequent first, after the head."""
    counts, keys = profile.tail.classes()
    order = np.argsort(counts)[::-1]
    counts, keys = counts[order], keys[order]
    keep = keys > 0
    counts, keys = counts[keep], keys[keep]
    edges = len(profile.head_keys) + 1 + np.concatenate([[0], np.cumsum(keys)])
    # one more point so the last class's step runs to the last key's rank
    return edges, np.append(counts, counts[-1]) if counts.size else counts


def rank_frequency_figure(profile: Profile, *, title: str | None = None) -> Figure:
    """The figure ``plot_rank_frequency`` saves: head points, tail steps, the fitted law.

    Log-log axes of events per key against key rank: the head's exact counts, the tail's
    count-of-counts histogram as steps, the fitted discrete power law (when the profile records
    the tail's size) and the level every key would have under uniform keys. The figure is not
    attached to pyplot, so it needs no closing.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), dpi=120)
    ax = fig.add_subplot()
    head = profile.head_counts
    if head.size:
        ax.loglog(np.arange(1, head.size + 1), head, "o", ms=3, color="#c0392b",
                  label=f"head: top {head.size} keys (exact)")
    ranks, counts = _tail_ranks(profile)
    if counts.size:
        ax.step(ranks, counts, where="post", color="#2c3e50", lw=1.2,
                label="tail: count-of-counts histogram")
    pl = profile.tail.power_law
    if pl and pl.get("n_tail"):  # the fitted curve's ranks need the tail's size
        law = DiscretePowerLaw(pl["alpha"], int(pl["xmin"]))
        top = max(float(counts.max()) if counts.size else pl["xmin"], pl["xmin"] + 1)
        c = np.unique(np.geomspace(pl["xmin"], top, 200).round())
        rank = len(profile.head_keys) + pl["n_tail"] * law.ccdf(c)
        ax.loglog(rank, c, "--", color="#27ae60", lw=1.5,
                  label=f"fitted power law: alpha {pl['alpha']:.2f}, xmin {int(pl['xmin'])}")
    uniform = profile.events / profile.keys
    ax.axhline(uniform, color="#7f8c8d", lw=1, ls=":", label="uniform keys (every key equal)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("key rank")
    ax.set_ylabel("events per key")
    ax.set_title(title or f"{profile.source.get('key', 'key')}: {int(profile.events):,} events, "
                          f"{int(profile.keys):,} keys")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_rank_frequency(profile: Profile, path: str | os.PathLike[str], *,
                        title: str | None = None) -> None:
    """Draw the rank-frequency curve on log-log axes; write PNG, SVG or PDF atomically.

    Raises
    ------
    InputError
        The file name is not .png, .svg or .pdf, or the file cannot be written.
    """
    save_figure(path, lambda: rank_frequency_figure(profile, title=title))
