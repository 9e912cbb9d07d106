"""Alternatives to the power law on the same tail, and Vuong's likelihood-ratio test (CSN §5).

Every alternative is a discrete distribution on the integers x >= xmin, fitted by maximum
likelihood to exactly the tail the power law was fitted to:

* ``exponential``: p(x) = (1 - e^-lam) e^(-lam (x - xmin)), closed-form MLE.
* ``lognormal``: the continuous lognormal binned to integers, p(x) = [F(x+1/2) - F(x-1/2)] /
  [1 - F(xmin-1/2)] (the ``powerlaw`` package's default "round" discretisation). Conditioned on
  x >= xmin, the family contains the power law only as a limit: in u = ln x - ln(xmin - 1/2) the
  density is proportional to exp(-a u^2 / 2 - c u) with a = 1/sigma^2 and
  mu = ln(xmin - 1/2) - c / a, so a -> 0 at fixed c (sigma -> inf, mu -> -inf) gives the
  power law x^-(1 + c). The fit runs over (a >= 0, c), limit included. When the likelihood is
  highest at a = 0 no (mu, sigma) is the fit: the result says the lognormal degenerated into a
  power law and carries the limit's exponent, not the optimizer's last, arbitrary (mu, sigma).
  The test is then between two power laws (discrete, and continuous binned), which is what it
  honestly is. Bounding mu instead (the ``powerlaw`` package's ``lognormal_positive`` takes
  mu >= 0) would answer a different question, set by the bound, not by the data.
* ``truncated_power_law``: p(x) = x^-alpha e^(-lam x) / Z, lam >= 0; it contains the power law
  (lam = 0), so the test is CSN's nested chi-square test with one degree of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy import integrate, optimize, special, stats

from hotshard.errors import FitError
from hotshard.profile.comparison import Comparison

__all__ = ["ALTERNATIVES", "compare", "vuong"]

# Terms of the truncated power law's normaliser summed one by one; the rest by integral.
_DIRECT_TERMS = 1 << 16
# A lognormal must beat its power-law limit by more than this share of the log-likelihood (the
# optimizer's precision) to count as a lognormal.
_LIMIT_RTOL = 1e-9
_SQRT2 = math.sqrt(2.0)
# (a, c) of the lognormal: a = 1/sigma^2 >= 0, where a = 0 is the power-law limit
_LOGNORMAL_BOUNDS = [(0.0, None), (None, None)]


def _tail(tab, xmin: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    keep = tab.values >= xmin
    return tab.values[keep].astype(np.float64), tab.counts[keep].astype(np.float64)


class _Fitted(NamedTuple):
    """An alternative's fit: per-value log-probabilities, parameters, and whether the optimum
    is the family's power-law limit rather than a member of the family."""

    logp: NDArray[np.float64]
    params: dict[str, float]
    power_law_limit: bool = False


def _fit_exponential(x, w, xmin) -> _Fitted:
    excess = float(np.dot(w, x - xmin) / w.sum())
    if excess <= 0:
        raise FitError("every tail value equals xmin: the exponential cannot be fitted")
    lam = math.log1p(1.0 / excess)
    logp = math.log(-math.expm1(-lam)) - lam * (x - xmin)
    return _Fitted(logp, {"lambda": lam})


def _log_sf_ratio(u1, u0, a: float, c: float) -> NDArray[np.float64]:
    """ln S(u1) - ln S(u0) for u1 >= u0 >= 0, S(u) = int_u^inf exp(-a t^2 / 2 - c t) dt.

    For a > 0, S(u) is a normal survival function at z = sqrt(a) u + c / sqrt(a). Where z >= 0
    it is written with erfcx, sf(z) = erfcx(z / sqrt 2) e^(-z^2 / 2) / 2, and the exponents'
    difference (z1^2 - z0^2) / 2 = (u1 - u0)(a (u1 + u0) / 2 + c) is formed without
    cancellation, so the ratio stays exact as a -> 0, where it tends to e^(-c (u1 - u0)).
    """
    if a == 0.0:
        return -c * (u1 - u0)
    r = math.sqrt(a)
    z1 = r * u1 + c / r
    z0 = r * u0 + c / r
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        quad = (u1 - u0) * (0.5 * a * (u1 + u0) + c)
        upper = np.log(special.erfcx(z1 / _SQRT2)) - np.log(special.erfcx(z0 / _SQRT2)) - quad
        lower = special.log_ndtr(-z1) - special.log_ndtr(-z0)
    return np.where(z0 >= 0, upper, lower)


def _lognormal_logp(u_lo, u_hi, a: float, c: float) -> NDArray[np.float64]:
    """ln P(x) of the binned, truncated lognormal in natural parameters (a = 1/sigma^2, c)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = _log_sf_ratio(u_hi, u_lo, a, c)
        return _log_sf_ratio(u_lo, 0.0, a, c) + np.log(-np.expm1(inside))


def _fit_lognormal_limit(u_lo, du, w) -> float:
    """MLE of c at a = 0 (the power law the lognormal tends to): the root of a decreasing score."""

    def score(c: float) -> float:
        return float(np.dot(w, du / np.expm1(c * du) - u_lo))

    hi = 1.0
    while score(hi) > 0:
        hi *= 2.0
    lo = hi / 2.0
    while score(lo) < 0:
        lo /= 2.0
    return float(optimize.brentq(score, lo, hi, xtol=1e-14, rtol=1e-14))


def _fit_lognormal(x, w, xmin) -> _Fitted:
    y0 = math.log(xmin - 0.5)
    u_lo = np.log(x - 0.5) - y0
    du = np.log1p(1.0 / (x - 0.5))  # ln((x + 1/2) / (x - 1/2)) without cancellation
    u_hi = u_lo + du
    if not np.any(u_lo > 0):
        raise FitError("every tail value equals xmin: the lognormal cannot be fitted")

    def nll(theta) -> float:
        a, c = float(theta[0]), float(theta[1])
        if a < 0 or (a == 0 and c <= 0):
            return 1e300
        val = -float(np.dot(w, _lognormal_logp(u_lo, u_hi, a, c)))
        return val if math.isfinite(val) else 1e300

    c_lim = _fit_lognormal_limit(u_lo, du, w)
    nll_lim = nll((0.0, c_lim))
    logs = np.log(x)
    mean = float(np.dot(w, logs) / w.sum())
    var = max(float(np.dot(w, (logs - mean) ** 2) / w.sum()), 1e-12)
    # from the moments of ln x, and from just inside the power-law limit
    starts = ([1.0 / var, (y0 - mean) / var], [1e-3 / var, c_lim])
    best = None
    for start in starts:
        res = optimize.minimize(nll, start, method="Nelder-Mead", bounds=_LOGNORMAL_BOUNDS,
                                options={"xatol": 1e-10, "fatol": 1e-10, "maxiter": 4000})
        if best is None or res.fun < best.fun:
            best = res
    a, c = float(best.x[0]), float(best.x[1])
    if a == 0.0 or best.fun >= nll_lim - _LIMIT_RTOL * max(1.0, abs(nll_lim)):
        return _Fitted(_lognormal_logp(u_lo, u_hi, 0.0, c_lim), {"limit_alpha": 1.0 + c_lim},
                       power_law_limit=True)
    return _Fitted(_lognormal_logp(u_lo, u_hi, a, c),
                   {"mu": y0 - c / a, "sigma": 1.0 / math.sqrt(a)})


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


def _fit_truncated(x, w, xmin, pl_alpha) -> _Fitted:
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
    return _Fitted(-alpha * np.log(x) - lam * x - log_norm, {"alpha": alpha, "lambda": lam})


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
    """Fit alternative ``name`` to the tail of ``fit`` and test it against the power law.

    A lognormal whose best fit is its power-law limit comes back ``degenerate``, with a note;
    R, the normalised R and p are still those of the Vuong test against that limit.
    """
    x, w = _tail(tab, fit.xmin)
    logp_pl = fit.distribution.logpmf(x)
    fitter = ALTERNATIVES[name]
    if name == "truncated_power_law":
        logp_alt, params, _ = fitter(x, w, fit.xmin, fit.alpha)
        R = float(np.dot(w, logp_pl - logp_alt))
        R = min(R, 0.0)  # lam = 0 is admissible: the larger model never fits worse
        _, norm, _ = vuong(logp_pl, logp_alt, w)
        p = float(stats.chi2.sf(-2.0 * R, df=1)) if R < 0 else 1.0
        return Comparison(name, R, norm, p, params, nested=True)
    logp_alt, params, limit = fitter(x, w, fit.xmin)
    R, norm, p = vuong(logp_pl, logp_alt, w)
    if not limit:
        return Comparison(name, R, norm, p, params, nested=False)
    verdict = ("the power law fits better than any lognormal" if p <= 0.1 and R > 0
               else "the comparison cannot tell them apart")
    note = (f"the {name} degenerated into a power law (mu -> -inf, sigma -> inf; limit exponent "
            f"{params['limit_alpha']:.4f}): {verdict}")
    return Comparison(name, R, norm, p, params, nested=False, degenerate=True, note=note)


ALTERNATIVES: dict[str, Callable] = {
    "exponential": _fit_exponential,
    "lognormal": _fit_lognormal,
    "truncated_power_law": _fit_truncated,
}
