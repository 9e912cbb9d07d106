"""Space-Saving top-k over a sliding window: exact when small, the Metwally et al. bounds when not.

True counts come from ``collections.Counter`` over the same stream, independently of the sketch.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter

import numpy as np
import pytest

from hotshard.detect.sketch import HotKeys, SlidingHotKeys, SpaceSaving
from hotshard.errors import InputError

SEED = 20261202


def _zipf_keys(n: int, seed: int = SEED, a: float = 1.3) -> list[str]:
    """A Zipf stream of channel names with far more distinct keys than any capacity used here."""
    ranks = np.random.default_rng(seed).zipf(a, size=n)
    return [f"ch{r}" for r in ranks.tolist()]


def _check_theorem(result: HotKeys, truth: Counter[str]) -> None:
    """Every count brackets the truth within its error and error_bound; no heavy key missing."""
    assert result.total == sum(truth.values())
    reported = {h.key: h for h in result.keys}
    for h in result.keys:
        assert h.count - h.error <= truth[h.key] <= h.count, h
        assert 0 <= h.error <= result.error_bound
        assert h.share == h.count / result.total
    heavy = {key for key, n in truth.items() if n > result.error_bound}
    assert heavy <= reported.keys()
    counts = [h.count for h in result.keys]
    assert counts == sorted(counts, reverse=True)


# --- SpaceSaving -------------------------------------------------------------------------------

def test_sketch_exact_when_keys_fit(rng):
    truth = Counter({f"k{i}": int(n) for i, n in enumerate(rng.integers(1, 50, size=30))})
    stream = [key for key, n in truth.items() for _ in range(n)]
    rng.shuffle(stream)
    sketch = SpaceSaving(30)
    for key in stream:
        sketch.add(key)
    assert sketch.total == len(stream) and sketch.capacity == 30
    assert {k: (c, e) for k, c, e in sketch.items()} == {k: (n, 0) for k, n in truth.items()}
    assert sketch.floor == 0  # full, but nothing was evicted: unseen keys truly have 0


def test_sketch_bounds_on_zipf_stream():
    stream = _zipf_keys(50_000)
    truth = Counter(stream)
    capacity = 64
    assert len(truth) > 20 * capacity
    sketch = SpaceSaving(capacity)
    for key in stream:
        sketch.add(key)
    items = sketch.items()
    assert len(items) == capacity
    assert sum(c for _, c, _ in items) == sketch.total == len(stream)  # counters sum to total
    floor = sketch.floor
    assert floor == min(c for _, c, _ in items) <= len(stream) // capacity
    for key, count, error in items:
        assert count - error <= truth[key] <= count
        assert error <= floor
    monitored = {key for key, _, _ in items}
    assert all(n <= floor for key, n in truth.items() if key not in monitored)


def test_sketch_add_with_count():
    sketch = SpaceSaving(2)
    sketch.add("a", 5)
    sketch.add("b", 3)
    sketch.add("c", 2)  # evicts b (3): count 5, error 3
    assert sketch.items() == [("a", 5, 0), ("c", 5, 3)]
    assert sketch.total == 10


# --- SlidingHotKeys ----------------------------------------------------------------------------

def test_window_exact_when_keys_fit(rng):
    hk = SlidingHotKeys(window_s=10.0, slices=5, capacity=40)
    truth: Counter[str] = Counter()
    times = np.sort(rng.uniform(0.0, 9.9, size=2_000))
    for t in times.tolist():
        key = f"k{int(rng.integers(0, 40))}"
        truth[key] += 1
        hk.add(key, now=t)
    result = hk.top(100, now=9.9)
    assert result.error_bound == 0
    assert {h.key: (h.count, h.error) for h in result.keys} == {k: (n, 0) for k, n in
                                                                 truth.items()}
    assert result.total == 2_000 and result.complete


def test_merge_across_slices_on_zipf_stream():
    """One window of 10 slices, each seeing different traffic; the merged bounds hold exactly."""
    stream = _zipf_keys(60_000)
    window_s, slices, capacity = 10.0, 10, 64
    hk = SlidingHotKeys(window_s=window_s, slices=slices, capacity=capacity)
    times = np.linspace(0.0, window_s, len(stream), endpoint=False).tolist()
    slice_totals: Counter[int] = Counter()
    for i, (key, t) in enumerate(zip(stream, times, strict=True)):
        key = f"{key}-{i * slices // len(stream)}" if key == "ch2" else key  # per-slice heavy key
        stream[i] = key
        slice_totals[int(t // (window_s / slices))] += 1
        hk.add(key, now=t)
    truth = Counter(stream)
    result = hk.top(slices * capacity, now=times[-1])
    assert result.complete and len(result.keys) > capacity
    _check_theorem(result, truth)
    assert 0 < result.error_bound <= sum(math.ceil(n / capacity) for n in slice_totals.values())
    assert sum(n > result.error_bound for n in truth.values()) >= 10  # the theorem has teeth
    one_slice = {h.key: h for h in result.keys}["ch2-3"]  # absent from 9 full sketches
    assert one_slice.count > truth["ch2-3"] and one_slice.error > 0
    top10 = hk.top(10, now=times[-1])
    assert top10.keys == result.keys[:10] and not top10.complete


def test_window_drops_expired_slices():
    """With 1 s slices, traffic at time t is counted until the slice after t + 9 s begins."""
    stream = _zipf_keys(30_000, seed=SEED + 1)
    hk = SlidingHotKeys(window_s=10.0, slices=10, capacity=32)
    times = np.linspace(0.0, 25.0, len(stream), endpoint=False).tolist()
    for key, t in zip(stream, times, strict=True):
        hk.add(key, now=t)
    now = times[-1]  # in slice 24: the window is slices 15..24, i.e. t >= 15.0
    truth = Counter(k for k, t in zip(stream, times, strict=True) if t >= 15.0)
    _check_theorem(hk.top(10 * 32, now=now), truth)


def test_key_hot_only_early_disappears_after_window():
    hk = SlidingHotKeys(window_s=10.0, slices=10, capacity=8)
    for i in range(1_000):
        hk.add("viral", now=i / 1_000)  # all within [0, 1)
    for i in range(200):
        hk.add(f"ch{i % 5}", now=1.0 + i / 25)  # [1, 9)
    assert hk.top(1, now=9.99).keys[0].key == "viral"
    assert hk.hot(0.5, now=9.99) == ["viral"]
    later = hk.top(10, now=0.999 + 10.0)  # window_s after viral's last request
    assert "viral" not in {h.key for h in later.keys}
    assert later.total == 200 and later.error_bound == 0
    assert hk.hot(0.5, now=10.999) == []
    assert hk.top(5, now=100.0).keys == () and hk.top(now=100.0).total == 0


def test_late_adds_land_in_their_slice_or_are_dropped():
    hk = SlidingHotKeys(window_s=10.0, slices=10, capacity=8)
    hk.add("a", now=20.5)
    hk.add("b", now=15.2)  # late but inside the window
    hk.add("c", now=3.0)  # expired long ago
    result = hk.top(10, now=20.5)
    assert {h.key for h in result.keys} == {"a", "b"} and result.total == 2
    assert {h.key for h in hk.top(10, now=25.5).keys} == {"a"}


def test_hot_returns_planted_key_only_with_guaranteed_share(rng):
    background = _zipf_keys(40_000, seed=SEED + 2, a=1.1)  # head ch1 ~ 1/zeta(1.1) = 9.5 %
    stream = ["planted" if rng.random() < 0.2 else key for key in background]
    hk = SlidingHotKeys(window_s=10.0, slices=5, capacity=32)
    times = np.linspace(0.0, 9.0, len(stream)).tolist()
    for key, t in zip(stream, times, strict=True):
        hk.add(key, now=t)
    truth = Counter(stream)
    total = len(stream)
    for min_share in (0.15, 0.1, 0.05, 0.02):
        hot = hk.hot(min_share, now=9.0)
        assert hot[0] == "planted"
        assert all(truth[key] / total >= min_share for key in hot)  # never a false alarm
    assert max(n for key, n in truth.items() if key != "planted") / total < 0.08
    assert hk.hot(0.1, now=9.0) == ["planted"]


def test_clock_used_when_now_not_given():
    t = [100.0]
    hk = SlidingHotKeys(window_s=1.0, slices=2, capacity=4, clock=lambda: t[0])
    hk.add("x")
    hk.add("x")
    assert hk.top().keys[0].count == 2
    t[0] = 101.0
    assert hk.top().total == 0


def test_threads_lose_no_counts():
    hk = SlidingHotKeys(window_s=10.0, slices=10, capacity=16)

    def work(worker: int) -> None:
        for i in range(5_000):
            hk.add(f"k{(worker + i) % 8}", now=i / 1_000)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    result = hk.top(8, now=5.0)
    assert result.total == 20_000 and result.error_bound == 0
    assert sum(h.count for h in result.keys) == 20_000


def test_to_dict_is_json_ready():
    hk = SlidingHotKeys(window_s=10.0, slices=10, capacity=3)
    for key in "aaabbbcd":  # d evicts c (1): count 2, error 1; smallest counter 2
        hk.add(key, now=0.1)
    doc = json.loads(json.dumps(hk.top(1, now=0.5).to_dict()))
    assert doc["keys"] == [{"key": "a", "count": 3, "error": 0, "share": 0.375}]
    assert doc["total"] == 8 and doc["capacity"] == 3 and doc["window_s"] == 10.0
    assert doc["error_bound"] == 2 and doc["complete"] is False  # b (3 > 2) was cut
    assert "at most" in doc["guarantee"] and "10 s" in doc["guarantee"]
    full = hk.top(5, now=0.5).to_dict()
    assert [k["key"] for k in full["keys"]] == ["a", "b", "d"]
    assert full["complete"] is True and "Every key with more than 2" in full["guarantee"]


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"capacity": 0}, "capacity"),
    ({"capacity": 2.5}, "capacity"),
    ({"slices": 0}, "slices"),
    ({"window_s": 0.0}, "window_s"),
    ({"window_s": -1.0}, "window_s"),
    ({"window_s": float("inf")}, "window_s"),
    ({"window_s": "10"}, "window_s"),
])
def test_invalid_constructor_parameters(kwargs, name):
    with pytest.raises(InputError, match=name):
        SlidingHotKeys(**kwargs)


def test_invalid_call_parameters():
    with pytest.raises(InputError, match="capacity must be >= 1, got 0"):
        SpaceSaving(0)
    with pytest.raises(InputError, match="count must be >= 1, got 0"):
        SpaceSaving(4).add("a", 0)
    hk = SlidingHotKeys()
    for k in (0, -1, 1.5, True):
        with pytest.raises(InputError, match="k must be"):
            hk.top(k, now=0.0)
    for share in (0, -0.1, 1.01, float("nan")):
        with pytest.raises(InputError, match="min_share must be in"):
            hk.hot(share, now=0.0)
    with pytest.raises(InputError, match="now must be a finite time"):
        hk.add("a", now=float("nan"))
    with pytest.raises(InputError, match="now must be a finite time"):
        hk.top(now=float("inf"))
