"""Key samplers against their exact pmfs (chi-square, fixed seeds, derived bounds)."""

import numpy as np
import pytest
from scipy import stats

from hotshard.errors import InputError
from hotshard.workload import sampler as S


def chi_square_ok(sampler, n=400_000, seed=1, alpha=1e-4):
    """Pearson chi-square of n draws against sampler.weights(); bins with expected < 5 pooled.

    The bound is the (1 - alpha) quantile of chi-square with (bins - 1) dof: a test that fails
    with probability 1e-4 under a correct sampler, whatever the seed.
    """
    keys = sampler.sample(n, np.random.default_rng(seed))
    w = sampler.weights()
    observed = np.bincount(keys, minlength=w.size).astype(float)
    expected = w * n
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] < 5:
        obs, exp = obs[:-1], exp[:-1]
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    return chi2 < stats.chi2.isf(alpha, obs.size - 1), chi2


@pytest.mark.parametrize("s", [0.5, 0.99, 1.5, 2.5])
def test_zipf_matches_exact_pmf(s):
    ok, chi2 = chi_square_ok(S.zipf(s, 2000))
    assert ok, chi2


def test_zipf_pmf_is_the_finite_zipf():
    w = S.zipf(0.99, 1000).weights()
    ranks = np.arange(1, 1001)
    assert np.allclose(w, ranks**-0.99 / np.sum(ranks**-0.99))


@pytest.mark.parametrize("sampler", [
    S.uniform(500), S.hotspot(0.2, 0.8, 1000), S.latest(1000), S.latest(300, 1.3),
    S.from_weights([5.0, 1.0, 1.0, 3.0, 0.0, 2.0, 1.0]),
    S.from_weights(np.floor(np.random.default_rng(3).pareto(1.2, 5000) + 1)),
], ids=["uniform", "hotspot", "latest", "latest-1.3", "weights-small", "weights-pareto"])
def test_samplers_match_their_weights(sampler):
    ok, chi2 = chi_square_ok(sampler)
    assert ok, chi2


def test_from_weights_with_key_ids():
    smp = S.from_weights([1.0, 0.0, 3.0], keys=[70, 80, 90])
    keys = smp.sample(100_000, 4)
    assert set(np.unique(keys)) == {70, 90}
    share = (keys == 90).mean()
    assert abs(share - 0.75) < 5 * np.sqrt(0.75 * 0.25 / 100_000)


def test_from_weights_groups_equal_weights_into_classes():
    weights = np.repeat([100.0, 10.0, 1.0], [3, 1000, 10**6])
    smp = S.from_weights(weights)
    assert smp.n_classes == 3
    assert smp.n_keys == weights.size


def test_scrambled_zipfian_reproduces_ycsb():
    # REFERENCES.md (YCSB issues #1495, #1305): with 1e6 keys YCSB's top key gets 3.8% and the
    # top 1000 keys 29.9% of requests, against 6.5% and 50.2% for an exact Zipf(0.99)
    n = 4_000_000
    keys = S.scrambled_zipfian(10**6).sample(n, 5)
    counts = np.sort(np.bincount(keys))[::-1]
    assert abs(counts[0] / n - 0.038) < 0.001
    assert abs(counts[:1000].sum() / n - 0.299) < 0.003
    exact = S.zipf(0.99, 10**6).weights()
    assert exact[0] == pytest.approx(0.065, abs=0.001)
    assert exact[:1000].sum() == pytest.approx(0.502, abs=0.001)


def test_ycsb_fnv_hash_matches_java():
    from hotshard.workload._kernels import fnv1_64_of_longs

    # FNV-1 64 of the eight bytes of 0: a known constant, and |h| as Java Math.abs does
    h = np.uint64(0xCBF29CE484222325)
    for _ in range(8):
        h = np.uint64((int(h) * 1099511628211) % 2**64)  # xor with octet 0 is a no-op
    expected = int(h) - 2**64 if int(h) >= 2**63 else int(h)
    assert fnv1_64_of_longs(np.array([0], dtype=np.int64))[0] == abs(expected)


def test_same_seed_same_keys():
    for smp in (S.zipf(1.1, 10**5), S.from_weights(np.arange(1.0, 50.0)), S.uniform(10)):
        assert np.array_equal(smp.sample(10_000, 42), smp.sample(10_000, 42))


@pytest.mark.parametrize(("build", "message"), [
    (lambda: S.zipf(0, 10), "s must be > 0"),
    (lambda: S.zipf(-1, 10), "s must be > 0"),
    (lambda: S.uniform(0), "n_keys must be an integer >= 1"),
    (lambda: S.hotspot(0, 0.5, 10), "frac_keys"),
    (lambda: S.from_weights([]), "empty"),
    (lambda: S.from_weights([1, -1]), ">= 0"),
    (lambda: S.from_weights([0, 0]), "not all be 0"),
])
def test_bad_parameters(build, message):
    with pytest.raises(InputError, match=message):
        build()
