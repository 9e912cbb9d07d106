"""The discrete power-law fit in plain numpy, vectorized across all candidate xmins at once.

Why two paths: the compiled kernels (``_kernels``, numba) are the fastest way through a big
xmin scan, but loading them costs about half a second per process (importing numba and
initialising its CPU target for the cached machine code), while the typical command-line fit
(a few hundred distinct values) needs only milliseconds of arithmetic. This module computes the
same quantities with numpy array operations and no compiled code, so a small fit pays for
numpy alone; ``fit._scan`` picks the path by the size of the scan. Both paths evaluate the
same formulas (the Euler-Maclaurin Hurwitz zeta with two s-derivatives, safeguarded Newton on
the likelihood equation, the KS distance over every integer of the tail) and are tested to
agree: same xmin, alpha and KS distance to 1e-9 relative.

Unlike the kernels, nothing here is pruned: every candidate's KS distance is exact. The work is
one (candidate, distinct value >= candidate) pair per element, processed in bounded chunks.

The constants below are shared with ``_kernels``. numba freezes them into its cached machine
code, and its cache is keyed on ``_kernels.py`` alone: after changing one here, touch
``_kernels.py`` (or clear ``__pycache__``) so the kernels are recompiled.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

# B_{2j} / (2j)! for j = 1..12: the Euler-Maclaurin correction coefficients.
_BERNOULLI_2J = (
    1.0 / 6.0, -1.0 / 30.0, 1.0 / 42.0, -1.0 / 30.0, 5.0 / 66.0, -691.0 / 2730.0, 7.0 / 6.0,
    -3617.0 / 510.0, 43867.0 / 798.0, -174611.0 / 330.0, 854513.0 / 138.0, -236364091.0 / 2730.0,
)
EM_COEFFS = np.array(
    [b / math.factorial(2 * (j + 1)) for j, b in enumerate(_BERNOULLI_2J)], dtype=np.float64
)
# Direct summation until q + N >= SHIFT + s, then the asymptotic series converges to ~1e-16.
SHIFT = 16.0
# Exponents beyond this are treated as a degenerate tail (alpha = inf).
ALPHA_MAX = 1e4
# Exponents are kept above 1; a truncated tail flatter than that has no power-law fit here.
ALPHA_MIN = 1.0 + 1e-10
ALPHA_MIN_TRUNCATED = 1.01

# An Euler-Maclaurin term this small relative to the sum so far ends the series early.
_NEGLIGIBLE = 1e-18
# Elements per chunk of the pair arrays and of the direct sums (bounds memory to tens of MB).
_CHUNK = 1 << 18


def alpha_floor(xmax: float) -> float:
    """Smallest exponent searched (see ``_kernels._alpha_floor`` for why it depends on xmax)."""
    return ALPHA_MIN if xmax <= 0.0 else ALPHA_MIN_TRUNCATED


def _direct_sums(
    s: FloatArray, q: FloatArray, lq: FloatArray, n_direct: NDArray[np.int64], derivs: bool
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """sum_{k < n_direct} ((q + k)/q)^-s and its s-derivatives, as one ragged flat sum.

    The flat terms are taken _CHUNK at a time (an element may span chunks), so memory stays
    bounded even for a tail so tight that its exponent needs millions of direct terms.
    """
    n = s.size
    z, z1, z2 = np.zeros(n), np.zeros(n), np.zeros(n)
    ends = np.cumsum(n_direct)
    total = int(ends[-1]) if n else 0
    for lo in range(0, total, _CHUNK):
        flat = np.arange(lo, min(lo + _CHUNK, total))
        owner = np.searchsorted(ends, flat, side="right")
        lx = np.log(q[owner] + (flat - (ends[owner] - n_direct[owner])))
        t = np.exp(-s[owner] * (lx - lq[owner]))
        # bincount adds in order of appearance: k ascending, as the kernel's loop does
        z += np.bincount(owner, t, n)
        if derivs:
            lt = lx * t
            z1 -= np.bincount(owner, lt, n)
            z2 += np.bincount(owner, lx * lt, n)
    return z, z1, z2


def zeta3_scaled(
    s: FloatArray, q: FloatArray, derivs: bool = True
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """q^s times (zeta, d/ds zeta, d2/ds2 zeta) at each (s, q), s > 1, q > 0.

    Element by element the evaluation of ``_kernels.zeta3_scaled``: direct terms until
    q + N >= SHIFT + s, then the integral, the half term and 12 Euler-Maclaurin corrections,
    differentiated term by term. With ``derivs=False`` the derivatives are returned as zeros.
    """
    s = np.asarray(s, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    lq = np.log(q)
    n_direct = np.where(q < SHIFT + s, np.floor(SHIFT + s - q) + 1.0, 0.0).astype(np.int64)
    z, z1, z2 = _direct_sums(s, q, lq, n_direct, derivs)
    a = q + n_direct
    la = np.log(a)
    a_1ms = a * np.exp(-s * (la - lq))  # a^(1-s), scaled
    inv = 1.0 / (s - 1.0)
    a_ms = a_1ms / a  # a^(-s), scaled
    z += a_1ms * inv + 0.5 * a_ms
    if derivs:
        z1 += -la * a_1ms * inv - a_1ms * inv * inv - 0.5 * la * a_ms
        z2 += (la * la * a_1ms * inv + 2.0 * la * a_1ms * inv * inv
               + 2.0 * a_1ms * inv * inv * inv + 0.5 * la * la * a_ms)
    # sum_j C_j * P_j(s) * a^(-s-2j+1), P_j(s) = s (s+1) ... (s+2j-2), and its s-derivatives
    p0, p1, p2 = s.copy(), np.ones_like(s), np.zeros_like(s)
    apow = a_ms / a
    inv_a2 = 1.0 / (a * a)
    for j, c in enumerate(EM_COEFFS):
        term = c * p0 * apow
        z += term
        small = np.abs(term) <= _NEGLIGIBLE * z
        if derivs:
            term1 = c * (p1 - la * p0) * apow
            term2 = c * (p2 - 2.0 * la * p1 + la * la * p0) * apow
            z1 += term1
            z2 += term2
            small &= (np.abs(term1) <= _NEGLIGIBLE * np.abs(z1)) & (
                np.abs(term2) <= _NEGLIGIBLE * np.abs(z2))
        if small.all():
            break  # with a >= SHIFT + s the terms keep shrinking: the rest cannot matter
        for i in (2 * j + 1, 2 * j + 2):
            f = s + i
            if derivs:
                p2 = p2 * f + 2.0 * p1
                p1 = p1 * f + p0
            p0 = p0 * f
        apow = apow * inv_a2
    return z, z1, z2


def hurwitz_zeta(s: FloatArray, q: FloatArray) -> FloatArray:
    """zeta(s, q) elementwise (underflows for large s * ln q; the fit uses the scaled form)."""
    s = np.atleast_1d(np.asarray(s, dtype=np.float64))
    q = np.atleast_1d(np.asarray(q, dtype=np.float64))
    s, q = np.broadcast_arrays(s, q)
    s, q = s.ravel(), q.ravel()
    return zeta3_scaled(s, q, derivs=False)[0] * np.exp(-s * np.log(q))


def norm3(
    alpha: FloatArray, xmin: FloatArray, xmax: float, derivs: bool = True
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """xmin^alpha times (Z, dZ/dalpha, d2Z/dalpha2), Z = sum_{x=xmin}^{xmax} x^-alpha.

    ``xmax`` <= 0 means no upper bound (Z is the Hurwitz zeta), as in ``_kernels.norm3``.
    """
    z, z1, z2 = zeta3_scaled(alpha, xmin, derivs)
    if xmax <= 0.0:
        return z, z1, z2
    top = xmax + 1.0
    w, w1, w2 = zeta3_scaled(alpha, np.full(alpha.shape, top), derivs)
    r = np.exp(-alpha * (math.log(top) - np.log(xmin)))
    return z - r * w, z1 - r * w1, z2 - r * w2


def mle_alpha(mean_log: FloatArray, xmin: FloatArray, xmax: float = -1.0) -> FloatArray:
    """Discrete power-law MLE of alpha for each tail (mean ln x, xmin), all at once.

    Element by element ``_kernels.mle_alpha``: Newton's method on E_alpha[ln X] = mean_log,
    safeguarded by a bisection bracket, with the same start, bracket, stopping rules and
    special cases (+inf for a tail all at xmin, the floor for one flatter than alpha = 1);
    converged elements leave the active set.
    """
    mean_log = np.asarray(mean_log, dtype=np.float64)
    xmin = np.asarray(xmin, dtype=np.float64)
    out = np.full(mean_log.shape, np.inf)
    floor = alpha_floor(xmax)
    idx = np.flatnonzero(mean_log - np.log(xmin) > 1e-15)
    ml, xm = mean_log[idx], xmin[idx]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # Closed-form start (CSN eq. 3.7), accurate for xmin >~ 6.
        alpha = np.where(xm > 1.0, 1.0 + 1.0 / (ml - np.log(xm - 0.5)),
                         1.0 + 1.0 / (ml - np.log(xm)))
        lo = np.full(idx.size, floor)
        hi = np.maximum(2.0 * alpha, 4.0)
        z, z1, _ = norm3(lo, xm, xmax)
        live = ~(-z1 / z <= ml)  # NaN stays live, as in the kernel
        out[idx[~live]] = floor  # only possible with an upper bound: flatter than alpha = 1
        # grow hi until it brackets the root, E_hi[ln X] < mean_log; past ALPHA_MAX the tail is
        # too tight around xmin for any sensible exponent (alpha = inf)
        todo = np.flatnonzero(live)
        while todo.size:
            z, z1, _ = norm3(hi[todo], xm[todo], xmax)
            rest = todo[~(-z1 / z < ml[todo])]
            live[rest[hi[rest] > ALPHA_MAX]] = False
            todo = rest[hi[rest] <= ALPHA_MAX]
            lo[todo] = hi[todo]
            hi[todo] *= 2.0
        idx, ml, xm, alpha, lo, hi = idx[live], ml[live], xm[live], alpha[live], lo[live], hi[live]
        mid = (alpha <= lo) | (alpha >= hi) | ~np.isfinite(alpha)
        alpha = np.where(mid, 0.5 * (lo + hi), alpha)
        for _ in range(200):
            if idx.size == 0:
                break
            z, z1, z2 = norm3(alpha, xm, xmax)
            d1 = z1 / z
            g = -d1 - ml  # decreasing in alpha
            up = g > 0.0
            lo = np.where(up, alpha, lo)
            hi = np.where(up, hi, alpha)
            var = z2 / z - d1 * d1  # = -dg/dalpha > 0
            new = alpha + np.where(var > 0.0, g / var, np.inf)
            new = np.where((lo < new) & (new < hi), new, 0.5 * (lo + hi))
            stop = np.abs(new - alpha) <= 1e-13 * np.maximum(1.0, alpha)
            alpha = new
            stop |= hi - lo <= 1e-14 * hi
            out[idx[stop]] = alpha[stop]
            keep = ~stop
            idx, ml, xm, alpha, lo, hi = (idx[keep], ml[keep], xm[keep], alpha[keep], lo[keep],
                                          hi[keep])
        out[idx] = alpha
    return out


def tail_sums(
    values: NDArray[np.int64], counts: NDArray[np.int64]
) -> tuple[NDArray[np.int64], FloatArray]:
    """(suffix, logsum): observations >= values[j] and their sum of ln x, with a 0 appended."""
    d = values.size
    suffix = np.zeros(d + 1, dtype=np.int64)
    logsum = np.zeros(d + 1, dtype=np.float64)
    suffix[:d] = np.cumsum(counts[::-1])[::-1]
    logsum[:d] = np.cumsum((counts * np.log(values.astype(np.float64)))[::-1])[::-1]
    return suffix, logsum


def scan_pairs(d: int, candidates: NDArray[np.int64]) -> int:
    """Work of a vectorized scan: the number of (candidate, distinct value >= it) pairs."""
    return int(np.sum(d - candidates))


def ks_distances(
    values: NDArray[np.int64], suffix: NDArray[np.int64], candidates: NDArray[np.int64],
    alphas: FloatArray, xmax: float = -1.0,
) -> FloatArray:
    """Exact KS distance of each candidate tail values[k:] to its law (alpha, values[k]).

    The distance is the supremum over all integers x >= xmin of |F_data(x) - F_model(x)|: the
    empirical survival is flat between observed values and the model's decreases, so the
    supremum is attained at an observed value x or at x + 1, the two points compared here
    (as in ``_kernels.ks_distance``). The model survival P(X >= x) is the scaled Hurwitz zeta
    ratio zeta(alpha, x) / Z, minus the mass above xmax when truncated.
    """
    d = values.size
    out = np.empty(candidates.size)
    lengths = d - candidates
    ends = np.cumsum(lengths)
    first = 0
    while first < candidates.size:  # chunks of whole candidates holding ~_CHUNK pairs
        last = int(np.searchsorted(ends, ends[first] - lengths[first] + _CHUNK, side="right"))
        last = min(max(last, first + 1), candidates.size)
        out[first:last] = _ks_chunk(values, suffix, candidates[first:last], alphas[first:last],
                                    xmax)
        first = last
    return out


def _ks_chunk(
    values: NDArray[np.int64], suffix: NDArray[np.int64], cands: NDArray[np.int64],
    alphas: FloatArray, xmax: float,
) -> FloatArray:
    """KS distances of a few candidates, one array element per (candidate, value) pair."""
    d = values.size
    x0 = values[cands].astype(np.float64)
    log_x0 = np.log(x0)
    inv_z0 = 1.0 / norm3(alphas, x0, xmax, derivs=False)[0]  # all terms scaled by xmin^alpha
    above = np.zeros(cands.size)  # scaled mass beyond xmax, removed from zeta-based survivals
    if xmax > 0.0:
        top = xmax + 1.0
        above = np.exp(-alphas * (math.log(top) - log_x0)) * zeta3_scaled(
            alphas, np.full(cands.size, top), derivs=False)[0]
    lengths = d - cands
    starts = np.cumsum(lengths) - lengths
    owner = np.repeat(np.arange(cands.size), lengths)
    j = np.arange(int(lengths.sum())) - np.repeat(starts - cands, lengths)
    a = alphas[owner]
    x = values[j].astype(np.float64)
    rel = np.exp(-a * (np.log(x) - log_x0[owner]))  # (x / xmin)^-alpha
    inv = inv_z0[owner]
    surv = (rel * zeta3_scaled(a, x, derivs=False)[0] - above[owner]) * inv  # P(X >= x)
    surv[starts] = 1.0
    n_tail = suffix[cands][owner]
    diff = np.abs(suffix[j] / n_tail - surv)
    diff = np.maximum(diff, np.abs(suffix[j + 1] / n_tail - (surv - rel * inv)))  # P(X > x)
    return np.maximum.reduceat(diff, starts)


def scan_xmin(
    values: NDArray[np.int64], counts: NDArray[np.int64], candidates: NDArray[np.int64],
    xmax: float = -1.0,
) -> tuple[FloatArray, FloatArray]:
    """Alpha and exact KS distance of every candidate index into ``values`` (no pruning).

    Returns (alphas, distances) as ``_kernels.scan_xmin`` does; candidates whose alpha is
    infinite or at the floor get distance +inf.
    """
    suffix, logsum = tail_sums(values, counts)
    cands = np.asarray(candidates, dtype=np.int64)
    alphas = mle_alpha(logsum[cands] / suffix[cands], values[cands].astype(np.float64), xmax)
    dists = np.full(cands.size, np.inf)
    ok = np.isfinite(alphas) & (alphas > alpha_floor(xmax))
    if np.any(ok):
        dists[ok] = ks_distances(values, suffix, cands[ok], alphas[ok], xmax)
    return alphas, dists
