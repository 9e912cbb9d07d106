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
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hotshard._validate import Fields, at, item
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
        """The section read field by field (``_validate.Fields``); the rules that span
        fields (the cascade's levels from ``resolution_s`` down, each starting where the
        last ended, each a whole multiple of the next) checked after."""
        f = _FIELDS
        f.mapping(doc, where)
        res = f.required(doc, "resolution_s", where, f.positive, "a number > 0")
        counts = f.required(doc, "counts", where,
                            lambda v, p: f.integers(v, p, nonempty=True),
                            "a non-empty list of integers >= 0")
        if sum(counts) == 0:
            raise f.fail(at(where, "counts"), "holds no request: profile a stream with some")
        raw_idc = f.mapping(doc.get("idc", {}), at(where, "idc"),
                            "an object mapping a scale in seconds to a number >= 0")
        idc = {str(k): float(f.nonneg(v, at(at(where, "idc"), str(k))))
               for k, v in raw_idc.items()}
        levels = f.array(doc.get("cascade", []), at(where, "cascade"), "a list of levels")
        cascade = []
        for i, level in enumerate(levels):
            path = item(at(where, "cascade"), i)
            f.mapping(level, path, "an object with from_s, to_s and alpha")
            a, b, c = (float(f.required(level, k, path, f.positive, "a number > 0"))
                       for k in ("from_s", "to_s", "alpha"))
            if not a > b or abs(a / b - round(a / b)) > 1e-6:
                raise f.fail(path, f"from_s must be a whole multiple of to_s, got {a:g} and "
                                   f"{b:g}")
            cascade.append((a, b, c))
        for i, ((_, b, _), (a, _, _)) in enumerate(zip(cascade, cascade[1:], strict=False)):
            if abs(a - b) > 1e-9:
                raise f.fail(item(at(where, "cascade"), i + 1),
                             f"must start where the last level ended ({b:g} s), got {a:g}")
        if cascade and abs(cascade[0][0] - float(res)) > 1e-9:
            raise f.fail(at(where, "cascade"), f"must start at resolution_s ({res:g}), got "
                                               f"{cascade[0][0]:g}")
        tick = doc.get("tick_s")
        if tick is not None:
            tick = float(f.positive(tick, at(where, "tick_s")))
        return cls(float(res), np.asarray(counts, dtype=np.int64), idc, tuple(cascade), tick)


_FIELDS = Fields(ProfileError)


def _plain(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def cascade_levels(resolution: float) -> list[tuple[float, float]]:
    """(parent, child) widths of the cascade's levels below ``resolution``."""
    widths = [resolution, *(w for w in LEVELS if w < resolution)]
    return list(zip(widths, widths[1:], strict=False))
