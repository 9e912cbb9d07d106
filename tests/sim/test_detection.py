"""serve's hot-key rule replayed over a simulated stream (``sim.detection``): the same hot set
at every reading as serve's own sketch, whatever the blocks; and ``simulate(detection=...)``
applying the mitigations from the detection on."""

from __future__ import annotations

import numpy as np
import pytest

from hotshard.detect.policy import HOT_REFRESH_S, MIN_HOT_WINDOW_REQUESTS, SLICES, Detection
from hotshard.detect.sketch import SlidingHotKeys
from hotshard.errors import InputError
from hotshard.mitigations import Mitigations
from hotshard.sim.detection import HotKeyReplay
from hotshard.sim.service_times import Exponential
from hotshard.sim.system import ServiceModel, simulate
from hotshard.workload.sampler import UniformSampler
from hotshard.workload.timing import HotEvent


def _stream(seed: int, rate: float, duration: float, keys: int, event: tuple):
    """Poisson arrivals over ``keys`` uniform keys, with ``event`` (key id, share, start,
    end) taking its share of the requests in its window."""
    g = np.random.default_rng(seed)
    n = g.poisson(rate * duration)
    t = np.sort(g.uniform(0, duration, n))
    ids = g.integers(0, keys, n)
    key, share, start, end = event
    during = (t >= start) & (t < end) & (g.random(n) < share)
    ids[during] = key
    return t, ids


def _replayed(det, t, ids, keys, cuts):
    """The replay fed in blocks cut at ``cuts`` (seconds); the hot marks and actions."""
    replay = HotKeyReplay(det, list(range(-1, keys)), ["event"] + [str(k) for k in range(keys)],
                          [0] * (keys + 1))
    hot, ever = [], []
    edges = [0.0, *cuts, float(t[-1]) + 1.0]
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        mine = (t >= lo) & (t < hi)
        h, e = replay.mark(t[mine], ids[mine], hi)
        hot.append(h)
        ever.append(e)
    replay.finish(edges[-1])
    return np.concatenate(hot), np.concatenate(ever), replay.actions


def test_the_replay_calls_hot_what_serves_sketch_calls_hot_at_every_reading():
    """The oracle is serve's own sketch (capacity above the key count, so exact): fed every
    request before a reading, its guaranteed shares at the reading make the hot set. The
    replay must agree at every reading of a run with an event, and mark each request with
    the reading at or before its arrival."""
    det = Detection(window_s=2.0, hot_share=0.05)
    keys = 40
    t, ids = _stream(7, 400.0, 20.0, keys, (-1, 0.3, 6.0, 13.0))
    hot, _, actions = _replayed(det, t, ids, keys, cuts=[3.3, 3.31, 9.0, 14.7])
    sketch = SlidingHotKeys(window_s=det.window_s, slices=SLICES, capacity=4 * keys)
    names = np.where(ids < 0, "event", ids.astype(str))
    expected = np.zeros(t.size, dtype=bool)
    fed = 0
    hot_at: dict[str, bool] = {}
    log = []
    readings = np.arange(0.0, 20.0 + 1e-9, HOT_REFRESH_S)
    for j, reading in enumerate(readings):
        while fed < t.size and t[fed] < reading:
            sketch.add(str(names[fed]), now=float(t[fed]))
            fed += 1
        shares = sketch.shares(now=float(reading), min_total=MIN_HOT_WINDOW_REQUESTS)
        now_hot = {k for k, v in shares.items() if v >= det.hot_share}
        for k in sorted(set(hot_at) | now_hot):
            if hot_at.get(k, False) != (k in now_hot):
                log.append((float(reading), k, "hot" if k in now_hot else "lifted"))
            hot_at[k] = k in now_hot
        upto = readings[j + 1] if j + 1 < readings.size else np.inf
        mine = (t >= reading) & (t < upto)
        expected[mine] = [names[i] in now_hot for i in np.flatnonzero(mine)]
    assert [(a["t"], a["key"], a["action"]) for a in actions] == sorted(
        log, key=lambda r: (r[0], ["event", *map(str, range(keys))].index(r[1])))
    assert np.array_equal(hot, expected)
    first = [a for a in actions if a["key"] == "event"][0]
    assert first["action"] == "hot" and 6.0 < first["t"] <= 7.0


def test_the_same_marks_however_the_stream_is_cut_into_blocks():
    det = Detection(window_s=3.0, hot_share=0.1, apply_s=0.7)
    t, ids = _stream(3, 300.0, 30.0, 25, (-1, 0.4, 10.0, 20.0))
    whole = _replayed(det, t, ids, 25, cuts=[])
    for cuts in ([5.0], [0.05, 0.1, 17.77], list(np.arange(1.0, 30.0, 1.3))):
        parts = _replayed(det, t, ids, 25, cuts=cuts)
        assert np.array_equal(whole[0], parts[0]) and np.array_equal(whole[1], parts[1])
        assert whole[2] == parts[2]


def test_a_step_event_is_found_at_the_first_reading_its_share_passes_the_rule():
    """Evenly spaced requests, 1,000 a second over 1,000 keys in turn; from 5 s every other
    request is the event's. Window 2 s in slices of 0.2 s, share 20%: the reading at 5.5 s
    sees [3.6, 5.5): 250 of 1,900 (13%); at 6.0 s [4.2, 6.0): 500 of 1,800 (28%): found at
    6.0 s. After the event ends at 8 s: at 9.0 s [7.2, 9.0) holds 400 of 1,800 (22%), at
    9.5 s [7.6, 9.5) 200 of 1,900 (11%): lifted at 9.5 s. A split stays after the lift; an
    action applied 0.7 s later marks the requests from 6.7 s."""
    t = (np.arange(12_000) + 0.5) / 1000.0
    ids = np.arange(12_000) % 1000
    ids[(t >= 5.0) & (t < 8.0) & (np.arange(12_000) % 2 == 0)] = -1
    for apply_s in (0.0, 0.7):
        det = Detection(window_s=2.0, hot_share=0.2, apply_s=apply_s)
        hot, ever, actions = _replayed(det, t, ids, 1000, cuts=[4.0, 8.0])
        assert [(a["t"], a["key"], a["action"]) for a in actions] == [
            (6.0, "event", "hot"), (9.5, "event", "lifted")]
        event = ids == -1
        first = t[event & hot].min()
        assert 6.0 + apply_s <= first < 6.0 + apply_s + 0.002
        assert not hot[event & (t < 6.0 + apply_s)].any()
        assert ever[t >= 9.5 + apply_s].sum() == 0   # the event's requests ended at 8 s
        assert (ever[event] == hot[event]).all()


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"window_s": 0.5}, "the hot-key window must be 1 s to 3600 s"),
    ({"hot_share": 0}, "at 0 every key would be hot"),
    ({"hot_share": 1.5}, "the hot share must be in (0, 1]"),
    ({"apply_s": -1}, "the time to apply an action must be 0 to 3600 s")])
def test_a_rule_that_cannot_work_is_refused(kwargs, said):
    with pytest.raises(InputError, match=None) as exc:
        Detection(**kwargs)
    assert said in str(exc.value)


def _run(detection, window=None, **mitigations):
    return simulate(UniformSampler(2000), rps=500, duration=20.0,
                    model=ServiceModel(shards=4, service=Exponential(0.002)),
                    mitigations=Mitigations(**mitigations),
                    hot_events=(HotEvent("4711", 0.5, 8.0, 20.0),), rng=5,
                    detection=detection, interval=1.0, window=window)


def test_simulate_applies_the_mitigation_from_the_detection_on_and_says_when():
    """The event's shard carries half the requests plus a quarter of the rest (62.5%) until
    the event's key is found; from then 99% of its reads (90% of its requests) are served by
    the cache, so its shard's CPU falls. By rank (no detection) the event's key, outside the
    top keys of uniform traffic, is never cached."""
    det = Detection(window_s=2.0)
    found = _run(det, cache_hit=0.99)
    hot = [a for a in found.actions if a["key"] == "4711"]
    assert hot[0]["action"] == "hot" and 8.0 < hot[0]["t"] <= 8.0 + 2.0
    shard = int(hot[0]["shard"])
    cpu = found.windows.cpu[:, shard]
    by_rank = _run(None, cache_hit=0.99).windows.cpu[:, shard]
    assert cpu[12:].mean() < 0.5 * by_rank[12:].mean()
    assert np.allclose(cpu[:8], by_rank[:8])   # the same draws before the event
    obs = found.to_observations()
    assert obs.actions == found.actions
    assert obs.extra["simulation"]["detection"]["window_s"] == 2.0
    # the result does not depend on how the run is cut into windows
    again = _run(det, window=0.37, cache_hit=0.99)
    assert again.actions == found.actions and np.array_equal(again.windows.cpu,
                                                             found.windows.cpu)


def test_detected_keys_are_split_and_their_reads_spread_as_serve_does():
    det = Detection(window_s=2.0)
    split = _run(det, split_into=4)
    base = _run(det)
    hot = [a for a in split.actions if a["key"] == "4711" and a["action"] == "hot"][0]
    shard = int(hot["shard"])
    assert split.windows.requests[14:, shard].sum() < 0.6 * base.windows.requests[14:, shard].sum()
    replicas = _run(det, replicas=3)
    assert replicas.windows.cpu[14:, shard].mean() < 0.6 * base.windows.cpu[14:, shard].mean()
