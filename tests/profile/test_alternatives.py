"""The lognormal alternative: its power-law limit on CSN's words, and recovery of a real one.

References are independent of the implementation: the binned, truncated lognormal's likelihood
from scipy.stats.norm.logsf in (mu, sigma), and the closed forms of its a = 1/sigma^2 -> 0 limit.
"""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from hotshard.profile.fit import Comparison, fit_power_law
from hotshard.render import fit_summary
from tests.conftest import shared


def tail_hist(x, xmin):
    values, counts = np.unique(x[x >= xmin], return_counts=True)
    return values.astype(float), counts.astype(float)


def ref_loglik(x, w, xmin, mu, sigma):
    """ln L of p(x) = [F(x+1/2) - F(x-1/2)] / [1 - F(xmin-1/2)], F the lognormal CDF."""
    logsf = stats.norm(mu, sigma).logsf
    lo, hi, top = logsf(np.log(x - 0.5)), logsf(np.log(x + 0.5)), logsf(math.log(xmin - 0.5))
    return float(np.dot(w, lo + np.log(-np.expm1(hi - lo)) - top))


def limit_loglik(x, w, xmin, alpha):
    """ln L of the limit: the continuous power law t^-alpha binned the same way."""
    b = alpha - 1.0
    return float(np.dot(w, np.log((x - 0.5) ** -b - (x + 0.5) ** -b) + b * math.log(xmin - 0.5)))


def limit_score(x, w, xmin, alpha):
    """d ln L / d(1/sigma^2) at the limit, in closed form.

    With u = ln x - ln(xmin - 1/2) the density is exp(-a u^2/2 - c u) on u >= 0, c = alpha - 1.
    At a = 0, S(u) = int_u^inf e^(-ct) dt and dS/da = -S(u) (u^2 + 2u/c + 2/c^2) / 2.
    """
    c = alpha - 1.0
    y0 = math.log(xmin - 0.5)
    u_lo, u_hi = np.log(x - 0.5) - y0, np.log(x + 0.5) - y0
    s_lo, s_hi = np.exp(-c * u_lo), np.exp(-c * u_hi)

    def m2(u):
        return u * u + 2 * u / c + 2 / c**2

    d_bin = -0.5 * (s_lo * m2(u_lo) - s_hi * m2(u_hi)) / (s_lo - s_hi)
    return float(np.dot(w, d_bin + 1 / c**2))


# --- CSN's words: the lognormal's best fit is its power-law limit ----------------------------

@pytest.fixture(scope="module")
def words_fit():
    x = np.loadtxt(shared("csn", "words.txt"), dtype=np.int64)
    return x, fit_power_law(x, compare=["lognormal"])


def test_words_lognormal_degenerates_into_a_power_law(words_fit):
    _, fit = words_fit
    c = fit.comparisons[0]
    assert c.degenerate
    assert set(c.parameters) == {"limit_alpha"}  # no (mu, sigma): none is the fit
    # the limit is a power law binned from the continuous one; its exponent is the discrete
    # fit's to within the fit's standard error
    assert abs(c.parameters["limit_alpha"] - fit.alpha) < fit.alpha_se
    # the Vuong test is still run against the limit: two power laws, nothing to choose
    assert abs(c.normalized_R) < 0.5
    assert c.p_value > 0.5
    assert c.favours == "neither"
    assert "degenerated into a power law" in c.note
    assert "cannot tell them apart" in c.note


def test_words_no_lognormal_beats_its_limit(words_fit):
    x, fit = words_fit
    v, w = tail_hist(x, fit.xmin)
    alpha = fit.comparisons[0].parameters["limit_alpha"]
    best = limit_loglik(v, w, fit.xmin, alpha)
    # the limit's exponent maximises the limit's likelihood
    for step in (-1e-3, 1e-3):
        assert limit_loglik(v, w, fit.xmin, alpha + step) < best
    # moving off the limit towards finite sigma lowers the likelihood ...
    assert limit_score(v, w, fit.xmin, alpha) < 0
    # ... and the points the old optimizer (mu -37343, sigma 198) and powerlaw 2.0 (mu -724,
    # sigma 27.7) stopped at, each a step on the way to the limit, lie below it
    for mu, sigma in ((-37343.0, 198.0), (-723.88, 27.66), (-20.0, 5.0), (2.0, 2.0)):
        assert ref_loglik(v, w, fit.xmin, mu, sigma) < best


def test_words_summary_and_dict_say_degenerate(words_fit):
    _, fit = words_fit
    text = fit_summary(fit, "words.txt")
    assert "lognormal degenerated into a power law (mu -> -inf, sigma -> inf" in text
    assert "cannot tell them apart" in text
    assert "fitted" not in text.split("vs lognormal", 1)[1]  # no (mu, sigma) shown as a fit
    out = fit.to_dict()["compare"]["lognormal"]
    assert out["degenerate"] is True
    assert "degenerated into a power law" in out["note"]
    assert "mu" not in out["parameters"] and "sigma" not in out["parameters"]


def test_a_degenerate_alternative_is_never_favoured():
    # its "fit" is a power law: a significant R < 0 says which power law, not "lognormal"
    c = Comparison("lognormal", -30.0, -3.0, 0.003, {"limit_alpha": 2.0}, nested=False,
                   degenerate=True, note="...")
    assert c.favours == "neither"
    assert Comparison("lognormal", 30.0, 3.0, 0.003, {}, False, degenerate=True).favours == \
        "power_law"
    assert Comparison("lognormal", -30.0, -3.0, 0.003, {}, False).favours == "lognormal"


# --- a real lognormal is still fitted, and recovered -----------------------------------------

def observed_se(v, w, xmin, mu, sigma):
    """Standard errors of (mu, sigma) from the inverse of the observed information."""
    theta = np.array([mu, sigma])
    h = 1e-4 * np.maximum(1.0, np.abs(theta))

    def f(t):
        return ref_loglik(v, w, xmin, t[0], t[1])

    hess = np.empty((2, 2))
    for i in range(2):
        for j in range(2):
            ei, ej = np.eye(2)[i] * h[i], np.eye(2)[j] * h[j]
            hess[i, j] = (f(theta + ei + ej) - f(theta + ei - ej) - f(theta - ei + ej)
                          + f(theta - ei - ej)) / (4 * h[i] * h[j])
    return np.sqrt(np.diag(np.linalg.inv(-hess)))


@pytest.mark.parametrize(
    ("mu", "sigma", "xmin", "n"),
    [(3.0, 1.0, 1, 5000), (1.0, 0.8, 1, 3000), (2.0, 1.5, 10, 20000), (0.0, 2.5, 3, 20000)],
)
def test_recovers_a_lognormal(mu, sigma, xmin, n):
    rng = np.random.default_rng(int(100 * mu + 10 * sigma + xmin))
    x = np.round(rng.lognormal(mu, sigma, n)).astype(np.int64)  # the "round" binning
    fit = fit_power_law(x, xmin=xmin, compare=["lognormal"])
    c = fit.comparisons[0]
    assert not c.degenerate and c.note is None
    got_mu, got_sigma = c.parameters["mu"], c.parameters["sigma"]
    v, w = tail_hist(x, xmin)
    # an independent maximiser of the reference likelihood lands on the same point
    ref = optimize.minimize(lambda t: -ref_loglik(v, w, xmin, t[0], math.exp(t[1])),
                            [got_mu + 0.1, math.log(got_sigma) + 0.05], method="Nelder-Mead",
                            options={"xatol": 1e-9, "fatol": 1e-9, "maxiter": 4000})
    se_mu, se_sigma = observed_se(v, w, xmin, got_mu, got_sigma)
    assert abs(ref.x[0] - got_mu) < 1e-3 * se_mu
    assert abs(math.exp(ref.x[1]) - got_sigma) < 1e-3 * se_sigma
    # the MLE is asymptotically normal: |z| < 4 fails with probability 6e-5
    assert abs(got_mu - mu) < 4 * se_mu
    assert abs(got_sigma - sigma) < 4 * se_sigma
    # a true lognormal is not mistaken for a power law
    assert c.favours == "lognormal"


def test_the_light_name_list_matches_the_fitters():
    from hotshard.profile import ALTERNATIVE_NAMES
    from hotshard.profile.alternatives import ALTERNATIVES

    assert set(ALTERNATIVE_NAMES) == set(ALTERNATIVES)
