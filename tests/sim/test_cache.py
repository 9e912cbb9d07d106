"""Che's approximation against a direct LRU simulation, closed forms and its own class grouping."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.sim.cache import che_hit_rates


def lru_hit_rate(keys: list[int], capacity: int, warmup: int) -> float:
    """Hit rate of a plain LRU cache over ``keys[warmup:]``, after ``keys[:warmup]`` fill it."""
    cache: OrderedDict[int, None] = OrderedDict()
    hits = 0
    for i, k in enumerate(keys):
        if k in cache:
            cache.move_to_end(k)
            hits += i >= warmup
        else:
            cache[k] = None
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits / (len(keys) - warmup)


def zipf_weights(s: float, n: int) -> np.ndarray:
    w = np.arange(1, n + 1, dtype=np.float64) ** -s
    return w / w.sum()


@pytest.mark.parametrize("s", [0.8, 1.2])
@pytest.mark.parametrize(("n_keys", "cache_share"), [(10_000, 0.01), (10_000, 0.10),
                                                     (100_000, 0.01)])
def test_che_matches_a_simulated_lru_under_zipf(s, n_keys, cache_share):
    # Independent references (what Che assumes and what the simulator's key sampler draws):
    # 1e6 requests measured after 2e5 that fill the cache.
    rng = np.random.default_rng(20261202)
    w = zipf_weights(s, n_keys)
    warmup, measured = 200_000, 1_000_000
    keys = rng.choice(n_keys, warmup + measured, p=w).tolist()
    capacity = int(n_keys * cache_share)
    simulated = lru_hit_rate(keys, capacity, warmup)
    predicted = che_hit_rates(w, None, capacity).hit_rate
    # Tolerance 0.005 absolute. Under independent references Che's error for Zipf popularity
    # is well under a percent of hit rate once the cache holds ~100 entries or more (Che et
    # al. 2002; Fricker, Robert and Roberts 2012 prove it vanishes as the cache grows; here it
    # is below 5e-4 in every case). The simulated rate's sampling error is ~5e-4: each request
    # hits with probability ~h, weakly dependent, SE ~ sqrt(h(1-h)/1e6). 0.005 is ten of
    # those, yet catches a solver off by a few percent of T_C. (Real traces, with temporal
    # locality that independent references lack, stray further from Che at small caches.)
    assert abs(predicted - simulated) < 0.005, (predicted, simulated)


def test_uniform_popularity_gives_capacity_over_keys_exactly():
    # N equally likely keys: N (1 - e^(-T/N)) = C, so every key hits with probability C/N.
    n, c = 50_000, 1234
    model = che_hit_rates(np.full(n, 1.0 / n), None, c)
    np.testing.assert_allclose(model.hit_prob, c / n, rtol=1e-12)
    assert model.hit_rate == pytest.approx(c / n, rel=1e-12)
    assert model.characteristic_time == pytest.approx(-n * math.log1p(-c / n), rel=1e-12)


def test_uniform_one_class_holds_two_billion_keys():
    # The incident's load test: uniform keys over 2 billion messages, a cache of 1e6 entries
    model = che_hit_rates([5000 / 2e9], [2e9], 1e6)
    assert model.hit_rate == pytest.approx(1e6 / 2e9, rel=1e-9)


def test_uniform_lru_simulation_agrees():
    rng = np.random.default_rng(7)
    n, c = 2000, 500
    keys = rng.integers(0, n, 300_000).tolist()
    simulated = lru_hit_rate(keys, c, 50_000)
    # SE of the simulated rate ~ sqrt(0.25 * 0.75 / 250_000) ~ 9e-4; 5 SE
    assert che_hit_rates(np.ones(n), None, c).hit_rate == pytest.approx(simulated, abs=5e-3)


def test_classes_give_the_same_answer_as_listing_every_key():
    rng = np.random.default_rng(3)
    class_rates = np.array([0.3, 0.05, 0.01, 1e-3, 1e-5])
    mult = np.array([1, 4, 30, 200, 5000])
    every_key = np.repeat(class_rates, mult)
    rng.shuffle(every_key)
    for capacity in (0.5, 3, 40, 700, 5000):
        grouped = che_hit_rates(class_rates, mult, capacity)
        listed = che_hit_rates(every_key, None, capacity)
        assert grouped.characteristic_time == pytest.approx(listed.characteristic_time,
                                                            rel=1e-10)
        assert grouped.hit_rate == pytest.approx(listed.hit_rate, rel=1e-10)
        np.testing.assert_allclose(grouped.hit_probability(every_key), listed.hit_prob,
                                   rtol=1e-10)


def test_occupancy_equals_capacity():
    rates = zipf_weights(1.0, 1000)
    model = che_hit_rates(rates, None, 37)
    assert model.hit_prob.sum() == pytest.approx(37, rel=1e-10)


def test_rate_unit_does_not_change_hit_probabilities():
    w = zipf_weights(0.9, 5000)
    a = che_hit_rates(w, None, 100)
    b = che_hit_rates(w * 3000.0, None, 100)
    np.testing.assert_allclose(a.hit_prob, b.hit_prob, rtol=1e-10)
    assert a.characteristic_time == pytest.approx(3000.0 * b.characteristic_time, rel=1e-10)


def test_zero_capacity_never_hits():
    model = che_hit_rates([0.5, 0.25], [1, 2], 0)
    assert model.hit_rate == 0
    assert np.all(model.hit_prob == 0)
    assert model.characteristic_time == 0


def test_capacity_of_every_key_always_hits_in_steady_state():
    model = che_hit_rates([0.5, 0.25, 0.0], [1, 2, 10], 3)  # rate-0 keys are never cached
    assert model.hit_rate == 1
    np.testing.assert_array_equal(model.hit_prob, [1, 1, 0])
    assert math.isinf(model.characteristic_time)
    assert model.to_dict()["characteristic_time"] is None


def test_nearly_full_cache_of_a_huge_tail_solves():
    model = che_hit_rates([1e-12, 1.0], [2e9, 10], 2e9 + 9.5)
    assert 0.5 < model.hit_prob[0] < 1
    assert (model.hit_prob * [2e9, 10]).sum() == pytest.approx(2e9 + 9.5, rel=1e-12)


@pytest.mark.parametrize(("rates", "mult", "capacity", "message"), [
    ([0.5, -0.1], None, 1, "rates must be finite and >= 0, got -0.1"),
    ([0.5, np.nan], None, 1, "rates must be finite"),
    ([0.5, 0.5], [1, -2], 1, "multiplicity must be finite and >= 0, got -2"),
    ([0.5, 0.5], [1], 1, "same length"),
    ([], None, 1, "rates is empty"),
    ([0.0, 0.0], None, 1, "no traffic"),
    ([0.5], None, -1, "capacity must be"),
    ([0.5], None, math.inf, "capacity must be"),
])
def test_bad_input_is_named(rates, mult, capacity, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        che_hit_rates(rates, mult, capacity)
