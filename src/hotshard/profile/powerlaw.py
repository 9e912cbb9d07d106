"""The discrete power law on x >= xmin: pmf, tails and an exact sampler.

p(x) = x^(-alpha) / zeta(alpha, xmin) for integers x >= xmin, with zeta the Hurwitz zeta
function (Clauset, Shalizi & Newman 2009, Table 1). Methods follow scipy.stats names.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hotshard.errors import InputError

__all__ = ["DiscretePowerLaw"]

# Exact inverse-CDF lookup covers x in [xmin, xmin + _TABLE); beyond it, a closed-form guess
# corrected against the exact tail.
_TABLE = 1 << 16
# Largest value drawn: beyond 2**53 consecutive integers are no longer floats.
_X_CAP = float(1 << 53)


def _zeta(s: float, q: ArrayLike) -> NDArray[np.float64]:
    """Hurwitz zeta(s, q) from scipy, imported on first use (0.15 s): a fit needs none of it."""
    from scipy import special

    return special.zeta(s, q)


def _as_seed_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


@dataclass(frozen=True)
class DiscretePowerLaw:
    """Discrete power law p(x) = x^-alpha / Z on the integers xmin <= x (<= xmax).

    Z = zeta(alpha, xmin), or zeta(alpha, xmin) - zeta(alpha, xmax + 1) when truncated.

    Parameters
    ----------
    alpha : float
        Exponent, > 1.
    xmin : int
        Smallest value, >= 1.
    xmax : int, optional
        Largest value (a profile's tail stops below its head).
    """

    alpha: float
    xmin: int
    xmax: int | None = None

    def __post_init__(self) -> None:
        if not np.isfinite(self.alpha) or self.alpha <= 1.0:
            raise InputError(f"alpha must be a finite number > 1, got {self.alpha}")
        if int(self.xmin) != self.xmin or self.xmin < 1:
            raise InputError(f"xmin must be an integer >= 1, got {self.xmin}")
        if self.xmax is not None and (int(self.xmax) != self.xmax or self.xmax < self.xmin):
            raise InputError(f"xmax must be an integer >= xmin, got {self.xmax}")

    @functools.cached_property
    def _beyond(self) -> float:
        """zeta(alpha, xmax + 1): the untruncated mass above xmax (0 without xmax)."""
        return 0.0 if self.xmax is None else float(_zeta(self.alpha, self.xmax + 1))

    @functools.cached_property
    def _norm(self) -> float:
        return float(_zeta(self.alpha, self.xmin)) - self._beyond

    def pmf(self, x: ArrayLike) -> NDArray[np.float64]:
        """P(X = x); zero below xmin and at non-integers."""
        x = np.asarray(x, dtype=np.float64)
        inside = self._inside(x)
        safe = np.where(inside, x, float(self.xmin))
        return np.where(inside, safe ** (-self.alpha) / self._norm, 0.0)

    def _inside(self, x: NDArray[np.float64]) -> NDArray[np.bool_]:
        inside = (x >= self.xmin) & (x == np.floor(x))
        return inside if self.xmax is None else inside & (x <= self.xmax)

    def logpmf(self, x: ArrayLike) -> NDArray[np.float64]:
        """ln P(X = x) for integers x >= xmin (-inf elsewhere)."""
        x = np.asarray(x, dtype=np.float64)
        inside = self._inside(x)
        safe = np.where(inside, x, float(self.xmin))
        return np.where(inside, -self.alpha * np.log(safe) - np.log(self._norm), -np.inf)

    def ccdf(self, x: ArrayLike) -> NDArray[np.float64]:
        """P(X >= x), the complementary CDF CSN plot: zeta(alpha, ceil x) / zeta(alpha, xmin)."""
        x = np.ceil(np.asarray(x, dtype=np.float64))
        safe = np.maximum(x, float(self.xmin))
        if self.xmax is not None:
            safe = np.minimum(safe, float(self.xmax + 1))
        surv = (_zeta(self.alpha, safe) - self._beyond) / self._norm
        return np.where(x <= self.xmin, 1.0, np.maximum(surv, 0.0))

    def sf(self, x: ArrayLike) -> NDArray[np.float64]:
        """P(X > x) (scipy's survival function)."""
        return self.ccdf(np.floor(np.asarray(x, dtype=np.float64)) + 1.0)

    def cdf(self, x: ArrayLike) -> NDArray[np.float64]:
        """P(X <= x)."""
        return 1.0 - self.sf(x)

    def mean(self) -> float:
        """E[X]: zeta(alpha-1, xmin)/zeta(alpha, xmin), infinite for alpha <= 2 untruncated."""
        if self.xmax is not None:
            x = np.arange(self.xmin, self.xmax + 1, dtype=np.float64)
            return float(np.dot(x, self.pmf(x)))
        if self.alpha <= 2.0:
            return float("inf")
        return float(_zeta(self.alpha - 1.0, self.xmin) / self._norm)

    @functools.cached_property
    def _ccdf_table(self) -> NDArray[np.float64]:
        # P(X >= xmin + i) for i = 0.._TABLE, summed from the top for accuracy.
        full = float(_zeta(self.alpha, self.xmin))  # the table is of the untruncated law
        x = np.arange(self.xmin, self.xmin + _TABLE, dtype=np.float64)
        upper = _zeta(self.alpha, self.xmin + _TABLE) / full
        terms = x ** (-self.alpha) / full
        table = np.empty(_TABLE + 1)
        table[-1] = upper
        table[:-1] = upper + np.cumsum(terms[::-1])[::-1]
        table[0] = 1.0
        return table

    def rvs(self, size: int, *, rng: np.random.Generator | int | None = None) -> NDArray[np.int64]:
        """Draw ``size`` values exactly, by inversion of the CDF.

        For u uniform on (0, 1] the draw is the largest x with P(X >= x) >= u: a table lookup for
        x < xmin + 65536, beyond that the continuous approximation
        x ~ (xmin - 1/2) u^(-1/(alpha-1)) + 1/2 (CSN eq. D.6) corrected step by step against the
        exact tail. Values are capped at 2**53.
        """
        if int(size) != size or size < 0:
            raise InputError(f"size must be a non-negative integer, got {size}")
        gen = _as_seed_rng(rng)
        u = 1.0 - gen.random(int(size))  # (0, 1]
        if self.xmax is not None:  # inversion restricted to [xmin, xmax]
            cut = self._beyond / float(_zeta(self.alpha, self.xmin))
            u = cut + u * (1.0 - cut)
        table = self._ccdf_table
        # table is decreasing; count entries >= u (searchsorted on the negated, increasing array)
        idx = np.searchsorted(-table, -u, side="right") - 1
        out = (self.xmin + idx).astype(np.int64)
        if self.xmax is not None:
            np.minimum(out, self.xmax, out=out)
        far = idx >= _TABLE
        if np.any(far):
            out[far] = self._invert_far(u[far])
        return out

    def _invert_far(self, u: NDArray[np.float64]) -> NDArray[np.int64]:
        a, xmin = self.alpha, self.xmin
        with np.errstate(over="ignore"):
            x = np.floor((xmin - 0.5) * u ** (-1.0 / (a - 1.0)) + 0.5)
        x = np.clip(x, xmin + _TABLE, _X_CAP)
        todo = np.ones(x.shape, dtype=bool)
        for _ in range(64):  # the guess is off by a few units at most
            sel = np.flatnonzero(todo & (x < _X_CAP))
            if sel.size == 0:
                break
            xs = x[sel]
            too_far = self._full_ccdf(xs) < u[sel]
            too_near = ~too_far & (self._full_ccdf(xs + 1.0) >= u[sel])
            x[sel] = xs - too_far + too_near
            todo[sel] = too_far | too_near
        x = np.maximum(x, xmin + _TABLE)
        if self.xmax is not None:
            x = np.minimum(x, self.xmax)
        return x.astype(np.int64)

    def _full_ccdf(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        return _zeta(self.alpha, x) / _zeta(self.alpha, self.xmin)
