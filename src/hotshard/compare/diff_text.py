"""``hotshard diff`` for the terminal: a ``ProfileDiff`` in words and columns.

``diff_table`` gives one section per question, numbers first: the keys that rose, fell,
entered or left the head (a share known only as a bound is written ``<=``, a change computed
with one ``>=`` / ``<=``), the concentration shares and the tail exponent's drift, the hottest
shard, and with timelines each key's requests per window as a sparkline. Calculation lives in
``compare.diff`` and ``compare.window_drift``; only words here, kept beside the result they
read as ``diagnose.text`` is.
"""

from __future__ import annotations

import numpy as np

from hotshard._format import pct, pp, shown, sparkline, times
from hotshard.compare.diff import (
    DEFAULT_MOVERS,
    DRIFT_SE,
    KeyMove,
    ProfileDiff,
    ShardDrift,
    TailDrift,
)
from hotshard.compare.window_drift import HOT_FACTOR, KeyWindows, WindowDrift, span_text

__all__ = ["diff_table"]


def _share_cell(share: float, exact: bool) -> str:
    return pct(share) if exact else f"<={pct(share)}"


def _change_cell(m: KeyMove) -> str:
    if m.exact_a and m.exact_b:
        return pp(m.change)
    return (">=" if not m.exact_a else "<=") + pp(m.change)


def _rank(r: int | None) -> str:
    return "-" if r is None else str(r)


def _move_rows(moves, width: int) -> list[str]:
    lines = [f"  {'key':<{width}}  {'A':>10}  {'B':>10}  {'change':>13}  rank A -> B"]
    for m in moves:
        status = "" if m.status == "stayed" else f"  {m.status}"
        lines.append(f"  {shown(m.key):<{width}}  {_share_cell(m.share_a, m.exact_a):>10}  "
                     f"{_share_cell(m.share_b, m.exact_b):>10}  {_change_cell(m):>13}  "
                     f"{_rank(m.rank_a)} -> {_rank(m.rank_b)}{status}")
    return lines


def _listing(moves, side: str, limit: int) -> str:
    listed = ", ".join(f"{shown(m.key)} ({pct(m.share_b if side == 'b' else m.share_a)})"
                      for m in moves[:limit])
    more = f", ... {len(moves) - limit:,} more" if len(moves) > limit else ""
    return listed + more


def diff_table(d: ProfileDiff, *, limit: int = DEFAULT_MOVERS) -> str:
    """The terminal rendering of a ``ProfileDiff``: one section per question, numbers first."""
    width = min(max([3, *(len(m.key) for m in d.risers + d.fallers)]), 24)
    lines = [
        f"A  {d.label_a}: {d.events_a:,.0f} events, {d.keys_a:,.0f} keys, head {d.head_a:,}",
        f"B  {d.label_b}: {d.events_b:,.0f} events, {d.keys_b:,.0f} keys, head {d.head_b:,}",
        "",
        f"top {d.top:,} keys of each: {len(d.stayed):,} in both, {len(d.entered):,} entered, "
        f"{len(d.left):,} left",
        "a key outside a head has at most that profile's largest tail count: "
        f"A <={pct(d.floor_a)}, B <={pct(d.floor_b)};",
        "changes computed with a floor are bounds (>= the least rise, <= the least fall) and "
        "rank as such",
        "",
        "largest risers (share of events)",
        *(_move_rows(d.risers, width) if d.risers else ["  none"]),
        "",
        "largest fallers",
        *(_move_rows(d.fallers, width) if d.fallers else ["  none"]),
        "",
        f"entered the head ({len(d.entered):,}): " + (_listing(d.entered, "b", limit) or "none"),
        f"left the head ({len(d.left):,}): " + (_listing(d.left, "a", limit) or "none"),
        "",
        f"  {'':<16}  {'A':>13}  {'B':>13}  change",
        *(f"  {s.label:<16}  {pct(s.a):>13}  {pct(s.b):>13}  {pp(s.change)}"
          for s in d.shares),
        *_tail_lines(d.tail),
    ]
    if d.shards is not None:
        lines += ["", *_shard_lines(d.shards)]
    if d.windows is not None:
        lines += ["", *_window_lines(d, d.windows, limit)]
    if d.notes:
        lines += ["", *(f"note: {n}" for n in d.notes)]
    return "\n".join(lines)


def _tail_lines(t: TailDrift) -> list[str]:
    def side(alpha, se) -> str:
        if alpha is None:
            return "no fit"
        return f"{alpha:.3f}" + ("" if se is None else f"+/-{se:.3f}")

    line = f"  {'tail alpha':<16}  {side(t.alpha_a, t.alpha_se_a):>13}  " \
           f"{side(t.alpha_b, t.alpha_se_b):>13}"
    if t.change is not None:
        line += f"  {t.change:+.3f}"
        if t.z is not None and t.significant is not None:
            verdict = "drifted" if t.significant else "within noise"
            line += f" = {t.z:.1f} combined SE: {verdict} (threshold {DRIFT_SE:g} SE)"
        elif t.z is not None:
            line += " (not comparable as a drift: the fits start at different counts)"
    lines = [line]
    if t.xmin_a is not None and t.xmin_b is not None:
        lines.append(f"  {'tail xmin':<16}  {t.xmin_a:>13g}  {t.xmin_b:>13g}")
    if t.note:
        lines.append(f"  note: {t.note}")
    return lines


def _shard_lines(s: ShardDrift) -> list[str]:
    lines = [
        f"hottest shard ({s.partitioner}, {s.key_type} keys)",
        f"  A: shard {s.hottest_a} at {pct(s.hottest_share_a)} ({times(s.max_over_mean_a)} "
        f"mean); B: shard {s.hottest_b} at {pct(s.hottest_share_b)} "
        f"({times(s.max_over_mean_b)} mean): {pp(s.change)}",
    ]
    for row in s.shards:
        moved = ", ".join(f"{shown(m.key)} {_change_cell(m)}" for m in row.keys)
        lines += [f"  shard {row.shard}: {pct(row.share_a)} -> {pct(row.share_b)} "
                  f"({pp(row.change)})",
                  f"    moved by {moved}; unnamed tail keys (modelled) {pp(row.rest_change)}"
                  if moved else
                  f"    no head key on it moved; unnamed tail keys (modelled) "
                  f"{pp(row.rest_change)}"]
    return lines


def _ranges(windows: tuple[int, ...]) -> str:
    """0-based windows as 1-based ranges: (3, 4, 9) -> '4-5,10'; none -> '-'."""
    if not windows:
        return "-"
    parts, start = [], windows[0]
    for prev, cur in zip(windows, (*windows[1:], None), strict=True):
        if cur != prev + 1:
            parts.append(f"{start + 1}" if start == prev else f"{start + 1}-{prev + 1}")
            start = cur
    return ",".join(parts)


def _fractions(counts: tuple[int, ...] | None) -> np.ndarray | None:
    if counts is None:
        return None
    x = np.asarray(counts, dtype=np.float64)
    return x / x.sum() if x.sum() > 0 else x


def _moved_score(k: KeyWindows, events_a: float, events_b: float) -> float:
    """The share of traffic that changed windows: the key's TV between A and B times its
    mean share of events; for a key in one head only, the TV between its one timeline and
    an even spread times its share there."""
    shares = [sum(c) / e for c, e in ((k.counts_a, events_a), (k.counts_b, events_b))
              if c is not None and e > 0]
    share = sum(shares) / len(shares) if shares else 0.0
    if k.tv is not None:
        return k.tv * share
    f = _fractions(k.counts_a if k.counts_a is not None else k.counts_b)
    return 0.0 if f is None else float(0.5 * np.abs(f - 1.0 / f.size).sum()) * share


def _when(start: float) -> str:
    from datetime import UTC, datetime

    try:
        return datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return f"{start:g} s"


# a key whose hot windows moved is called an event that moved when it carried at least this
# share of a window's requests on both sides (the smaller moves are the table's)
EVENT_SHARE = 0.01


def _moved_events(w: WindowDrift, moved_first: list[KeyWindows]) -> list[str]:
    """One sentence per event that moved: the key, its hot windows' times on each side and
    its share of those windows' requests (a shard melts in the window, not on average)."""
    from hotshard._format import clock

    out = []
    for k in moved_first:
        sides = []
        for hot, share, seconds in ((k.hot_a, k.share_a, w.seconds_a),
                                    (k.hot_b, k.share_b, w.seconds_b)):
            if share is None:
                break
            step = seconds / w.windows
            peak = max(share[i] for i in hot)
            spans = ", ".join(f"{clock(i * step, seconds)}-{clock((i + 1) * step, seconds)}"
                              for i in hot)
            sides.append((spans, peak))
        if len(sides) == 2 and min(p for _, p in sides) >= EVENT_SHARE:
            out.append(f"event moved: key {shown(k.key)} was hot in {sides[0][0]} in A (up to "
                       f"{pct(sides[0][1])} of a window's requests) and in {sides[1][0]} in B "
                       f"(up to {pct(sides[1][1])})")
    return out


def _window_lines(d: ProfileDiff, w: WindowDrift, limit: int) -> list[str]:
    first = set(w.top_a) | set(w.top_b)
    top = [k for k in w.keys if k.key in first]
    moved = sorted((k for k in w.keys if k.hot_moved and k.key not in first),
                   key=lambda k: (-_moved_score(k, d.events_a, d.events_b), k.key))
    rows = top + moved[:limit]
    width = min(max([3, *(len(k.key) for k in rows)]), 24)
    n = w.windows
    lines = [f"windows: {n} per span, A {span_text(w.seconds_a / n)} each from "
             f"{_when(w.start_a)}, B {span_text(w.seconds_b / n)} each from {_when(w.start_b)}",
             f"(each key's requests per window, █ its busiest in A or B; hot: at least "
             f"{HOT_FACTOR:g}x its even share, beyond chance)",
             f"  {'key':<{width}}  {'A':<{n}}  {'B':<{n}}  {'TV':>4}  {'chance':>6}  "
             "hot windows A -> B"]
    for k in rows:
        fa, fb = _fractions(k.counts_a), _fractions(k.counts_b)
        peak = max(float(f.max()) for f in (fa, fb) if f is not None)
        cell = ["-".ljust(n) if f is None else sparkline(f, peak) for f in (fa, fb)]
        tv = "-" if k.tv is None else f"{k.tv:.2f}"
        chance = "-" if k.tv_chance is None else f"{k.tv_chance:.2f}"
        hot_a = _ranges(k.hot_a) if k.counts_a is not None else "outside A's head"
        hot_b = _ranges(k.hot_b) if k.counts_b is not None else "outside B's head"
        lines.append(f"  {shown(k.key):<{width}}  {cell[0]}  {cell[1]}  {tv:>4}  {chance:>6}  "
                     f"{hot_a} -> {hot_b}")
    common = [k for k in w.keys if k.tv is not None]
    n_moved = sum(k.hot_moved for k in w.keys)
    lines += _moved_events(w, moved_first=[k for k in rows if k.hot_moved and k.hot_a
                                           and k.hot_b])
    lines.append(f"{n_moved:,} of {len(w.keys):,} keys were hot in other windows in B than "
                 "in A" + (f"; listed: the {limit:,} whose windows moved the most traffic "
                           f"({len(moved) - limit:,} more in the JSON form)"
                           if len(moved) > limit else ""))
    if common:
        lines.append(f"the {len(common):,} keys in both heads: median TV "
                     f"{np.median([k.tv for k in common]):.2f} "
                     f"({np.median([k.tv_chance for k in common]):.2f} expected by chance)")
    return lines
