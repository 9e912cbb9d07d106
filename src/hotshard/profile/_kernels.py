"""Compiled kernels of the discrete power-law fit (numba).

The xmin scan of Clauset, Shalizi & Newman fits alpha by maximum likelihood and measures the
Kolmogorov-Smirnov distance for every candidate xmin. Done naively that is O(d^2) Hurwitz zeta
evaluations for d distinct values (what makes the `powerlaw` package take minutes at 1e7 points).
Here each candidate costs a few Newton steps plus a walk up its tail that stops as soon as the
result is decided, with two *exact* prunings:

* the walk aborts once the running KS distance exceeds the best distance found so far
  (that candidate can no longer win);
* the walk ends once both the empirical and the model survival fall below the running distance
  (every later difference is bounded by them, so the maximum is already known).

The Hurwitz zeta function and its first two derivatives in ``s`` come from one Euler-Maclaurin
evaluation (the method of Cephes' ``zeta``), differentiated term by term; they are checked
against ``scipy.special.zeta`` and mpmath in the tests.

Loading these kernels costs about half a second per process (numba's import and CPU target),
so small scans run instead in ``_vector``, a numpy twin of the same arithmetic without the
pruning; ``fit._scan`` chooses. A change to the math here belongs there too.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from hotshard.profile import _vector

# Constants shared with the numpy twin (numba freezes them at compile time: see _vector).
EM_COEFFS = _vector.EM_COEFFS
# Direct summation until q + N >= SHIFT + s, then the asymptotic series converges to ~1e-16.
_SHIFT = _vector.SHIFT
# Tail gaps up to this many integers are summed term by term; larger ones call zeta directly.
_GAP_DIRECT = 48
# Exponents beyond this are treated as a degenerate tail (alpha = inf).
_ALPHA_MAX = _vector.ALPHA_MAX
# Exponents are kept above 1; a truncated tail flatter than that has no power-law fit here.
_ALPHA_MIN = _vector.ALPHA_MIN
_ALPHA_MIN_TRUNCATED = _vector.ALPHA_MIN_TRUNCATED


@njit(cache=True, nogil=True)
def hurwitz_zeta3(s: float, q: float) -> tuple[float, float, float]:
    """zeta(s, q), d/ds zeta(s, q), d2/ds2 zeta(s, q) for s > 1, q > 0."""
    z, z1, z2 = zeta3_scaled(s, q)
    scale = math.exp(-s * math.log(q))
    return z * scale, z1 * scale, z2 * scale


@njit(cache=True, nogil=True)
def zeta3_scaled(s: float, q: float) -> tuple[float, float, float]:
    """q^s times (zeta, d/ds zeta, d2/ds2 zeta) at (s, q): no underflow for large s or q.

    The factor q^s is applied to the values, not differentiated, so ratios such as
    zeta'/zeta are those of the unscaled function.
    """
    lq = math.log(q)
    n_direct = 0
    if q < _SHIFT + s:
        n_direct = int(_SHIFT + s - q) + 1
    z = 0.0
    z1 = 0.0
    z2 = 0.0
    for k in range(n_direct):
        lx = math.log(q + k)
        t = math.exp(-s * (lx - lq))
        z += t
        z1 -= lx * t
        z2 += lx * lx * t
    a = q + n_direct
    la = math.log(a)
    a_1ms = a * math.exp(-s * (la - lq))  # a^(1-s), scaled
    inv = 1.0 / (s - 1.0)
    z += a_1ms * inv
    z1 += -la * a_1ms * inv - a_1ms * inv * inv
    z2 += la * la * a_1ms * inv + 2.0 * la * a_1ms * inv * inv + 2.0 * a_1ms * inv * inv * inv
    a_ms = a_1ms / a  # a^(-s), scaled
    z += 0.5 * a_ms
    z1 -= 0.5 * la * a_ms
    z2 += 0.5 * la * la * a_ms
    # sum_j C_j * P_j(s) * a^(-s-2j+1), P_j(s) = s (s+1) ... (s+2j-2)
    p0 = s
    p1 = 1.0
    p2 = 0.0
    apow = a_ms / a
    inv_a2 = 1.0 / (a * a)
    for j in range(EM_COEFFS.shape[0]):
        c = EM_COEFFS[j]
        z += c * p0 * apow
        z1 += c * (p1 - la * p0) * apow
        z2 += c * (p2 - 2.0 * la * p1 + la * la * p0) * apow
        for i in (2 * j + 1, 2 * j + 2):
            f = s + i
            p2 = p2 * f + 2.0 * p1
            p1 = p1 * f + p0
            p0 = p0 * f
        apow *= inv_a2
    return z, z1, z2


@njit(cache=True, nogil=True)
def hurwitz_zeta(s: float, q: float) -> float:
    """zeta(s, q) alone (same evaluation as ``hurwitz_zeta3``)."""
    return hurwitz_zeta3(s, q)[0]


@njit(cache=True, nogil=True)
def norm3(alpha: float, xmin: float, xmax: float) -> tuple[float, float, float]:
    """xmin^alpha times (Z, dZ/dalpha, d2Z/dalpha2), Z = sum_{x=xmin}^{xmax} x^-alpha.

    ``xmax`` <= 0 means no upper bound (Z is the Hurwitz zeta). A profile's tail is bounded
    above by its smallest head count, so its law is fitted truncated there.
    """
    z, z1, z2 = zeta3_scaled(alpha, xmin)
    if xmax <= 0.0:
        return z, z1, z2
    top = xmax + 1.0
    w, w1, w2 = zeta3_scaled(alpha, top)
    r = math.exp(-alpha * (math.log(top) - math.log(xmin)))
    return z - r * w, z1 - r * w1, z2 - r * w2


@njit(cache=True, nogil=True)
def _alpha_floor(xmax: float) -> float:
    """Smallest exponent searched. A truncated normaliser is a difference of two zetas whose
    1/(s-1)^k terms cancel: at s = 1.01 that still leaves ~1e-10 relative error, at 1 + 1e-10 it
    would leave none of the derivatives."""
    return _ALPHA_MIN if xmax <= 0.0 else _ALPHA_MIN_TRUNCATED


@njit(cache=True, nogil=True)
def mle_alpha(mean_log: float, xmin: float, xmax: float = -1.0) -> float:
    """Discrete power-law MLE of alpha for a tail x >= xmin with mean ln x = ``mean_log``.

    Solves E_alpha[ln X] = mean_log, i.e. -Z'(a)/Z(a) = mean_log with Z the normaliser
    (``norm3``), by Newton's method safeguarded with bisection (the left side decreases
    strictly in alpha). Returns +inf when every tail value equals xmin (the likelihood grows
    without bound); alpha stays above 1 (a truncated tail flatter than that is clamped).
    """
    gap = mean_log - math.log(xmin)
    if gap <= 1e-15:
        return math.inf
    lo = _alpha_floor(xmax)
    hi = 1.0
    # Closed-form start (CSN eq. 3.7), accurate for xmin >~ 6.
    alpha = 1.0 + 1.0 / (mean_log - math.log(xmin - 0.5)) if xmin > 1.0 else 1.0 + 1.0 / gap
    hi = max(2.0 * alpha, 4.0)
    # make sure hi brackets the root: E_hi[ln X] < mean_log
    z, z1, _z2 = norm3(lo, xmin, xmax)
    if -z1 / z <= mean_log:
        return lo  # only possible with an upper bound: flatter than alpha = 1
    while True:
        z, z1, _z2 = norm3(hi, xmin, xmax)
        if -z1 / z < mean_log:
            break
        if hi > _ALPHA_MAX:
            return math.inf  # the tail is too tight around xmin for any sensible exponent
        lo = hi
        hi *= 2.0
    if alpha <= lo or alpha >= hi or not math.isfinite(alpha):
        alpha = 0.5 * (lo + hi)
    for _ in range(200):
        z, z1, z2 = norm3(alpha, xmin, xmax)
        d1 = z1 / z
        g = -d1 - mean_log  # decreasing in alpha
        if g > 0.0:
            lo = alpha
        else:
            hi = alpha
        var = z2 / z - d1 * d1  # = -dg/dalpha > 0
        step = g / var if var > 0.0 else math.inf
        new = alpha + step
        if not (lo < new < hi):
            new = 0.5 * (lo + hi)
        if abs(new - alpha) <= 1e-13 * max(1.0, alpha):
            return new
        alpha = new
        if hi - lo <= 1e-14 * hi:
            return alpha
    return alpha


@njit(cache=True, nogil=True)
def ks_distance(
    values: np.ndarray, suffix: np.ndarray, k: int, alpha: float, bound: float,
    xmax: float = -1.0,
) -> float:
    """KS distance between the tail values[k:] and the discrete power law (alpha, values[k]).

    ``suffix[j]`` is the number of observations >= values[j]. The distance is the supremum over
    all integers x >= xmin of |F_data(x) - F_model(x)| (as in CSN's plfit). Returns early with a
    value > ``bound`` once the candidate cannot beat ``bound``.
    """
    xmin = values[k]
    n_tail = suffix[k]
    log_xmin = math.log(xmin)
    inv_z0 = 1.0 / norm3(alpha, float(xmin), xmax)[0]  # all terms scaled by xmin^alpha
    above = 0.0  # scaled mass beyond xmax, removed from zeta-based survivals
    if xmax > 0.0:
        top = xmax + 1.0
        above = math.exp(-alpha * (math.log(top) - log_xmin)) * zeta3_scaled(alpha, top)[0]
    surv = 1.0  # model P(X >= values[j])
    dist = 0.0
    last = values.shape[0]
    for j in range(k, last):
        x = values[j]
        if j > k:
            prev = values[j - 1]
            if x - prev <= _GAP_DIRECT:
                acc = 0.0
                for t in range(prev, x):
                    acc += math.exp(-alpha * (math.log(t) - log_xmin))
                surv -= acc * inv_z0
            else:
                rel = math.exp(-alpha * (math.log(x) - log_xmin))
                surv = (rel * zeta3_scaled(alpha, float(x))[0] - above) * inv_z0
        emp = suffix[j] / n_tail  # data P(X >= x)
        diff = abs(emp - surv)
        if diff > dist:
            dist = diff
        emp_next = suffix[j + 1] / n_tail if j + 1 < last else 0.0  # data P(X > x)
        surv_next = surv - math.exp(-alpha * (math.log(x) - log_xmin)) * inv_z0  # P(X > x)
        diff = abs(emp_next - surv_next)
        if diff > dist:
            dist = diff
        if dist > bound:
            return dist
        if emp_next <= dist and surv_next <= dist:
            return dist
    return dist


@njit(cache=True, nogil=True)
def scan_xmin(
    values: np.ndarray, counts: np.ndarray, candidates: np.ndarray, seed_bound: float,
    xmax: float = -1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Fit alpha and the KS distance for each candidate index into ``values``.

    Returns (alphas, distances). Distances of candidates pruned against the best distance are
    lower bounds strictly above the final minimum, so ``argmin`` still picks the exact winner.
    """
    d = values.shape[0]
    suffix = np.zeros(d + 1, dtype=np.int64)
    logsum = np.zeros(d + 1, dtype=np.float64)
    for j in range(d - 1, -1, -1):
        suffix[j] = suffix[j + 1] + counts[j]
        logsum[j] = logsum[j + 1] + counts[j] * math.log(values[j])
    m = candidates.shape[0]
    alphas = np.empty(m, dtype=np.float64)
    dists = np.empty(m, dtype=np.float64)
    best = seed_bound
    for i in range(m):
        k = candidates[i]
        alpha = mle_alpha(logsum[k] / suffix[k], float(values[k]), xmax)
        alphas[i] = alpha
        if not math.isfinite(alpha) or alpha <= _alpha_floor(xmax):
            dists[i] = math.inf
            continue
        dist = ks_distance(values, suffix, k, alpha, best, xmax)
        dists[i] = dist
        if dist < best:
            best = dist
    return alphas, dists
