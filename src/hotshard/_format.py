"""Numbers in words, one way everywhere: the diagnosis, the CI gate and the report print the
same value the same way (a reader comparing two outputs never meets 1.7x beside 1.69x)."""

from __future__ import annotations

import math

__all__ = ["count", "ms", "pct", "rps", "times"]


def pct(x: float) -> str:
    """A share in percent with the digits it needs (7.0%, 1.48%, 0.0015%)."""
    v = 100 * x
    if v == 0 or v >= 10:
        return f"{v:.0f}%"
    if v >= 1:
        return f"{v:.1f}%"
    digits = min(6, 1 - math.floor(math.log10(v)))
    return f"{v:.{digits}f}%"


def ms(x: float) -> str:
    """Milliseconds: whole from 10 ms (with thousands separators), else one or two decimals."""
    return f"{x:,.0f} ms" if x >= 10 else f"{x:.1f} ms" if x >= 1 else f"{x:.2f} ms"


def times(x: float) -> str:
    """A ratio: two decimals below 2x (where 1.05x and 1.5x differ), one to 10x, then whole."""
    return f"{x:.0f}x" if x >= 10 else f"{x:.1f}x" if x >= 2 else f"{x:.2f}x"


def rps(x: float) -> str:
    return f"{x:,.0f} req/s"


def count(x: float) -> str:
    return f"{x:,.0f}"
