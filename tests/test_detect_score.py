"""Hot-key detectors scored on a known stream (``hotshard.detect.score``): the truth is the
exact share of each key in the last window; an event (a key taking 40% of the requests from
a known instant) is what a detector must find, and soon."""

from __future__ import annotations

import numpy as np
import pytest

from hotshard.detect.sampler import SampledCounts
from hotshard.detect.score import ExactCounts, score_detector
from hotshard.detect.sketch import SlidingHotKeys
from hotshard.errors import InputError

RATE, SPAN, ONSET, END, SHARE = 1000.0, 60.0, 20.0, 40.0, 0.4


def _stream(seed: int = 1) -> tuple[list[str], np.ndarray]:
    """Poisson at 1,000 req/s for 60 s, Zipf(1.1) over 5,000 keys; "event" takes 40% of
    the requests in [20, 40) s."""
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1 / RATE, int(RATE * SPAN)))
    ranks = (rng.zipf(1.1, times.size) - 1) % 5000
    keys = [f"k{r}" for r in ranks.tolist()]
    hot = (times >= ONSET) & (times < END) & (rng.random(times.size) < SHARE)
    for i in np.flatnonzero(hot).tolist():
        keys[i] = "event"
    return keys, times


def test_the_truth_scores_perfectly_and_finds_the_event_when_its_share_crosses():
    keys, times = _stream()
    score = score_detector("exact", ExactCounts(10.0), keys, times, threshold=0.05,
                           events=[("event", ONSET)])
    assert score.precision == score.recall == 1.0 and score.share_error == 0.0
    # 40% of the requests from t = 20: its share of a 10 s window passes 5% after
    # 0.05 / 0.4 x 10 s = 1.25 s (a little more: the event's own requests are in the
    # total), read every 0.5 s
    assert 1.0 <= score.latency_s[0] <= 2.0
    assert score.readings == pytest.approx((SPAN - 0.1) / 0.5, abs=3)


def test_servers_sketch_finds_the_event_within_its_window_and_reports_only_hot_keys():
    keys, times = _stream()
    sketch = SlidingHotKeys(window_s=10.0, slices=10, capacity=256, clock=lambda: 0.0)
    score = score_detector("space-saving", sketch, keys, times, threshold=0.05,
                           events=[("event", ONSET)])
    # its shares are guaranteed lower bounds: never a false positive, a share error of
    # at most the sketch's bound (total / capacity per slice merged, ~a few percent here)
    assert score.precision == 1.0
    assert score.recall > 0.9 and score.share_error < 0.02
    assert score.latency_s[0] is not None and score.latency_s[0] <= 10.0


def test_a_sparse_sampler_is_noisy_near_the_threshold_and_slower():
    keys, times = _stream()
    dense = score_detector("1-in-1", SampledCounts(every=1, window_s=10.0, seed=3), keys,
                           times, threshold=0.05, events=[("event", ONSET)])
    sparse = score_detector("1-in-100", SampledCounts(every=100, window_s=10.0, seed=3),
                            keys, times, threshold=0.05, events=[("event", ONSET)],
                            min_total=1)
    # every request sampled: the truth but for slice edges (a slice of 1 s leaves whole)
    assert dense.precision > 0.95 and dense.recall > 0.95 and dense.share_error < 0.005
    # 1 in 100: ~100 sampled requests in the window; a share's standard error near 5% is
    # sqrt(0.05 x 0.95 / 100) = 2.2%, so keys near the threshold come and go
    assert sparse.share_error > 2 * dense.share_error
    assert sparse.latency_s[0] is not None


def test_bad_settings_are_refused():
    keys, times = _stream()
    with pytest.raises(InputError, match="hot share must be in"):
        score_detector("x", ExactCounts(10.0), keys, times, threshold=0.0)
    with pytest.raises(InputError, match="1 in N"):
        SampledCounts(every=0)
    with pytest.raises(InputError, match="never go back"):
        score_detector("x", ExactCounts(10.0), keys[:3], [3.0, 2.0, 1.0], threshold=0.1)
