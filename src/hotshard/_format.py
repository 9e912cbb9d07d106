"""Numbers in words, one way everywhere: the diagnosis, the CI gate and the report print the
same value the same way (a reader comparing two outputs never meets 1.7x beside 1.69x)."""

from __future__ import annotations

import math

__all__ = ["HUGE", "count", "ms", "pct", "rps", "times", "whole"]


def pct(x: float) -> str:
    """A share in percent with the digits it needs (7.0%, 1.48%, 0.0015%)."""
    v = 100 * x
    if v == 0 or v >= 10:
        return f"{v:.0f}%"
    if v >= 1:
        return f"{v:.1f}%"
    digits = min(6, 1 - math.floor(math.log10(v)))
    return f"{v:.{digits}f}%"


# From here on a whole number is written in powers of ten: a hand-typed 1e300 in an
# observations file is valid JSON, and 300 digits with separators help nobody.
HUGE = 1e15


def whole(x: float) -> str:
    """A whole number with thousands separators, or ``1.2e+18`` from ``HUGE`` on."""
    return f"{x:.2g}" if abs(x) >= HUGE or not math.isfinite(x) else f"{x:,.0f}"


def ms(x: float) -> str:
    """Milliseconds: whole from 10 ms (with thousands separators), else one or two decimals."""
    return f"{whole(x)} ms" if x >= 10 else f"{x:.1f} ms" if x >= 1 else f"{x:.2f} ms"


def times(x: float) -> str:
    """A ratio: two decimals below 2x (where 1.05x and 1.5x differ), one to 10x, then whole."""
    if x >= HUGE or not math.isfinite(x):
        return f"{x:.2g}x"
    return f"{x:.0f}x" if x >= 10 else f"{x:.1f}x" if x >= 2 else f"{x:.2f}x"


def rps(x: float) -> str:
    return f"{whole(x)} req/s"


def count(x: float) -> str:
    return whole(x)
