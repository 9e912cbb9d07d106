"""Alternatives to the power law on the same tail, and Vuong's likelihood-ratio test (CSN §5).

Every alternative is a discrete distribution on the integers x >= xmin, fitted by maximum
likelihood to exactly the tail the power law was fitted to:

* ``exponential``: p(x) = (1 - e^-lam) e^(-lam (x - xmin)), closed-form MLE.
* ``lognormal``: the continuous lognormal binned to integers, p(x) = [F(x+1/2) - F(x-1/2)] /
  [1 - F(xmin-1/2)] (the ``powerlaw`` package's default "round" discretisation).
* ``truncated_power_law``: p(x) = x^-alpha e^(-lam x) / Z, lam >= 0; it contains the power law
  (lam = 0), so the test is CSN's nested chi-square test with one degree of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy import integrate, optimize, special, stats

from hotshard.errors import FitError

__all__ = ["ALTERNATIVES", "compare", "vuong"]

# Terms of the truncated power law's normaliser summed one by one; the rest by integral.
_DIRECT_TERMS = 1 << 16


def _tail(tab, xmin: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    keep = tab.values >= xmin
    return tab.values[keep].astype(np.float64), tab.counts[keep].astype(np.float64)


def _fit_exponential(x, w, xmin) -> tuple[NDArray[np.float64], dict[str, float]]:
    excess = float(np.dot(w, x - xmin) / w.sum())
    if excess <= 0:
        raise FitError("every tail value equals xmin: the exponential cannot be fitted")
    lam = math.log1p(1.0 / excess)
    logp = math.log(-math.expm1(-lam)) - lam * (x - xmin)
    return logp, {"lambda": lam}


def _log_interval(lo: NDArray[np.float64], hi: NDArray[np.float64]) -> NDArray[np.float64]:
    """ln(Phi(hi) - Phi(lo)) without cancellation, for lo < hi."""
    upper = lo > 0  # both in the upper tail: use survival functions
    a = np.where(upper, -hi, lo)
    b = np.where(upper, -lo, hi)
    lb = special.log_ndtr(b)
    la = special.log_ndtr(a)
    return lb + np.log1p(-np.exp(np.minimum(la - lb, 0.0)))


def _lognormal_logp(x, xmin, mu, sigma) -> NDArray[np.float64]:
    z_lo = (np.log(x - 0.5) - mu) / sigma
    z_hi = (np.log(x + 0.5) - mu) / sigma
    z_min = (math.log(xmin - 0.5) - mu) / sigma if xmin > 0.5 else -np.inf
    norm = special.log_ndtr(-z_min)
    return _log_interval(z_lo, z_hi) - norm


def _fit_lognormal(x, w, xmin) -> tuple[NDArray[np.float64], dict[str, float]]:
    logs = np.log(x)
    mean = float(np.dot(w, logs) / w.sum())
    sd = math.sqrt(max(float(np.dot(w, (logs - mean) ** 2) / w.sum()), 1e-6))

    def nll(theta):
        val = -float(np.dot(w, _lognormal_logp(x, xmin, theta[0], math.exp(theta[1]))))
        return val if math.isfinite(val) else 1e300

    best = None
    # The tail of a lognormal can mimic a power law with a very negative mu: try several starts.
    for mu0 in (mean, mean - 2 * sd, mean - 10 * sd):
        res = optimize.minimize(nll, [mu0, math.log(sd)], method="Nelder-Mead",
                                options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
        if best is None or res.fun < best.fun:
            best = res
    mu, sigma = float(best.x[0]), math.exp(float(best.x[1]))
    return _lognormal_logp(x, xmin, mu, sigma), {"mu": mu, "sigma": sigma}


def _tpl_log_norm(alpha: float, lam: float, xmin: int) -> float:
    """ln sum_{x >= xmin} x^-alpha e^(-lam x), direct terms then an Euler-Maclaurin remainder."""
    xs = np.arange(xmin, xmin + _DIRECT_TERMS, dtype=np.float64)
    shift = lam * xmin  # factor e^(-lam xmin) out to avoid underflow
    head = float(np.sum(np.exp(-alpha * np.log(xs) - lam * xs + shift)))
    top = float(xmin + _DIRECT_TERMS)
    if lam * top - shift > 700:
        return math.log(head) - shift

    log_top = math.log(top)

    def integrand(t):  # x = top * e^t
        if lam * top * math.exp(min(t, 700.0)) > 1e300:
            return 0.0
        expo = (1.0 - alpha) * (log_top + t) - lam * top * math.exp(t) + shift
        return math.exp(expo) if expo > -745.0 else 0.0

    if lam == 0.0 and alpha <= 1.0:
        return math.inf
    rest, _ = integrate.quad(integrand, 0.0, math.inf, limit=200)
    rest += 0.5 * math.exp(-alpha * math.log(top) - lam * top + shift)
    return math.log(head + rest) - shift


def _fit_truncated(x, w, xmin, pl_alpha) -> tuple[NDArray[np.float64], dict[str, float]]:
    n = w.sum()
    sum_log = float(np.dot(w, np.log(x)))
    sum_x = float(np.dot(w, x))

    def nll(theta):
        alpha, lam = theta[0], math.exp(theta[1])
        val = alpha * sum_log + lam * sum_x + n * _tpl_log_norm(alpha, lam, xmin)
        return val if math.isfinite(val) else 1e300

    mean_x = sum_x / n
    starts = (
        [pl_alpha, math.log(1e-3 / mean_x)],
        [max(pl_alpha - 1.0, 0.5), math.log(1.0 / mean_x)],
    )
    best = None
    for start in starts:
        res = optimize.minimize(nll, start, method="Nelder-Mead",
                                options={"xatol": 1e-7, "fatol": 1e-9, "maxiter": 2000})
        if best is None or res.fun < best.fun:
            best = res
    alpha, lam = float(best.x[0]), math.exp(float(best.x[1]))
    log_norm = _tpl_log_norm(alpha, lam, xmin)
    return -alpha * np.log(x) - lam * x - log_norm, {"alpha": alpha, "lambda": lam}


def vuong(logp_pl, logp_alt, weights) -> tuple[float, float, float]:
    """Vuong's test: (R, normalized R, two-sided p) from per-point log-likelihoods.

    R = sum (ln p_pl - ln p_alt); sigma^2 the variance of the pointwise differences;
    p = erfc(|R| / (sigma sqrt(2 n))) (CSN eq. 5.4).
    """
    diff = logp_pl - logp_alt
    n = float(weights.sum())
    R = float(np.dot(weights, diff))
    mean = R / n
    var = float(np.dot(weights, (diff - mean) ** 2) / n)
    if var <= 0:
        return R, math.copysign(math.inf, R) if R else 0.0, 0.0 if R else 1.0
    norm = R / math.sqrt(n * var)
    return R, norm, float(special.erfc(abs(norm) / math.sqrt(2.0)))


def compare(tab, fit, name: str):
    """Fit alternative ``name`` to the tail of ``fit`` and test it against the power law."""
    from hotshard.profile.fit import Comparison

    x, w = _tail(tab, fit.xmin)
    logp_pl = fit.distribution.logpmf(x)
    fitter = ALTERNATIVES[name]
    if name == "truncated_power_law":
        logp_alt, params = fitter(x, w, fit.xmin, fit.alpha)
        R = float(np.dot(w, logp_pl - logp_alt))
        R = min(R, 0.0)  # lam = 0 is admissible: the larger model never fits worse
        _, norm, _ = vuong(logp_pl, logp_alt, w)
        p = float(stats.chi2.sf(-2.0 * R, df=1)) if R < 0 else 1.0
        return Comparison(name, R, norm, p, params, nested=True)
    logp_alt, params = fitter(x, w, fit.xmin)
    R, norm, p = vuong(logp_pl, logp_alt, w)
    return Comparison(name, R, norm, p, params, nested=False)


ALTERNATIVES: dict[str, Callable] = {
    "exponential": _fit_exponential,
    "lognormal": _fit_lognormal,
    "truncated_power_law": _fit_truncated,
}
