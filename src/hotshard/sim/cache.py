"""LRU hit rates: Che's approximation on count classes, or an LRU run on the stream itself.

Under independent references a shard's cache needs only its keys' request rates: a profile
groups them into a few hundred classes of equal rate, and Che's approximation gives the
whole profile's hit rate in microseconds. That is the fallback. When the stream carries
production's order (a profile's locality section, ``workload.locality_order``), the reuse
that makes a real cache warmer than Che's is in the stream and nowhere else, so each shard's
LRU is simulated request by request on its own substream (``lru_hits``, a compiled O(1)
linked-list LRU: tens of millions of references a second). The whole stream's measured
hit-rate curve cannot be read for one shard directly (a shard's cache of C entries sees only
its own keys, hot ones included); the stream built from that measurement can.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hotshard.errors import InputError

__all__ = ["CacheModel", "LRUCache", "che_hit_rates", "lru_hits"]

# Newton/bisection on log T_C stops when the bracket is this narrow (relative precision of T_C;
# a hit probability 1 - exp(-lam T) moves by at most 1/e times it).
_LOG_T_TOL = 1e-13
_MAX_ITER = 200


@dataclass(frozen=True, eq=False)
class CacheModel:
    """Steady-state hit probabilities of an LRU cache under independent references.

    Attributes
    ----------
    capacity : float
        Cache size in entries.
    n_keys : float
        Number of keys referenced at all (sum of the multiplicities of classes with rate > 0).
    characteristic_time : float
        Che's T_C, in the time unit of the rates (1/rate): a key stays cached while it is
        referenced again within T_C. ``0`` when the capacity is 0, ``inf`` when every key fits.
    hit_prob : ndarray of float64
        Hit probability of one key of each class, ``1 - exp(-rate * T_C)``.
    hit_rate : float
        Share of all requests that hit: sum(m * rate * h) / sum(m * rate).
    """

    capacity: float
    n_keys: float
    characteristic_time: float
    hit_prob: NDArray[np.float64]
    hit_rate: float

    def hit_probability(self, rates: ArrayLike) -> NDArray[np.float64]:
        """Hit probability of keys with these rates (same unit as the model's rates).

        Lets a caller map any key (a hot key tracked apart, a class of another shard's split)
        onto the same cache without solving again.
        """
        lam = np.asarray(rates, dtype=np.float64)
        return _hit_prob(lam, self.characteristic_time)

    def to_dict(self) -> dict:
        t = self.characteristic_time
        return {
            "capacity": self.capacity,
            "n_keys": self.n_keys,
            "characteristic_time": t if math.isfinite(t) else None,
            "hit_rate": self.hit_rate,
            "hit_prob": [float(h) for h in self.hit_prob],
        }


def che_hit_rates(rates: ArrayLike, multiplicity: ArrayLike | None, capacity: float) -> CacheModel:
    """Hit probabilities of an LRU cache of ``capacity`` entries by Che's approximation.

    Parameters
    ----------
    rates : array_like of float, shape (k,)
        Request rate of one key of each class, in any unit (requests/s, or probabilities that
        sum to 1 over all keys): hit probabilities do not depend on the unit, only T_C does.
    multiplicity : array_like of float, shape (k,), or None
        How many keys share each rate (may be billions; need not be whole). ``None`` means one
        key per rate, i.e. ``rates`` lists every key.
    capacity : float
        Cache size in entries, >= 0.

    Returns
    -------
    CacheModel
        Per-class hit probability, T_C and the overall hit rate.

    Raises
    ------
    InputError
        If the arrays differ in shape, hold negative or non-finite values, carry no traffic at
        all, or ``capacity`` is negative or not finite.

    Notes
    -----
    Under the independent reference model (each request picks key i with fixed probability,
    independently of the past) an LRU cache holds a key exactly when it was referenced within
    the last T_C, where T_C is the time in which C distinct keys are referenced. Che, Tung and
    Wang (2002) treat T_C as a constant, which gives

    .. math:: \\sum_j m_j (1 - e^{-\\lambda_j T_C}) = C, \\qquad h_j = 1 - e^{-\\lambda_j T_C}.

    The left side increases strictly in T_C from 0 to the number of referenced keys, so the
    root is unique. It is found by Newton's method on log T_C, kept inside a bracket that
    bisection would shrink anyway: the lower end C / sum(m lam) (since 1 - e^-x <= x), the
    upper end -ln(1 - C/M) / min(lam) (every key is at least as likely to be cached as the
    rarest). Log T_C because T_C spans many decades between a cache of a few hot keys and one
    that holds almost everything.

    The approximation is accurate to about a percent of hit rate for Zipf-like popularity
    (Fricker, Robert and Roberts 2012 explain why); it ignores temporal locality, so real
    traces, whose repeats cluster in time, hit more at small caches. It describes the steady
    state: the first reference to every key (a cold miss) is not counted, so a cache at least
    as large as the key space has hit probability 1. Classes with rate 0 are never referenced
    and never cached (hit probability 0, weight 0 in the hit rate).
    """
    lam = _as_vector(rates, "rates")
    if multiplicity is None:
        m = np.ones_like(lam)
    else:
        m = _as_vector(multiplicity, "multiplicity")
        if m.shape != lam.shape:
            raise InputError(f"rates and multiplicity must have the same length, got "
                             f"{lam.size} and {m.size}")
    capacity = float(capacity)
    if not (math.isfinite(capacity) and capacity >= 0):
        raise InputError(f"capacity must be a finite number of entries >= 0, got {capacity}")
    used = (lam > 0) & (m > 0)
    traffic = float(np.sum(m[used] * lam[used]))
    if not traffic > 0:
        raise InputError("rates carry no traffic: at least one class needs rate > 0 and "
                         "multiplicity > 0")
    n_keys = float(np.sum(m[used]))

    if capacity == 0:
        t_c = 0.0
    elif capacity >= n_keys:
        t_c = math.inf
    else:
        t_c = _solve_t(lam[used], m[used], capacity, traffic, n_keys)
    h = _hit_prob(lam, t_c)
    hit_rate = float(np.sum(m[used] * lam[used] * h[used]) / traffic)
    return CacheModel(capacity=capacity, n_keys=n_keys, characteristic_time=t_c, hit_prob=h,
                      hit_rate=min(hit_rate, 1.0))


def _as_vector(values: ArrayLike, name: str) -> NDArray[np.float64]:
    """A 1-D float64 copy of ``values`` with every entry finite and >= 0."""
    try:
        a = np.array(values, dtype=np.float64, ndmin=1)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be numbers: {exc}") from None
    if a.ndim != 1:
        raise InputError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.size == 0:
        raise InputError(f"{name} is empty")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        bad = a[~(np.isfinite(a) & (a >= 0))][0]
        raise InputError(f"{name} must be finite and >= 0, got {bad}")
    return a


def _hit_prob(lam: NDArray[np.float64], t_c: float) -> NDArray[np.float64]:
    """1 - exp(-lam * t_c), with rate-0 keys never cached and t_c = inf meaning all fit."""
    if math.isinf(t_c):
        return np.where(lam > 0, 1.0, 0.0)
    return -np.expm1(-lam * t_c)


def _solve_t(lam: NDArray[np.float64], m: NDArray[np.float64], capacity: float,
             traffic: float, n_keys: float) -> float:
    """T_C with sum(m (1 - exp(-lam T))) = capacity, for 0 < capacity < n_keys."""

    def excess(x: float) -> tuple[float, float]:
        """Occupancy minus capacity at T = e^x, and its derivative in x."""
        lt = lam * math.exp(x)
        e = np.exp(-lt)
        return float(np.sum(m * -np.expm1(-lt))) - capacity, float(np.sum(m * lt * e))

    lo = math.log(capacity / traffic)
    hi = math.log(-math.log1p(-capacity / n_keys) / float(lam.min()))
    hi = max(hi, lo)
    x = 0.5 * (lo + hi)
    for _ in range(_MAX_ITER):
        g, dg = excess(x)
        if g == 0:
            return math.exp(x)
        if g < 0:
            lo = x
        else:
            hi = x
        tol = _LOG_T_TOL * max(1.0, abs(x))
        if hi - lo <= tol:
            return math.exp(0.5 * (lo + hi))
        newton = x - g / dg if dg > 0 else math.nan
        if lo < newton < hi:
            if abs(newton - x) <= tol:
                return math.exp(newton)
            x = newton
        else:
            x = 0.5 * (lo + hi)
    return math.exp(x)


def lru_hits(keys: ArrayLike, capacity: int) -> NDArray[np.bool_]:
    """Which references of ``keys`` (any integers, in time order) hit an LRU cache of
    ``capacity`` entries that starts empty: the exact answer, one pass."""
    return LRUCache(capacity).hits(keys)


class LRUCache:
    """An LRU cache of ``capacity`` entries whose contents carry from one call to the next,
    so a stream cut into windows hits exactly as the whole stream would: ``hits(keys)`` runs
    the next references through it. Between calls it keeps only the cached keys in recency
    order (at most ``capacity``), never the keys ever seen."""

    def __init__(self, capacity: int):
        if capacity < 0:
            raise InputError(f"cache capacity must be >= 0, got {capacity}")
        self.capacity = int(capacity)
        self._held: NDArray | None = None   # cached keys, most recent first

    def hits(self, keys: ArrayLike) -> NDArray[np.bool_]:
        """Hit flags of ``keys`` (integers, in time order), continuing the cache."""
        keys = np.asarray(keys)
        if keys.size == 0 or self.capacity == 0:
            return np.zeros(keys.size, dtype=bool)
        held = self._held if self._held is not None else keys[:0]
        known, dense = np.unique(np.concatenate([held, keys.ravel()]), return_inverse=True)
        dense = dense.astype(np.int64).ravel()
        hits, final = _lru_kernel(dense[held.size:], int(known.size), self.capacity,
                                  dense[:held.size])
        self._held = known[final]
        return hits


def _lru_kernel(ids, n_keys, capacity, initial):
    from hotshard.sim._lru import lru_kernel

    return lru_kernel(ids, n_keys, capacity, initial)
