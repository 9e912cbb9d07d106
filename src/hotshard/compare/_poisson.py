"""Poisson probabilities from ``scipy.special`` alone: the formulas ``scipy.stats.poisson``
evaluates (``pdtr``, ``pdtrc``, ``exp(xlogy(k, mu) - gammaln(k + 1) - mu)``), without
importing ``scipy.stats``, whose import (~1.2 s) was a third of `hotshard check`'s time."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["cdf", "pmf", "sf"]


def pmf(k: ArrayLike, mu: ArrayLike) -> NDArray[np.float64]:
    """P(X = k) for X ~ Poisson(mu), k whole and >= 0."""
    from scipy.special import gammaln, xlogy

    k = np.asarray(k, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)
    return np.exp(xlogy(k, mu) - gammaln(k + 1) - mu)


def cdf(k: ArrayLike, mu: ArrayLike) -> NDArray[np.float64]:
    """P(X <= k); 0 below k = 0."""
    from scipy.special import pdtr

    k = np.floor(np.asarray(k, dtype=np.float64))
    return np.where(k < 0, 0.0, pdtr(np.maximum(k, 0), mu))


def sf(k: ArrayLike, mu: ArrayLike) -> NDArray[np.float64]:
    """P(X > k); 1 below k = 0."""
    from scipy.special import pdtrc

    k = np.floor(np.asarray(k, dtype=np.float64))
    return np.where(k < 0, 1.0, pdtrc(np.maximum(k, 0), mu))
