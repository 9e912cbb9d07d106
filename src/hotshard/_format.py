"""Numbers in words, one way everywhere: the diagnosis, the CI gate and the report print the
same value the same way (a reader comparing two outputs never meets 1.7x beside 1.69x)."""

from __future__ import annotations

import math
import re

__all__ = ["HUGE", "clock", "count", "latencies", "latency", "ms", "pct", "pct_apart", "pp",
           "rps", "times", "whole"]


def _percent_text(v: float, sign: str = "", digits: int = 2) -> str:
    """``v`` (already in percent) with the digits it needs: whole from 10, one decimal from 1,
    else two significant digits (0.15, 0.0015), and powers of ten below a millionth of a percent,
    where fixed digits would round a share that is there to zero. ``digits`` > 2 adds that many
    significant digits less one, for two values that must read apart."""
    extra = digits - 2
    a = abs(float(f"{v:.{digits}g}"))  # as rounded: 9.996 is written as 10, not 10.0
    if a == 0 or not math.isfinite(a):
        return f"{v:{sign}.{extra}f}"
    if a >= 10:
        return f"{v:{sign}.{max(0, extra - int(math.log10(a)) + 1)}f}"
    if a >= 1:
        return f"{v:{sign}.{1 + extra}f}"
    places = 1 - math.floor(math.log10(a)) + extra
    return f"{v:{sign}.{places}f}" if places <= 6 + extra else f"{v:{sign}.{1 + extra}e}"


def pct(x: float) -> str:
    """A share in percent with the digits it needs (7.0%, 12%, 0.15%, 0.0015%).

    Two significant digits below 10% and whole percents above, in prose, tables and plot
    labels alike, so one share reads the same in the diagnosis, the report and the terminal.
    """
    return f"{_percent_text(100 * x)}%"


def pct_apart(a: float, b: float) -> tuple[str, str]:
    """``pct`` of two shares a sentence compares ("8.62%, above the 8.59% uniform keys reach"),
    with a digit more, and another, until two different values read differently."""
    for digits in range(2, 7):
        left, right = (f"{_percent_text(100 * x, digits=digits)}%" for x in (a, b))
        if left != right or a == b:
            return left, right
    return left, right


def pp(x: float) -> str:
    """A change of share in signed percentage points, with ``pct``'s digits (+1.5 pp, -12 pp)."""
    return f"{_percent_text(100 * x, '+')} pp"


# From here on a whole number is written in powers of ten: a hand-typed 1e300 in an
# observations file is valid JSON, and 300 digits with separators help nobody.
HUGE = 1e15


def whole(x: float) -> str:
    """A whole number with thousands separators, or ``1.2e+18`` from ``HUGE`` on."""
    return f"{x:.2g}" if abs(x) >= HUGE or not math.isfinite(x) else f"{x:,.0f}"


def ms(x: float) -> str:
    """Milliseconds: whole from 10 ms (with thousands separators), else one or two decimals."""
    return f"{whole(x)} ms" if x >= 10 else f"{x:.1f} ms" if x >= 1 else f"{x:.2f} ms"


# a latency's unit by its size: below a second in ms, then s, min and h (a backlog's p99 in
# hours reads as hours, not as 13,844,480.0 ms)
_UNITS = ((1_000.0, "ms", 1.0), (60_000.0, "s", 1_000.0), (3_600_000.0, "min", 60_000.0),
          (math.inf, "h", 3_600_000.0))


def _three_digits(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else whole(x)


def latency(value_ms: float | None) -> str:
    """One latency to about three digits in the unit its size calls for (``9.20 ms``,
    ``842 ms``, ``14.1 s``, ``3.9 h``); ``-`` when there is none."""
    if value_ms is None or not math.isfinite(value_ms):
        return "-"
    _, unit, scale = next(u for u in _UNITS if value_ms < u[0])
    return f"{_three_digits(value_ms / scale)} {unit}"


def latencies(values_ms: list[float | None]) -> str:
    """Percentiles in a row that fits a terminal whatever the backlog: one unit written once
    when they share it (``6.71/23.7/53.4/94.4 ms``), else each with its own (``9.20 ms/2.72
    h/3.85 h``)."""
    shown = [latency(v).split(" ") for v in values_ms]
    units = {parts[1] for parts in shown if len(parts) == 2}
    if len(units) <= 1:
        return "/".join(parts[0] for parts in shown) + (f" {units.pop()}" if units else "")
    return "/".join(" ".join(parts) for parts in shown)


def times(x: float) -> str:
    """A ratio: two decimals below 2x (where 1.05x and 1.5x differ), one to 10x, then whole."""
    if x >= HUGE or not math.isfinite(x):
        return f"{x:.2g}x"
    return f"{x:,.0f}x" if x >= 10 else f"{x:.1f}x" if x >= 2 else f"{x:.2f}x"


def rps(x: float) -> str:
    return f"{whole(x)} req/s"


def count(x: float) -> str:
    return whole(x)


def clock(seconds: float, span: float | None = None) -> str:
    """A time from a run's or a profile's start, as a clock reads it: ``65:00`` (minutes and
    seconds, with tenths where the time has them: ``0:02.5``) while ``span`` (the longest time
    the output shows; ``seconds`` itself if None) is at most 3 hours, ``26:40:00`` below 100
    hours, ``5d 03:20`` beyond. One output keeps one form for all its times, so give them the
    same ``span``."""
    value = max(float(seconds), 0.0)
    span = float(value if span is None else span)
    if span <= 10_800:
        tenths = int(round(value * 10))
        whole, tenth = divmod(tenths, 10)
        return f"{whole // 60}:{whole % 60:02d}" + (f".{tenth}" if tenth else "")
    total = int(round(value))
    if span < 360_000:
        return f"{total // 3600}:{total // 60 % 60:02d}:{total % 60:02d}"
    return f"{total // 86400}d {total // 3600 % 24:02d}:{total // 60 % 60:02d}"


# control characters (C0, DEL, C1) and the bidirectional overrides and isolates, which can
# forge lines or reorder what a terminal shows (U+202A-202E, U+2066-2069, and the marks)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe_text(text: str, limit: int = 300) -> str:
    """Foreign text (a server's error, a key from someone's file) made fit for a terminal:
    every control and bidi character shown as its escape (``\\x1b``, ``\\u202e``), on one
    line, cut to ``limit`` characters with an ellipsis saying so."""
    def escape(m: re.Match[str]) -> str:
        code = ord(m.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    clean = _UNSAFE.sub(escape, str(text))
    if len(clean) > limit:
        clean = clean[:limit] + f"... ({len(clean) - limit:,} more characters)"
    return clean


def shown(key: object) -> str:
    """A key from someone's data as a terminal shows it: escaped, at most 80 characters."""
    return safe_text(str(key), 80)


def sparkline(values, top: float | None = None) -> str:
    """One block character per value, scaled to ``top`` (default the row's largest; give one
    top to rows read against each other); a value of 0 (an empty window) is ' ', one past
    ``top`` a full block."""
    blocks = " ▁▂▃▄▅▆▇█"
    values = list(values)
    if top is None:
        top = max(values) if values else 0
    if top <= 0:
        return " " * len(values)
    return "".join(" " if v <= 0 else blocks[max(1, min(8, round(8 * v / top)))]
                   for v in values)
