"""The fitted law's pmf, tails and exact sampler."""

import numpy as np
import pytest
from scipy import special, stats

from hotshard.errors import InputError
from hotshard.profile.powerlaw import DiscretePowerLaw


def test_pmf_sums_to_one_and_matches_definition():
    law = DiscretePowerLaw(2.5, 3)
    x = np.arange(3, 200_000)
    assert law.pmf(x).sum() + law.ccdf(200_000) == pytest.approx(1.0, abs=1e-12)
    assert law.pmf(10) == pytest.approx(10**-2.5 / special.zeta(2.5, 3))
    assert law.pmf([2, 3.5]).tolist() == [0.0, 0.0]


def test_tails_are_consistent():
    law = DiscretePowerLaw(1.9, 7)
    x = np.array([7, 8, 50, 1000])
    assert np.allclose(law.ccdf(x + 1), law.sf(x))
    assert np.allclose(law.cdf(x), 1 - law.sf(x))
    assert law.ccdf(7) == 1.0


@pytest.mark.parametrize(("alpha", "xmin"), [(1.5, 1), (2.0, 1), (2.5, 4), (3.5, 10)])
def test_sampler_matches_pmf_chi_square(alpha, xmin):
    law = DiscretePowerLaw(alpha, xmin)
    n = 200_000
    draws = law.rvs(n, rng=np.random.default_rng(42))
    assert draws.min() >= xmin
    # bins: each of the first values alone, then the rest of the tail pooled (expected >= 5 each)
    edges = np.arange(xmin, xmin + 30)
    observed = np.array([(draws == e).sum() for e in edges] + [(draws >= edges[-1] + 1).sum()])
    expected = n * np.append(law.pmf(edges), law.ccdf(edges[-1] + 1))
    chi2 = ((observed - expected) ** 2 / expected).sum()
    # reject only beyond the 0.9999 quantile of chi-square(30 dof): a fixed, derived bound
    assert chi2 < stats.chi2.ppf(0.9999, df=len(observed) - 1)


def test_sampler_far_tail_beyond_lookup_table():
    # alpha 1.3: P(X >= 65537) is ~3.6%, so the corrected closed-form path is exercised
    law = DiscretePowerLaw(1.3, 1)
    n = 400_000
    draws = law.rvs(n, rng=np.random.default_rng(5))
    for threshold in (70_000, 10**6, 10**8):
        p = float(law.ccdf(threshold))
        k = int((draws >= threshold).sum())
        sd = np.sqrt(n * p * (1 - p))
        assert abs(k - n * p) < 5 * sd


def test_same_seed_same_draws():
    law = DiscretePowerLaw(2.2, 2)
    assert np.array_equal(law.rvs(1000, rng=7), law.rvs(1000, rng=7))


@pytest.mark.parametrize(("alpha", "xmin"), [(1.0, 1), (0.5, 1), (2.0, 0), (2.0, 1.5)])
def test_invalid_parameters(alpha, xmin):
    with pytest.raises(InputError):
        DiscretePowerLaw(alpha, xmin)
