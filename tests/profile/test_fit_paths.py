"""The two ways through the xmin scan agree: numpy (vectorized, small fits) and numba (compiled).

A small fit runs in numpy so that a command-line fit never loads numba (~0.5 s) or scipy; big
scans and the bootstrap use the compiled kernels. Both must give the same fit: the same xmin
exactly, alpha and the KS distance to 1e-9 relative (they differ by rounding, ~1e-12).
"""

import math
import subprocess
import sys

import numpy as np
import pytest

from hotshard.errors import FitError, InputError
from hotshard.profile import _kernels, _vector
from hotshard.profile import fit as fit_module
from hotshard.profile.fit import fit_power_law, tabulate
from hotshard.profile.powerlaw import DiscretePowerLaw
from tests.conftest import shared

REL = 1e-9


def both(*args, **kwargs):
    """The same fit by each engine."""
    return (fit_power_law(*args, engine="numpy", **kwargs),
            fit_power_law(*args, engine="numba", **kwargs))


def assert_same_fit(a, b):
    assert a.xmin == b.xmin
    assert (a.n, a.n_tail, a.candidates, a.xmax) == (b.n, b.n_tail, b.candidates, b.xmax)
    assert a.alpha == pytest.approx(b.alpha, rel=REL)
    assert a.alpha_se == pytest.approx(b.alpha_se, rel=REL)
    assert a.ks == pytest.approx(b.ks, rel=REL)


def zipf(alpha, n, seed):
    return np.random.default_rng(seed).zipf(alpha, n)


# --- published data (CSN 2009 Table 3), both paths --------------------------------------------

def test_words_both_paths_give_the_published_fit():
    a, b = both(np.loadtxt(shared("csn", "words.txt"), dtype=np.int64))
    assert_same_fit(a, b)
    assert a.xmin == 7
    assert a.alpha == pytest.approx(1.95, abs=0.01)


def test_terrorism_both_paths_give_the_published_fit():
    a, b = both(np.loadtxt(shared("csn", "terrorism.txt"), dtype=np.int64))
    assert_same_fit(a, b)
    assert a.xmin == 12
    assert a.alpha == pytest.approx(2.4, abs=0.05)


# --- synthetic data ---------------------------------------------------------------------------

@pytest.mark.parametrize(("alpha", "n", "seed"),
                         [(2.5, 10**6, 1), (2.0, 100_000, 2), (3.5, 50_000, 3), (1.7, 20_000, 4)])
def test_paths_agree_on_seeded_zipf(alpha, n, seed):
    assert_same_fit(*both(zipf(alpha, n, seed)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_paths_agree_under_a_lognormal_body(seed):
    rng = np.random.default_rng(seed)
    body = np.round(rng.lognormal(1.0, 0.6, 1500)).astype(np.int64) + 1
    tail = np.floor(8 * (1 - rng.random(600)) ** (-1 / 1.3)).astype(np.int64)
    assert_same_fit(*both(np.concatenate([body, np.minimum(tail, 3000)])))


@pytest.mark.parametrize("xmin", [1, 3, 7, 50])
def test_paths_agree_at_a_fixed_xmin(xmin):
    a, b = both(zipf(2.2, 30_000, 5), xmin=xmin)
    assert_same_fit(a, b)
    assert a.xmin_fixed and a.candidates == 1


def test_paths_agree_at_an_unobserved_fixed_xmin():
    x = zipf(2.2, 30_000, 6)
    x = x[x != 40]
    assert_same_fit(*both(x, xmin=40))


@pytest.mark.parametrize(("alpha", "xmin", "xmax"), [(1.8, 1, 500), (2.5, 3, 2000), (1.3, 5, 300)])
def test_paths_agree_with_truncation(alpha, xmin, xmax):
    x = DiscretePowerLaw(alpha, xmin, xmax).rvs(20_000, rng=np.random.default_rng(xmax))
    a, b = both(x, xmax=xmax)
    assert_same_fit(a, b)
    assert a.xmax == xmax


def test_paths_agree_with_truncation_at_a_fixed_xmin():
    x = DiscretePowerLaw(2.0, 4, 1000).rvs(5_000, rng=np.random.default_rng(9))
    assert_same_fit(*both(x, xmin=4, xmax=1000))


def test_paths_agree_on_a_histogram():
    values = np.array([1, 2, 3, 5, 8, 13, 400, 10**6])
    counts = np.array([5000, 1300, 600, 210, 90, 40, 3, 1])
    assert_same_fit(*both(values, counts))


# --- edge cases -------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_all_values_equal_is_a_fit_error_on_both_paths(engine):
    with pytest.raises(FitError, match="two distinct values"):
        fit_power_law([4] * 100, engine=engine)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_a_single_value_tail_is_a_fit_error_on_both_paths(engine):
    # the tail from the fixed xmin holds one value: alpha = inf, no fit
    with pytest.raises(FitError, match="no power law"):
        fit_power_law([3] * 5 + [7] * 20, xmin=7, engine=engine)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_a_tail_flatter_than_alpha_1_is_a_fit_error_on_both_paths(engine):
    # counts growing with the value below xmax: every candidate sits at the exponent floor
    with pytest.raises(FitError, match="no power law"):
        fit_power_law(np.arange(1, 101), np.arange(1, 101), xmax=100, engine=engine)


def test_paths_agree_on_a_tail_just_above_min_tail():
    a, b = both([5] * 20 + [6])  # one candidate, a tight tail: alpha ~ 17
    assert_same_fit(a, b)
    assert a.alpha > 10


def test_paths_agree_on_a_tiny_tail():
    x = np.array([1] * 5 + [2, 3, 5, 8, 13, 21, 34, 55, 89, 144])
    assert_same_fit(*both(x))


def test_paths_agree_when_most_tails_are_degenerate():
    # large xmins whose tails sit almost all at xmin: exponents in the hundreds to thousands
    x = np.concatenate([zipf(2.0, 2_000, 7), [5000] * 40 + [5001], [9000] * 12 + [9001]])
    assert_same_fit(*both(x))


def test_unknown_engine_is_an_input_error():
    with pytest.raises(InputError, match="engine must be one of auto, numpy, numba, got 'gpu'"):
        fit_power_law([1, 2, 3], engine="gpu")


def test_bootstrap_p_value_is_the_same_on_both_paths():
    x = np.loadtxt(shared("csn", "terrorism.txt"), dtype=np.int64)
    a, b = both(x, bootstrap=12, seed=3, workers=1)
    assert a.gof.p_value == b.gof.p_value


# --- the numpy primitives against the compiled ones -------------------------------------------

def test_zeta_and_derivatives_match_the_kernel():
    s = np.array([1.01, 1.5, 1.95, 2.336, 3.5, 7.0, 25.0, 300.0, 1e4] * 7)
    q = np.repeat([1.0, 2.0, 7.0, 12.0, 3684.0, 1e7, 8936.0], 9)
    ours = np.array(_vector.zeta3_scaled(s, q)).T
    ref = np.array([_kernels.zeta3_scaled(a, b) for a, b in zip(s, q, strict=True)])
    np.testing.assert_allclose(ours, ref, rtol=1e-13)
    np.testing.assert_allclose(_vector.zeta3_scaled(s, q, derivs=False)[0], ref[:, 0],
                               rtol=1e-13)


def test_zeta_matches_scipy():
    from scipy import special

    s = np.array([1.01, 1.5, 2.5, 7.0])
    q = np.array([1.0, 7.0, 12.0, 3684.0])
    np.testing.assert_allclose(_vector.hurwitz_zeta(s, q), special.zeta(s, q), rtol=1e-13)


@pytest.mark.parametrize("xmax", [-1.0, 50.0, 20_000.0])
def test_mle_matches_the_kernel(xmax):
    rng = np.random.default_rng(11)
    xmin = np.floor(rng.uniform(1, 40 if xmax == 50.0 else 5000, 400))
    mean_log = np.log(xmin) + rng.uniform(1e-9, 2.0, xmin.size)
    mean_log[:3] = np.log(xmin[:3])  # tails all at xmin: alpha = inf
    ours = _vector.mle_alpha(mean_log, xmin, xmax)
    ref = np.array([_kernels.mle_alpha(m, x, xmax) for m, x in zip(mean_log, xmin, strict=True)])
    assert np.array_equal(np.isinf(ours), np.isinf(ref))
    assert np.isinf(ours[:3]).all()
    finite = np.isfinite(ref)
    np.testing.assert_allclose(ours[finite], ref[finite], rtol=1e-11)
    if xmax > 0:  # a truncated tail flatter than alpha = 1 sits at the floor on both paths
        assert np.array_equal(ours == _vector.ALPHA_MIN_TRUNCATED,
                              ref == _vector.ALPHA_MIN_TRUNCATED)


@pytest.mark.parametrize("xmax", [-1.0, 3000.0])
def test_ks_distances_match_the_unpruned_kernel(xmax):
    x = np.minimum(zipf(1.9, 50_000, 12), int(xmax) if xmax > 0 else 10**9)
    tab = tabulate(x)
    suffix, logsum = _vector.tail_sums(tab.values, tab.counts)
    cands = np.flatnonzero(suffix[:-2] >= 10)
    alphas = _vector.mle_alpha(logsum[cands] / suffix[cands],
                               tab.values[cands].astype(float), xmax)
    ok = np.isfinite(alphas) & (alphas > _vector.alpha_floor(xmax))
    ours = _vector.ks_distances(tab.values, suffix, cands[ok], alphas[ok], xmax)
    ref = [_kernels.ks_distance(tab.values, suffix, k, a, math.inf, xmax)
           for k, a in zip(cands[ok], alphas[ok], strict=True)]
    np.testing.assert_allclose(ours, ref, rtol=REL)


def test_chunking_does_not_change_the_result(monkeypatch):
    x = zipf(2.0, 100_000, 13)
    whole = fit_power_law(x, engine="numpy")
    monkeypatch.setattr(_vector, "_CHUNK", 97)
    assert fit_power_law(x, engine="numpy") == whole


# --- which path runs --------------------------------------------------------------------------

def test_auto_takes_numpy_for_small_scans_and_numba_above_the_limit(monkeypatch):
    calls = []
    real = _vector.scan_xmin
    monkeypatch.setattr(_vector, "scan_xmin", lambda *a: calls.append(1) or real(*a))
    x = zipf(2.5, 10_000, 14)
    small = fit_power_law(x)
    assert calls == [1]
    monkeypatch.setattr(fit_module, "_VECTOR_MAX_PAIRS", 10)
    big = fit_power_law(x)
    assert calls == [1]  # the compiled kernels ran
    assert_same_fit(small, big)


def test_a_small_fit_imports_neither_numba_nor_scipy(tmp_path):
    data = tmp_path / "x.txt"
    np.savetxt(data, zipf(2.5, 100_000, 15), fmt="%d")
    code = (
        "import sys\n"
        "from hotshard.cli import main\n"
        f"assert main(['fit', {str(data)!r}]) == 0\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'scipy'))\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
