"""Compiled kernels of the key samplers (numba): alias tables, class draws, exact Zipf."""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def build_alias(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias method: (prob, alias) such that picking column i uniformly, then i with
    probability prob[i] else alias[i], draws i with probability weights[i] / sum(weights)."""
    m = weights.shape[0]
    total = 0.0
    for i in range(m):
        total += weights[i]
    scaled = np.empty(m, dtype=np.float64)
    for i in range(m):
        scaled[i] = weights[i] * m / total
    prob = np.ones(m, dtype=np.float64)
    alias = np.arange(m).astype(np.int64)
    small = np.empty(m, dtype=np.int64)
    large = np.empty(m, dtype=np.int64)
    ns = 0
    nl = 0
    for i in range(m):
        if scaled[i] < 1.0:
            small[ns] = i
            ns += 1
        else:
            large[nl] = i
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        nl -= 1
        g = large[nl]
        prob[s] = scaled[s]
        alias[s] = g
        scaled[g] = (scaled[g] + scaled[s]) - 1.0
        if scaled[g] < 1.0:
            small[ns] = g
            ns += 1
        else:
            large[nl] = g
            nl += 1
    # leftovers are 1 up to rounding
    return prob, alias


@njit(cache=True, nogil=True)
def pick_classes(u: np.ndarray, prob: np.ndarray, alias: np.ndarray, sizes: np.ndarray,
                 out: np.ndarray) -> int:
    """out[i] = class drawn by alias lookup on u[i]; returns how many drawn classes hold more
    than one key (those need a second uniform for the key inside the class)."""
    m = prob.shape[0]
    multi = 0
    # branch-free selects: the alias test is a coin flip the CPU cannot predict
    for i in range(u.shape[0]):
        x = u[i] * m
        c = min(int(x), m - 1)
        c = c if x - c < prob[c] else alias[c]
        out[i] = c
        multi += sizes[c] > 1
    return multi


@njit(cache=True, nogil=True)
def classes_to_keys(out: np.ndarray, v: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
                    order: np.ndarray) -> None:
    """Turn drawn classes into keys in place: the next v for each multi-key class, in order.

    Heavy-tailed tables put most draws on single-key (head) classes, so only the draws that
    need a position inside a class consume a uniform.
    """
    mapped = order.shape[0] > 0
    j = 0
    for i in range(out.shape[0]):
        c = out[i]
        size = sizes[c]
        pos = offsets[c]
        if size > 1:
            pos += min(int(v[j] * size), size - 1)
            j += 1
        out[i] = order[pos] if mapped else pos


@njit(cache=True, nogil=True)
def _h_integral(x: float, exponent: float) -> float:
    log_x = math.log(x)
    t = (1.0 - exponent) * log_x
    # expm1(t)/t -> 1 as t -> 0: (x^(1-e) - 1) / (1 - e), stable at e = 1
    helper = math.expm1(t) / t if abs(t) > 1e-8 else 1.0 + t * 0.5 * (1.0 + t / 3.0)
    return helper * log_x


@njit(cache=True, nogil=True)
def _h(x: float, exponent: float) -> float:
    return math.exp(-exponent * math.log(x))


@njit(cache=True, nogil=True)
def _h_integral_inverse(x: float, exponent: float) -> float:
    t = x * (1.0 - exponent)
    if t < -1.0:
        t = -1.0  # guards against rounding just below the domain
    helper = math.log1p(t) / t if abs(t) > 1e-8 else 1.0 - t * (0.5 - t / 3.0)
    return math.exp(helper * x)


@njit(cache=True, nogil=True)
def zipf_rejection_inversion(rng, n: int, n_keys: int, exponent: float) -> np.ndarray:
    """Exact draws of P(k) proportional to k^-exponent on k = 1..n_keys, any exponent > 0.

    Rejection-inversion of Hoermann & Derflinger (1996), as in Apache Commons RNG's
    RejectionInversionZipfSampler; acceptance is above 90% for every exponent.
    """
    h_x1 = _h_integral(1.5, exponent) - 1.0
    h_n = _h_integral(n_keys + 0.5, exponent)
    s = 2.0 - _h_integral_inverse(_h_integral(2.5, exponent) - _h(2.0, exponent), exponent)
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        while True:
            u = h_n + rng.random() * (h_x1 - h_n)
            x = _h_integral_inverse(u, exponent)
            k = int(x + 0.5)
            if k < 1:
                k = 1
            elif k > n_keys:
                k = n_keys
            if k - x <= s or u >= _h_integral(k + 0.5, exponent) - _h(k, exponent):
                out[i] = k
                break
    return out


@njit(cache=True, nogil=True)
def fnv1_64_of_longs(values: np.ndarray) -> np.ndarray:
    """YCSB's Utils.fnvhash64: FNV-1 over the 8 little-end bytes of each long, then |h| (Java
    Math.abs, so Long.MIN_VALUE stays negative)."""
    out = np.empty(values.shape[0], dtype=np.int64)
    for i in range(values.shape[0]):
        val = np.uint64(values[i])
        h = np.uint64(0xCBF29CE484222325)
        for _ in range(8):
            octet = val & np.uint64(0xFF)
            val = val >> np.uint64(8)
            h = h ^ octet
            h = h * np.uint64(1099511628211)
        signed = np.int64(h)
        out[i] = -signed if signed < 0 and signed != np.iinfo(np.int64).min else signed
    return out
