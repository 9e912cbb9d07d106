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

__all__ = ["ArrivalModel", "IDC_SCALES", "dirichlet_alpha", "idc", "measure_arrivals"]

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


def _idc_of_sorted(t: NDArray[np.float64], rel: NDArray[np.float64], width: float
                   ) -> float | None:
    """``idc`` of sorted times ``t`` over their span (``rel``: ``t - t[0]``), the same windows
    and counts to the bit, but the times inside are a prefix found by a binary search instead
    of a mask and a copy (a profile's arrivals hold every request's time)."""
    start = float(t[0])
    n_windows = int((float(t[-1]) - start) // width)
    if n_windows < 10:
        return None
    inside = rel[:int(np.searchsorted(t, start + n_windows * width, side="left"))]
    # as idc's bincount: a time just under the bound whose quotient rounds up to n_windows
    # gets a window of its own
    return _dispersion(_window_counts(inside, width, max(n_windows,
                                                         int(inside[-1] // width) + 1)))


def _dispersion(counts: NDArray[np.int64]) -> float | None:
    """Var/Mean of the counts of windows."""
    mean = counts.mean()
    return float(counts.var() / mean) if mean > 0 else None


# From this many times on, the compiled kernel counts windows (~10x quicker than numpy's three
# passes a width); below, numpy, which spares a process that has not loaded numba the half
# second that costs (a profile of a small file).
_KERNEL_MIN_TIMES = 1 << 20


def _window_counts(rel: NDArray[np.float64], width: float, n_windows: int) -> NDArray[np.int64]:
    """Requests per window of ``width`` of ascending times ``rel >= 0``, ``n_windows`` of
    them, every time at or past the last window counted in it."""
    if rel.size >= _KERNEL_MIN_TIMES:
        from hotshard.profile._arrival_kernels import window_counts

        return window_counts(rel, float(width), int(n_windows))
    return np.bincount(np.minimum((rel // width).astype(np.int64), n_windows - 1),
                       minlength=n_windows)


def dirichlet_alpha(parents: NDArray[np.int64], spread: NDArray[np.float64], k: int) -> float:
    """The concentration that gives the observed spread of children around their parent's
    mean: solve sum_p n_p (1 - 1/k) (n_p + k a) / (1 + k a) = sum_p spread_p for a > 0.
    The left side falls from sum n_p^2 (1 - 1/k) (all in one child) to sum n_p (1 - 1/k)
    (multinomial) as a grows: bisection in log a."""
    n = parents.astype(np.float64)
    keep = n > 1
    n, s = n[keep], spread[keep]
    if n.size == 0:
        return ALPHA_MAX
    target = float(s.sum())
    f = 1.0 - 1.0 / k

    def left(a: float) -> float:
        return float(np.sum(n * f * (n + k * a) / (1.0 + k * a)))

    if target >= left(1e-9):
        return 1e-9
    if target <= left(ALPHA_MAX):
        return ALPHA_MAX
    lo, hi = math.log(1e-9), math.log(ALPHA_MAX)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if left(math.exp(mid)) > target:
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
                isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)):
            raise ProfileError(f"{where}.counts must be a non-empty list of integers >= 0")
        if sum(counts) == 0:
            raise ProfileError(f"{where}.counts holds no request")
        raw_idc = doc.get("idc", {})
        if not isinstance(raw_idc, Mapping) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
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


def _levels(resolution: float) -> list[tuple[float, float]]:
    widths = [resolution, *(w for w in LEVELS if w < resolution)]
    return list(zip(widths, widths[1:], strict=False))


def measure_arrivals(times: NDArray[np.float64], tick: float | None = None
                     ) -> ArrivalModel | None:
    """The arrival section of request times in seconds, sorted (they are sorted here if not;
    the window counts rely on it); None for fewer than two distinct instants: no rate to
    speak of.

    ``tick`` is the timestamps' resolution (``time_units.timestamp_tick``). Below it the trace
    says nothing about when requests came (a whole-second log stamps a second's requests at
    its start, which a fit would read as one burst a second), so the cascade's levels finer
    than the tick spread requests evenly (``ALPHA_MAX``) and the dispersion is not measured at
    scales below it."""
    t = np.asarray(times, dtype=np.float64)
    t = t[np.isfinite(t)]
    if t.size > 1 and bool(np.any(t[1:] < t[:-1])):
        t = np.sort(t)
    if t.size < 2 or t[-1] <= t[0]:
        return None
    start, end = float(t[0]), float(t[-1])
    span = end - start
    resolution = 60.0 * max(1, math.ceil(span / (60.0 * MAX_BINS)))
    n_bins = max(1, math.ceil((span + 1e-9) / resolution))
    rel = t - start
    counts = _window_counts(rel, resolution, n_bins)
    measured = {}
    for w in IDC_SCALES:
        if tick is not None and w * (1 + 1e-9) < tick:
            continue
        value = _idc_of_sorted(t, rel, w)
        if value is not None:
            measured[f"{w:g}"] = value
    cascade = []
    for parent, child in _levels(resolution):
        k = int(round(parent / child))
        if tick is not None and child * (1 + 1e-9) < tick:
            cascade.append((parent, child, ALPHA_MAX))  # below the tick: nothing to fit
            continue
        n_child = int(rel[-1] // child) + 1  # times are sorted: the last is the largest
        c = _window_counts(rel, child, n_child)
        pad = (-c.size) % k
        c = np.concatenate([c, np.zeros(pad, dtype=np.int64)]).reshape(-1, k)
        n = c.sum(axis=1)
        spread = ((c - n[:, None] / k) ** 2).sum(axis=1)
        cascade.append((parent, child, dirichlet_alpha(n, spread, k)))
    return ArrivalModel(resolution, counts, measured, tuple(cascade), tick)
