"""When production's requests arrive: the profile's ``arrivals`` section (with ``--time``).

A Poisson load test is smooth at every scale; production is not (cloudphysics: the index of
dispersion of counts, Var/Mean, is 479 in 1 s windows and 10,870 in 60 s ones, where Poisson
gives 1). What the hot shard's p99 feels is exactly that burstiness. The section keeps:

* ``counts``: requests per bin of ``resolution_s`` seconds over the window (60 s for a day or
  less, coarser beyond, so at most ``MAX_BINS`` numbers): the rate's shape, exactly;
* ``idc``: the measured index of dispersion at scales from 10 ms to 1 h (those that fit ten
  times in the window);
* ``cascade``: a fitted multiplicative cascade that reproduces the burstiness below the
  resolution. Each bin's requests are split over its sub-bins (``resolution_s`` -> 10 s ->
  1 s -> 100 ms -> 10 ms) by a Dirichlet-multinomial draw of concentration ``alpha`` per level,
  each alpha fitted by the method of moments on the trace itself: for a parent window of n
  requests split over k children, E[sum (c_i - n/k)^2] = n (1 - 1/k) (n + k alpha) /
  (1 + k alpha); a small alpha puts a window's requests in a few of its sub-windows (bursts),
  a large one spreads them as Poisson would.

Why a cascade and not a two-state MMPP or a Hawkes process: the per-bin counts already carry
the slow structure exactly (trend, daily shape, an event's surge), and what remains is
burstiness at every finer scale at once, which one MMPP's single time constant cannot match
(its IDC curve has one knee) and a Hawkes fit needs the raw times; the cascade has one number
per decade of scale, each fitted directly to that decade's dispersion, and generates a bin's
arrivals independently of every other bin (so a chunk of rows is made the same whatever the
number of workers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import ProfileError

__all__ = ["ALPHA_MAX", "ArrivalModel", "IDC_SCALES", "MAX_BINS", "alpha_from_sums",
           "cascade_levels", "dirichlet_alpha", "idc"]

MAX_BINS = 1440
IDC_SCALES = (0.01, 0.1, 1.0, 10.0, 60.0, 600.0, 3600.0)
LEVELS = (10.0, 1.0, 0.1, 0.01)       # the cascade's sub-bin widths below the resolution
ALPHA_MAX = 1e6                       # as good as Poisson spreading


def idc(times: NDArray[np.float64], width: float, start: float, end: float) -> float | None:
    """Var/Mean of the counts in consecutive windows of ``width`` over [start, end); None when
    fewer than ten windows fit."""
    n_windows = int((end - start) // width)
    if n_windows < 10:
        return None
    inside = times[times < start + n_windows * width]
    return _dispersion(np.bincount(((inside - start) // width).astype(np.int64),
                                   minlength=n_windows))


def _dispersion(counts: NDArray[np.int64]) -> float | None:
    """Var/Mean of the counts of windows."""
    mean = counts.mean()
    return float(counts.var() / mean) if mean > 0 else None


def dirichlet_alpha(parents: NDArray[np.int64], spread: NDArray[np.float64], k: int) -> float:
    """The concentration that gives the observed spread of children around their parent's
    mean (``alpha_from_sums`` of the parents with more than one request)."""
    n = parents.astype(np.float64)
    keep = n > 1
    return alpha_from_sums(float(np.sum(n[keep] ** 2)), float(n[keep].sum()),
                           float(spread[keep].sum()), k)


def alpha_from_sums(sum_n2: float, sum_n: float, spread: float, k: int) -> float:
    """Solve sum_p n_p (1 - 1/k) (n_p + k a) / (1 + k a) = ``spread`` for a > 0, over the
    parents with n_p > 1, from their sum_p n_p^2 and sum_p n_p alone (the left side is
    (1 - 1/k) (sum n^2 + k a sum n) / (1 + k a)): an engine sums, nothing else leaves it.
    The left side falls from sum n^2 (1 - 1/k) (all in one child) to sum n (1 - 1/k)
    (multinomial) as a grows: bisection in log a."""
    if sum_n <= 0:
        return ALPHA_MAX
    f = 1.0 - 1.0 / k

    def left(a: float) -> float:
        return f * (sum_n2 + k * a * sum_n) / (1.0 + k * a)

    if spread >= left(1e-9):
        return 1e-9
    if spread <= left(ALPHA_MAX):
        return ALPHA_MAX
    lo, hi = math.log(1e-9), math.log(ALPHA_MAX)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if left(math.exp(mid)) > spread:
            lo = mid
        else:
            hi = mid
    return float(math.exp(0.5 * (lo + hi)))


@dataclass(frozen=True)
class ArrivalModel:
    """The ``arrivals`` section: see the module's docstring."""

    resolution_s: float
    counts: NDArray[np.int64]
    idc: dict[str, float]
    cascade: tuple[tuple[float, float, float], ...]  # (from_s, to_s, alpha)
    # the timestamps' tick (whole seconds: 1.0); below it no burstiness was fitted
    tick_s: float | None = None

    @property
    def events(self) -> int:
        return int(self.counts.sum())

    @property
    def seconds(self) -> float:
        return self.resolution_s * self.counts.size

    def requests_between(self, edges_s: NDArray[np.float64]) -> NDArray[np.float64]:
        """Requests between consecutive instants ``edges_s`` (seconds from the first
        request, as every time section counts them): a bin cut by an edge is split in
        proportion, as if even inside."""
        cum = np.concatenate([[0.0], np.cumsum(self.counts, dtype=np.float64)])
        return np.diff(np.interp(edges_s, np.arange(cum.size) * self.resolution_s, cum))

    def to_dict(self) -> dict[str, Any]:
        return {"resolution_s": _plain(self.resolution_s),
                "counts": [int(c) for c in self.counts],
                "idc": {k: round(v, 6) for k, v in self.idc.items()},
                "cascade": [{"from_s": _plain(a), "to_s": _plain(b), "alpha": float(f"{c:.6g}")}
                            for a, b, c in self.cascade],
                **({"tick_s": _plain(self.tick_s)} if self.tick_s is not None else {})}

    @classmethod
    def from_dict(cls, doc: Any, where: str = "arrivals") -> ArrivalModel:
        if not isinstance(doc, Mapping):
            raise ProfileError(f"{where} must be an object")
        res = doc.get("resolution_s")
        if isinstance(res, bool) or not isinstance(res, int | float) or not res > 0:
            raise ProfileError(f"{where}.resolution_s must be a number > 0, got {res!r}")
        counts = doc.get("counts")
        if (not isinstance(counts, list) or not counts or not all(
                isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 2**63
                for c in counts)):
            raise ProfileError(f"{where}.counts must be a non-empty list of integers >= 0 "
                               "(below 2^63)")
        if sum(counts) == 0:
            raise ProfileError(f"{where}.counts holds no request")
        raw_idc = doc.get("idc", {})
        if not isinstance(raw_idc, Mapping) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < 1e300
                for v in raw_idc.values()):
            raise ProfileError(f"{where}.idc must map a scale in seconds to a number >= 0")
        levels = doc.get("cascade", [])
        if not isinstance(levels, list):
            raise ProfileError(f"{where}.cascade must be a list of levels, got {levels!r}")
        cascade = []
        for i, level in enumerate(levels):
            values = [level.get(k) if isinstance(level, Mapping) else None
                      for k in ("from_s", "to_s", "alpha")]
            if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                raise ProfileError(f"{where}.cascade[{i}] must be an object with from_s, to_s "
                                   "and alpha, numbers")
            a, b, c = (float(v) for v in values)
            if not (a > b > 0 and c > 0) or abs(a / b - round(a / b)) > 1e-6:
                raise ProfileError(f"{where}.cascade[{i}]: from_s must be a whole multiple of "
                                   "to_s, both > 0, and alpha > 0")
            cascade.append((a, b, c))
        for (_, b, _), (a, _, _) in zip(cascade, cascade[1:], strict=False):
            if abs(a - b) > 1e-9:
                raise ProfileError(f"{where}.cascade: each level must start where the last "
                                   "ended")
        if cascade and abs(cascade[0][0] - float(res)) > 1e-9:
            raise ProfileError(f"{where}.cascade must start at resolution_s")
        tick = doc.get("tick_s")
        if tick is not None and (isinstance(tick, bool) or not isinstance(tick, int | float)
                                 or not tick > 0):
            raise ProfileError(f"{where}.tick_s must be a number > 0, got {tick!r}")
        return cls(float(res), np.asarray(counts, dtype=np.int64),
                   {str(k): float(v) for k, v in raw_idc.items()}, tuple(cascade),
                   None if tick is None else float(tick))


def _plain(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def cascade_levels(resolution: float) -> list[tuple[float, float]]:
    """(parent, child) widths of the cascade's levels below ``resolution``."""
    widths = [resolution, *(w for w in LEVELS if w < resolution)]
    return list(zip(widths, widths[1:], strict=False))
