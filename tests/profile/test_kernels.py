"""The compiled Hurwitz zeta against independent references (scipy, mpmath)."""

import math

import mpmath
import numpy as np
import pytest
from scipy import special

from hotshard.profile import _kernels

GRID = [(s, q) for s in (1.01, 1.5, 1.95, 2.336, 3.5, 7.0, 25.0) for q in (1, 2, 7, 12, 3684, 1e7)]


@pytest.mark.parametrize(("s", "q"), GRID)
def test_zeta_matches_scipy(s, q):
    ours = _kernels.hurwitz_zeta(s, float(q))
    ref = special.zeta(s, q)
    if ref == 0.0:  # underflows in scipy; the scaled form still holds it
        return
    assert ours == pytest.approx(ref, rel=1e-13)


@pytest.mark.parametrize(("s", "q"), [(1.2, 1), (1.95, 7), (2.5, 40), (3.3, 3684), (12.0, 2)])
def test_derivatives_match_mpmath(s, q):
    z, z1, z2 = _kernels.hurwitz_zeta3(s, float(q))
    mpmath.mp.dps = 30
    assert z1 == pytest.approx(float(mpmath.zeta(s, q, 1)), rel=1e-11)
    assert z2 == pytest.approx(float(mpmath.zeta(s, q, 2)), rel=1e-11)


def test_scaled_form_survives_underflow():
    # 8936^-300 underflows a double, but the ratio zeta'/zeta the MLE needs does not.
    z, z1, _ = _kernels.zeta3_scaled(300.0, 8936.0)
    assert math.isfinite(z) and z > 0
    assert -z1 / z == pytest.approx(math.log(8936.0), rel=1e-3)


def test_mle_solves_the_likelihood_equation():
    # E_alpha[ln X] = mean ln x at the returned alpha (CSN eq. 3.5), checked with mpmath.
    xmin, mean_log = 5.0, 2.3
    alpha = _kernels.mle_alpha(mean_log, xmin)
    mpmath.mp.dps = 30
    expected_log = -mpmath.zeta(alpha, xmin, 1) / mpmath.zeta(alpha, xmin)
    assert float(expected_log) == pytest.approx(mean_log, rel=1e-12)


def test_mle_of_a_degenerate_tail_is_infinite():
    assert _kernels.mle_alpha(math.log(7.0), 7.0) == math.inf
    assert np.isinf(_kernels.mle_alpha(math.log(8936.0) + 1e-9, 8936.0))
