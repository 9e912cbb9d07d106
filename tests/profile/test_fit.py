"""The power-law fit: published tables, an independent brute-force reference, recovery."""

import numpy as np
import pytest
from scipy import optimize, special

from hotshard.errors import FitError, InputError
from hotshard.profile.fit import fit_power_law, tabulate
from tests.conftest import shared


def load_hist(path):
    data = np.loadtxt(path, dtype=np.int64, skiprows=1)
    return data[:, 0], data[:, 1]


# --- CSN 2009 Table 3 on their own data (shared/data/csn, README) ---------------------------

def test_moby_dick_words_matches_csn():
    fit = fit_power_law(np.loadtxt(shared("csn", "words.txt"), dtype=np.int64))
    assert fit.xmin == 7
    assert fit.alpha == pytest.approx(1.95, abs=0.01)
    assert fit.n_tail == 2958  # CSN Table 3


def test_terrorism_matches_csn():
    fit = fit_power_law(np.loadtxt(shared("csn", "terrorism.txt"), dtype=np.int64))
    assert fit.xmin == 12
    assert fit.alpha == pytest.approx(2.4, abs=0.05)
    assert fit.n_tail == 547  # CSN Table 3


def test_weblinks_histogram_at_published_xmin():
    values, counts = load_hist(shared("csn", "weblinks.hist"))
    fit = fit_power_law(values, counts, xmin=3684)
    assert fit.alpha == pytest.approx(2.336, abs=0.01)
    assert fit.n_tail == 28986  # CSN Table 3
    assert fit.n == 241_428_853  # degree-0 pages dropped, as CSN do
    assert fit.zeros_dropped == 35_159_835


# --- exactness against a brute-force implementation of the same definition -----------------

def brute_force_fit(x, min_tail=10):
    """Reference: every candidate fully evaluated with scipy, no pruning, no shortcuts."""
    values = np.unique(x)
    best = None
    for xmin in values[:-1]:
        tail = x[x >= xmin]
        if tail.size < min_tail:
            continue
        sum_log = np.log(tail).sum()

        def nll(a, tail=tail, xmin=xmin, sum_log=sum_log):
            return tail.size * np.log(special.zeta(a, xmin)) + a * sum_log

        alpha = optimize.minimize_scalar(nll, bounds=(1.0001, 40), method="bounded",
                                         options={"xatol": 1e-10}).x
        grid = np.arange(xmin, tail.max() + 2)
        model_cdf = 1 - special.zeta(alpha, grid + 1) / special.zeta(alpha, xmin)
        data_cdf = np.searchsorted(np.sort(tail), grid, side="right") / tail.size
        ks = np.max(np.abs(model_cdf - data_cdf))
        if best is None or ks < best[2]:
            best = (int(xmin), alpha, ks)
    return best


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scan_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    # a lognormal body with a power-law tail: xmin is not trivially 1
    body = np.round(rng.lognormal(1.0, 0.6, 1500)).astype(np.int64) + 1
    tail = np.floor(8 * (1 - rng.random(600)) ** (-1 / 1.3)).astype(np.int64)
    x = np.concatenate([body, np.minimum(tail, 3000)])
    ref_xmin, ref_alpha, ref_ks = brute_force_fit(x)
    fit = fit_power_law(x)
    assert fit.xmin == ref_xmin
    assert fit.alpha == pytest.approx(ref_alpha, abs=1e-6)
    # the reference alpha is only good to ~1e-7 (bounded scalar search); KS moves by less than
    # 0.1 per unit of alpha here, so the distances agree to 1e-7
    assert fit.ks == pytest.approx(ref_ks, abs=1e-7)


def test_histogram_and_raw_observations_agree():
    x = np.loadtxt(shared("csn", "terrorism.txt"), dtype=np.int64)
    values, counts = np.unique(x, return_counts=True)
    assert fit_power_law(values, counts) == fit_power_law(x)


# --- recovery of known parameters (tolerance from the fit's own standard error) -------------

@pytest.mark.parametrize("alpha", [1.5, 2.0, 2.5, 3.0, 3.5])
@pytest.mark.parametrize("xmin", [1, 5])
def test_recovers_alpha_at_known_xmin(alpha, xmin):
    from hotshard.profile.powerlaw import DiscretePowerLaw

    rng = np.random.default_rng(int(alpha * 100) + xmin)
    x = DiscretePowerLaw(alpha, xmin).rvs(50_000, rng=rng)
    fit = fit_power_law(x, xmin=xmin)
    # the MLE is asymptotically normal with sd alpha_se: |z| < 4 fails with probability 6e-5
    assert abs(fit.alpha - alpha) < 4 * fit.alpha_se
    # and alpha_se matches the asymptotic formula's size, (alpha - 1)/sqrt(n) for large xmin
    assert 0.3 < fit.alpha_se * np.sqrt(fit.n_tail) / (alpha - 1) < 1.5


@pytest.mark.parametrize("alpha", [1.5, 2.5, 3.5])
def test_scan_finds_tail_start_under_an_exponential_body(alpha):
    from hotshard.profile.powerlaw import DiscretePowerLaw

    rng = np.random.default_rng(7)
    true_xmin = 20
    tail = DiscretePowerLaw(alpha, true_xmin).rvs(20_000, rng=rng)
    body = rng.integers(1, true_xmin, 20_000)  # flat body below xmin: clearly not a power law
    fit = fit_power_law(np.concatenate([body, tail]))
    assert abs(fit.xmin - true_xmin) <= 2
    assert abs(fit.alpha - alpha) < 4 * fit.alpha_se


# --- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([], "empty"),
        ([1.5, 2, 3], "integers"),
        ([-1, 2, 3], ">= 0"),
        ([0, 0, 0], "no positive"),
        (["a", "b"], "numbers"),
        ([np.nan, 2.0], "integers"),
    ],
)
def test_malformed_input_is_an_input_error(values, message):
    with pytest.raises(InputError, match=message):
        fit_power_law(values)


def test_all_values_equal_is_a_fit_error():
    with pytest.raises(FitError, match="two distinct values"):
        fit_power_law([4] * 100)


def test_too_few_tail_points_is_a_fit_error():
    with pytest.raises(FitError, match="too few"):
        fit_power_law([1, 2, 3, 4, 5])
    with pytest.raises(FitError, match="choose a smaller xmin"):
        fit_power_law(np.arange(1, 100), xmin=95)


def test_zeros_are_dropped_and_counted():
    tab = tabulate([0, 0, 1, 2, 2, 5])
    assert tab.zeros_dropped == 2
    assert tab.values.tolist() == [1, 2, 5]
    assert tab.counts.tolist() == [1, 2, 1]


def test_histogram_counts_validated():
    with pytest.raises(InputError, match="counts must be >= 0"):
        tabulate([1, 2], [3, -1])
    with pytest.raises(InputError, match="2 values but 1 counts"):
        tabulate([1, 2], [3])


def test_large_values_tabulate_exactly():
    x = np.array([1, 2, 2, 10**12, 10**12, 3 * 10**15], dtype=np.int64)
    tab = tabulate(x)
    assert tab.values.tolist() == [1, 2, 10**12, 3 * 10**15]
    assert tab.counts.tolist() == [1, 2, 2, 1]


def test_unknown_alternative_rejected():
    with pytest.raises(InputError, match="unknown alternative"):
        fit_power_law(np.arange(1, 100), compare=["gamma"])


def test_truncated_fit_matches_brute_force():
    # a profile's tail stops below its head: the law is fitted on [xmin, xmax]
    from hotshard.profile.powerlaw import DiscretePowerLaw

    law = DiscretePowerLaw(1.8, 3, 400)
    x = law.rvs(20_000, rng=np.random.default_rng(11))
    assert x.max() <= 400 and x.min() >= 3
    fit = fit_power_law(x, xmin=3, xmax=400)
    support = np.arange(3, 401, dtype=float)

    def nll(a):
        return x.size * np.log(np.sum(support**-a)) + a * np.log(x).sum()

    ref = optimize.minimize_scalar(nll, bounds=(1.01, 5), method="bounded",
                                   options={"xatol": 1e-10}).x
    assert fit.alpha == pytest.approx(ref, abs=1e-6)
    assert abs(fit.alpha - 1.8) < 4 * fit.alpha_se
    # the untruncated MLE on the same data is biased upward: why profiles truncate
    assert fit_power_law(x, xmin=3).alpha > fit.alpha + 3 * fit.alpha_se


def test_xmax_below_the_data_is_an_error():
    with pytest.raises(InputError, match="above xmax"):
        fit_power_law(np.arange(1, 100), xmax=50)
