"""Discrete power-law tail fit, exactly as Clauset, Shalizi & Newman (SIAM Review 51, 2009).

The profile keeps the head of a key-frequency distribution exactly and models its tail with a
discrete power law; this module is that model. Everything works on (distinct value,
multiplicity) pairs, so the cost grows with the number of distinct values, not of observations:
a histogram of 241 million web pages fits in well under a second.

The xmin scan has two implementations of the same arithmetic. Small scans (the usual command
line fit: a few hundred distinct values) run in plain numpy, vectorized across all candidate
xmins (``_vector``), because loading the compiled kernels costs about half a second per
process, tens of times the fit itself. Large scans, and the bootstrap's thousands of
refits, use the compiled, pruned kernels (``_kernels``, numba), imported only then. The two
agree to rounding (tested: same xmin, alpha and KS distance to 1e-9 relative).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hotshard.errors import FitError, InputError
from hotshard.profile import _vector
from hotshard.profile.comparison import Comparison
from hotshard.profile.powerlaw import DiscretePowerLaw

__all__ = [
    "Comparison",
    "DiscretePowerLaw",
    "GoodnessOfFit",
    "PowerLawFit",
    "Tabulated",
    "bootstrap_gof",
    "fit_power_law",
    "tabulate",
]

# Values below this are tabulated with bincount (O(n)); larger ones with np.unique.
_BINCOUNT_LIMIT = 1 << 22
# A tail needs this many observations before its fit means anything.
MIN_TAIL = 10
# With an upper bound xmax, candidate xmin must be at most xmax / this.
TRUNCATED_MIN_SPAN = 2
# Candidates measured fully first, so the scan can prune against a good distance from the start.
_SEED_CANDIDATES = 24
# Scans of up to this many (candidate xmin, distinct value >= it) pairs run in numpy. Measured
# (2 cores): numpy ~130 ns a pair, so ~0.3 s at the limit; the compiled path ~0.5 s to import
# numba and load the kernels, then milliseconds. Whole `hotshard fit` processes broke even near
# 4e6 pairs (2.1e6 pairs: 0.37 s numpy, 0.72 s numba).
_VECTOR_MAX_PAIRS = 2_500_000
# Ways through the xmin scan: choose by size, numpy only, compiled kernels.
ENGINES = ("auto", "numpy", "numba")


@dataclass(frozen=True)
class Tabulated:
    """Observations as sorted distinct values with their multiplicities."""

    values: NDArray[np.int64]
    counts: NDArray[np.int64]
    zeros_dropped: int = 0

    @property
    def n(self) -> int:
        return int(self.counts.sum())


@dataclass(frozen=True)
class GoodnessOfFit:
    """CSN semi-parametric bootstrap: p = share of synthetic sets fitting worse than the data."""

    p_value: float
    n_sets: int
    seed: int
    ks_synthetic_median: float

    @property
    def plausible(self) -> bool:
        """CSN rule: the power law is ruled out when p <= 0.1."""
        return self.p_value > 0.1


@dataclass(frozen=True)
class PowerLawFit:
    """Result of ``fit_power_law``: the tail model and how well it fits.

    Attributes
    ----------
    alpha, alpha_se : float
        Exponent by exact discrete maximum likelihood and its asymptotic standard error
        1 / sqrt(n_tail * Var_alpha[ln X]).
    xmin : int
        Start of the power-law tail (minimum KS distance, unless fixed by the caller).
    n, n_tail : int
        Observations in all and in the tail x >= xmin.
    ks : float
        Kolmogorov-Smirnov distance between the tail data and the fitted law.
    """

    alpha: float
    alpha_se: float
    xmin: int
    n: int
    n_tail: int
    ks: float
    n_distinct: int
    xmin_fixed: bool
    candidates: int
    zeros_dropped: int = 0
    xmax: int | None = None
    gof: GoodnessOfFit | None = None
    comparisons: tuple[Comparison, ...] = field(default_factory=tuple)

    @property
    def distribution(self) -> DiscretePowerLaw:
        """The fitted law, with ``pmf``, ``ccdf`` and ``rvs``."""
        return DiscretePowerLaw(self.alpha, self.xmin, self.xmax)

    @property
    def p_value(self) -> float | None:
        return None if self.gof is None else self.gof.p_value

    def pmf(self, x: ArrayLike) -> NDArray[np.float64]:
        return self.distribution.pmf(x)

    def ccdf(self, x: ArrayLike) -> NDArray[np.float64]:
        return self.distribution.ccdf(x)

    def rvs(self, size: int, *, rng: np.random.Generator | int | None = None) -> NDArray[np.int64]:
        return self.distribution.rvs(size, rng=rng)

    def to_dict(self) -> dict:
        out = {
            "alpha": self.alpha,
            "alpha_se": self.alpha_se,
            "xmin": self.xmin,
            "n": self.n,
            "n_tail": self.n_tail,
            "ks": self.ks,
            "n_distinct": self.n_distinct,
            "xmin_fixed": self.xmin_fixed,
            "candidates": self.candidates,
            "zeros_dropped": self.zeros_dropped,
        }
        if self.xmax is not None:
            out["xmax"] = self.xmax
        if self.gof is not None:
            out["p_value"] = self.gof.p_value
            out["bootstrap"] = asdict(self.gof)
        if self.comparisons:
            out["compare"] = {
                c.alternative: {
                    "R": c.R,
                    "normalized_R": c.normalized_R,
                    "p_value": c.p_value,
                    "favours": c.favours,
                    "nested": c.nested,
                    "parameters": c.parameters,
                    "degenerate": c.degenerate,
                    **({"note": c.note} if c.note else {}),
                }
                for c in self.comparisons
            }
        return out


def _check_integral(arr: NDArray, what: str) -> NDArray[np.int64]:
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "b":
        return arr.astype(np.int64)
    if arr.dtype.kind != "f":
        raise InputError(f"{what} must be numbers, got values of type {arr.dtype}")
    bad = ~np.isfinite(arr) | (arr != np.floor(arr))
    if np.any(bad):
        first = arr[np.flatnonzero(bad)[0]]
        raise InputError(f"{what} must be integers, got {float(first):g}")
    huge = np.abs(arr) >= 2.0**63
    if np.any(huge):
        first = arr[np.flatnonzero(huge)[0]]
        raise InputError(f"{what} must fit 64-bit integers (below 9.2e18), got {float(first):g}")
    return arr.astype(np.int64)


def tabulate(values: ArrayLike, counts: ArrayLike | None = None) -> Tabulated:
    """Validate observations and reduce them to sorted (distinct value, multiplicity) pairs.

    ``counts`` (optional) gives each value's multiplicity, as in a frequency histogram. Zeros
    are dropped (the law lives on x >= 1; CSN drop degree-0 pages the same way) and reported in
    ``zeros_dropped``.

    Raises
    ------
    InputError
        Empty input, non-integer or negative values, or bad counts.
    """
    vals = np.asarray(values)
    if vals.ndim != 1:
        vals = vals.ravel()
    if vals.size == 0:
        raise InputError("no observations: the input is empty")
    vals = _check_integral(vals, "observations")
    if vals.min() < 0:
        raise InputError(f"observations must be >= 0, got {int(vals.min())}")
    if counts is None:
        return _tabulate_raw(vals)
    cnts = _check_integral(np.asarray(counts).ravel(), "counts")
    if cnts.shape != vals.shape:
        raise InputError(f"got {vals.size} values but {cnts.size} counts")
    if cnts.min() < 0:
        raise InputError(f"counts must be >= 0, got {int(cnts.min())}")
    zeros = int(cnts[vals == 0].sum())
    keep = (vals > 0) & (cnts > 0)
    kept_vals, kept_counts = vals[keep], cnts[keep]
    order = np.argsort(kept_vals, kind="stable")
    kept_vals, kept_counts = kept_vals[order], kept_counts[order]
    starts = np.flatnonzero(np.r_[True, kept_vals[1:] != kept_vals[:-1]]) if kept_vals.size else []
    uniq = kept_vals[starts]
    agg = np.add.reduceat(kept_counts, starts) if kept_vals.size else kept_counts
    return _nonempty(Tabulated(uniq.astype(np.int64), agg.astype(np.int64), zeros))


def _tabulate_raw(vals: NDArray[np.int64]) -> Tabulated:
    small = vals < _BINCOUNT_LIMIT
    if small.all():
        binned = np.bincount(vals)
        big_vals = np.empty(0, dtype=np.int64)
        big_counts = np.empty(0, dtype=np.int64)
    else:
        binned = np.bincount(vals[small]) if small.any() else np.zeros(1, dtype=np.int64)
        big_vals, big_counts = np.unique(vals[~small], return_counts=True)
    zeros = int(binned[0]) if binned.size else 0
    nz = np.flatnonzero(binned)
    nz = nz[nz > 0]
    values = np.concatenate([nz.astype(np.int64), big_vals.astype(np.int64)])
    counts = np.concatenate([binned[nz].astype(np.int64), big_counts.astype(np.int64)])
    return _nonempty(Tabulated(values, counts, zeros))


def _nonempty(tab: Tabulated) -> Tabulated:
    if tab.values.size == 0:
        raise InputError(
            f"no positive observations: all {tab.zeros_dropped} values are 0 "
            "(a power law lives on x >= 1)"
        )
    return tab


def _alpha_se(alpha: float, xmin: int, n_tail: int, xmax: int | None) -> float:
    z, z1, z2 = (float(v[0]) for v in _vector.norm3(
        np.array([alpha]), np.array([float(xmin)]), _xmax_arg(xmax)))
    var = z2 / z - (z1 / z) ** 2
    return 1.0 / math.sqrt(n_tail * var) if var > 0 else math.inf


def _with_xmin(tab: Tabulated, xmin: int) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """Values/counts with ``xmin`` present (count 0 if unobserved) and its index."""
    k = int(np.searchsorted(tab.values, xmin))
    if k < tab.values.size and tab.values[k] == xmin:
        return tab.values, tab.counts, k
    values = np.insert(tab.values, k, xmin)
    counts = np.insert(tab.counts, k, 0)
    return values, counts, k


def _xmax_arg(xmax: int | None) -> float:
    return -1.0 if xmax is None else float(xmax)


def _scan(values: NDArray[np.int64], counts: NDArray[np.int64], cands: NDArray[np.int64],
          xmax: int | None, engine: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(alphas, KS distances) of the candidates, by the engine asked or chosen by size."""
    if engine == "auto":
        small = _vector.scan_pairs(values.size, cands) <= _VECTOR_MAX_PAIRS
        engine = "numpy" if small else "numba"
    if engine == "numpy":
        return _vector.scan_xmin(values, counts, cands, _xmax_arg(xmax))
    from hotshard.profile import _kernels  # numba: ~0.5 s to load, paid only by big scans

    seed_bound = math.inf
    if cands.size > 2 * _SEED_CANDIDATES:
        pick = np.unique(np.linspace(0, cands.size - 1, _SEED_CANDIDATES).astype(np.int64))
        _, seed_dists = _kernels.scan_xmin(values, counts, cands[pick], math.inf,
                                           _xmax_arg(xmax))
        seed_bound = float(np.min(seed_dists))
    return _kernels.scan_xmin(values, counts, cands, seed_bound, _xmax_arg(xmax))


def _fit_tab(tab: Tabulated, xmin: int | None, min_tail: int,
             xmax: int | None = None, engine: str = "auto") -> tuple[float, int, int, float, int]:
    """Core fit on tabulated data: (alpha, xmin, n_tail, ks, candidates scanned)."""
    values, counts = tab.values, tab.counts
    if xmin is not None:
        values, counts, k = _with_xmin(tab, xmin)
        n_tail = int(counts[k:].sum())
        if n_tail < min_tail:
            raise FitError(
                f"only {n_tail} observations are >= xmin={xmin}; a fit needs at least "
                f"{min_tail}: choose a smaller xmin"
            )
        cands = np.array([k], dtype=np.int64)
    else:
        if values.size < 2:
            raise FitError(
                f"all {tab.n} observations equal {int(values[0])}: "
                "a power law needs at least two distinct values"
            )
        tail_sizes = np.cumsum(counts[::-1])[::-1]
        ok = tail_sizes[:-1] >= min_tail
        if xmax is not None:
            # a bounded support makes tiny tails fit trivially (any two values fit exactly):
            # candidates must span a factor of 2 up to xmax and hold 3 distinct values
            ok &= (values[:-1] * TRUNCATED_MIN_SPAN <= xmax) & (
                np.arange(values.size - 1) <= values.size - 3)
        cands = np.flatnonzero(ok).astype(np.int64)
        if cands.size == 0:
            raise FitError(
                f"too few observations ({tab.n}) for a tail fit: at least {min_tail} are needed"
            )
    alphas, dists = _scan(values, counts, cands, xmax, engine)
    if not np.any(np.isfinite(dists)):
        raise FitError(
            "no power law with alpha > 1 fits this tail (every candidate tail is a single "
            "value, or flatter than alpha = 1 below xmax)"
        )
    best = int(np.argmin(dists))
    k = int(cands[best])
    return float(alphas[best]), int(values[k]), int(counts[k:].sum()), float(dists[best]), int(
        cands.size
    )


def fit_power_law(
    values: ArrayLike,
    counts: ArrayLike | None = None,
    *,
    xmin: int | None = None,
    bootstrap: int = 0,
    seed: int | None = None,
    workers: int | None = None,
    compare: Sequence[str] = (),
    min_tail: int = MIN_TAIL,
    xmax: int | None = None,
    engine: str = "auto",
    progress: Callable[[str, float | None], None] | None = None,
) -> PowerLawFit:
    """Fit a discrete power law to the tail of positive integer data (CSN 2009).

    Parameters
    ----------
    values : array_like of int
        Observations (one per event), or distinct values when ``counts`` is given.
    counts : array_like of int, optional
        Multiplicity of each entry of ``values`` (a frequency histogram).
    xmin : int, optional
        Fix the start of the tail instead of choosing it by minimum KS distance.
    bootstrap : int
        Number of synthetic data sets for the goodness-of-fit p-value (0: skip). CSN use 2500
        for a p-value accurate to about 0.01.
    seed : int, optional
        Seed of the bootstrap; the same seed gives the same p-value for any ``workers``.
    workers : int, optional
        Processes for the bootstrap (default: all cores).
    compare : sequence of str
        Alternatives for Vuong likelihood-ratio tests: ``lognormal``, ``exponential``,
        ``truncated_power_law``.
    min_tail : int
        Fewest tail observations a candidate xmin may leave (default 10).
    xmax : int, optional
        Upper bound of the law's support (data above it are an error). A profile's tail is
        bounded by its smallest head count; fitting the untruncated law to truncated data
        would bias alpha upward.
    engine : {'auto', 'numpy', 'numba'}
        How the xmin scan runs. ``numpy``: vectorized across all candidates, no compiled code
        to load, every candidate's KS distance exact; for small scans. ``numba``: the compiled
        kernels, which prune candidates that cannot win; ~0.5 s to load once per process, then
        far faster on large scans. ``auto`` (default) takes numpy for scans of up to 2.5
        million (candidate, distinct value) pairs, else numba. The results agree to rounding; the
        bootstrap's refits use numba unless ``engine='numpy'``.
    progress : callable, optional
        Called as ``progress("bootstrap", fraction)`` as the bootstrap's sets are refitted (a
        bootstrap of thousands takes seconds to minutes).

    Returns
    -------
    PowerLawFit

    Raises
    ------
    InputError
        Malformed input (empty, negative, non-integer).
    FitError
        Data that cannot support a fit (all values equal, too few tail points).

    Notes
    -----
    alpha maximises L(alpha) = -n_tail ln zeta(alpha, xmin) - alpha sum ln x_i (zeta the Hurwitz
    zeta function), solved by safeguarded Newton iteration on E_alpha[ln X] = mean ln x. xmin
    minimises the KS distance sup_x |F_data(x) - F_fit(x)| over the integers x >= xmin, scanning
    every distinct value (but the largest) as a candidate, as in CSN's ``plfit``.
    """
    from hotshard.profile import ALTERNATIVE_NAMES

    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")

    unknown = [name for name in compare if name not in ALTERNATIVE_NAMES]
    if unknown:
        raise InputError(
            f"unknown alternative {unknown[0]!r}; choose from "
            + ", ".join(sorted(ALTERNATIVE_NAMES))
        )
    if xmin is not None and (int(xmin) != xmin or xmin < 1):
        raise InputError(f"xmin must be an integer >= 1, got {xmin}")
    if bootstrap < 0:
        raise InputError(f"bootstrap must be >= 0, got {bootstrap}")
    tab = tabulate(values, counts)
    if xmax is not None:
        if int(xmax) != xmax or xmax < 1:
            raise InputError(f"xmax must be an integer >= 1, got {xmax}")
        if tab.values[-1] > xmax:
            raise InputError(f"observations go up to {int(tab.values[-1])}, above xmax={xmax}")
        xmax = int(xmax)
    alpha, x0, n_tail, ks, n_cand = _fit_tab(tab, None if xmin is None else int(xmin), min_tail,
                                             xmax, engine)
    result = PowerLawFit(
        alpha=alpha,
        alpha_se=_alpha_se(alpha, x0, n_tail, xmax),
        xmin=x0,
        n=tab.n,
        n_tail=n_tail,
        ks=ks,
        n_distinct=int(tab.values.size),
        xmin_fixed=xmin is not None,
        candidates=n_cand,
        zeros_dropped=tab.zeros_dropped,
        xmax=xmax,
    )
    gof = None
    if bootstrap:
        gof = bootstrap_gof(tab, result, n_sets=bootstrap, seed=seed, workers=workers,
                            min_tail=min_tail, engine="numpy" if engine == "numpy" else "numba",
                            progress=progress)
    comparisons = ()
    if compare:
        from hotshard.profile import alternatives  # scipy.optimize/stats: only when comparing

        comparisons = tuple(alternatives.compare(tab, result, name) for name in compare)
    return PowerLawFit(**{**result.__dict__, "gof": gof, "comparisons": comparisons})


def _synthetic_ks(
    tab: Tabulated, fit: PowerLawFit, seed: int, indices: Sequence[int], min_tail: int,
    engine: str = "numba",
) -> list[float]:
    """KS distances of refits to the semi-parametric bootstrap sets with the given indices."""
    law = fit.distribution
    below = tab.values < fit.xmin
    low_values = tab.values[below]
    low_counts = tab.counts[below]
    p_low = low_counts / low_counts.sum() if low_values.size else None
    out = []
    for i in indices:
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(int(i),)))
        if fit.xmin_fixed or p_low is None:
            n_tail = fit.n_tail
            low = np.zeros(0, dtype=np.int64)
        else:
            n_tail = int(rng.binomial(fit.n, fit.n_tail / fit.n))
            low = rng.multinomial(fit.n - n_tail, p_low)
        tail = law.rvs(n_tail, rng=rng)
        tail_vals, tail_counts = np.unique(tail, return_counts=True)
        syn = tabulate(
            np.concatenate([low_values, tail_vals]), np.concatenate([low, tail_counts])
        ) if low.size else Tabulated(tail_vals.astype(np.int64), tail_counts.astype(np.int64))
        try:
            _, _, _, ks, _ = _fit_tab(syn, fit.xmin if fit.xmin_fixed else None, min_tail,
                                      fit.xmax, engine)
        except FitError:
            ks = math.inf  # a degenerate synthetic set fits no better than the data
        out.append(ks)
    return out


def bootstrap_gof(
    tab: Tabulated,
    fit: PowerLawFit,
    *,
    n_sets: int,
    seed: int | None = None,
    workers: int | None = None,
    min_tail: int = MIN_TAIL,
    engine: str = "numba",
    progress: Callable[[str, float | None], None] | None = None,
) -> GoodnessOfFit:
    """CSN semi-parametric bootstrap goodness-of-fit test.

    Each synthetic set has ``fit.n`` points: with probability n_tail/n a draw from the fitted
    law, otherwise a value resampled from the observations below xmin; each set is refitted
    exactly as the data were (xmin scanned unless it was fixed). p is the share of sets whose KS
    distance is at least the data's. Set i is seeded by ``SeedSequence(seed, spawn_key=(i,))``,
    so the result does not depend on ``workers``. The refits use the compiled kernels by default
    (``engine``, as in ``fit_power_law``): their load time is paid once for thousands of fits.
    """
    if n_sets <= 0:
        raise InputError(f"bootstrap sets must be > 0, got {n_sets}")
    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (1 << 63))
    workers = max(1, min(workers or os.cpu_count() or 1, n_sets))
    chunks = [list(c) for c in np.array_split(np.arange(n_sets), min(n_sets, 8 * workers))]
    parts = []

    def done(part: list[float]) -> None:   # chunks come back in order: the result is fixed
        parts.append(part)
        if progress is not None:
            progress("bootstrap", len(parts) / len(chunks))

    if workers == 1:
        for c in chunks:
            done(_synthetic_ks(tab, fit, seed, c, min_tail, engine))
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            for part in pool.map(_synthetic_ks, [tab] * len(chunks), [fit] * len(chunks),
                                 [seed] * len(chunks), chunks, [min_tail] * len(chunks),
                                 [engine] * len(chunks)):
                done(part)
    ks = np.array([d for part in parts for d in part])
    return GoodnessOfFit(
        p_value=float(np.mean(ks >= fit.ks)),
        n_sets=int(n_sets),
        seed=int(seed),
        ks_synthetic_median=float(np.median(ks[np.isfinite(ks)])) if np.isfinite(ks).any()
        else math.inf,
    )
