"""simulate with a profile's time sections: measured arrivals in real time, keys in
production's order with caches simulated on each shard's stream, head keys on their timelines,
and a note when a profile has none of them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hotshard.profile.count import count_profile
from hotshard.profile.document import Profile
from hotshard.sim.cache import lru_hits
from tests.conftest import ROOT, run_cli, shared

EXAMPLES = ROOT / "examples"


def test_lru_hits_is_an_lru_exactly():
    rng = np.random.default_rng(1)
    keys = rng.zipf(1.3, 20_000) % 500
    for capacity in (1, 2, 7, 60, 499, 1000):
        stack: list[int] = []
        brute = []
        for k in keys.tolist():
            brute.append(k in stack)
            if k in stack:
                stack.remove(k)
            elif len(stack) == capacity:
                stack.pop(0)
            stack.append(k)
        assert np.array_equal(lru_hits(keys, capacity), np.array(brute)), capacity
    assert not lru_hits(keys, 0).any()


def _idc(times: np.ndarray, width: float, span: float) -> float:
    counts = np.bincount((times // width).astype(np.int64), minlength=int(span // width))
    counts = counts[: int(span // width)]
    return float(counts.var() / counts.mean())


def test_the_incident_profiles_arrivals_are_replayed_in_real_time():
    from hotshard.sim.arrivals import ProfileArrivals

    model = Profile.load(EXAMPLES / "incident.profile.json").arrivals
    times = ProfileArrivals(model).times(3000.0, 3600.0, np.random.default_rng(5))
    assert times.size == 10_800_000 and np.all(np.diff(times) >= 0)
    # at the profile's own rate and length, minute m of the run is the profile's minute m
    per_minute = np.bincount((times // 60).astype(np.int64), minlength=60)
    assert np.array_equal(per_minute, model.counts)
    # and its burstiness is the measured one: an IDC over m windows has a sampling error of
    # about sqrt(2 / m) (7% at 10 s over the hour), so 20% (the bar) is ~3 sigma
    for width in (1.0, 10.0):
        assert _idc(times, width, 3600.0) == pytest.approx(model.idc[f"{width:g}"], rel=0.2)
    # a shorter run keeps the bursts' length: ten minutes are the profile's first ten
    short = ProfileArrivals(model).times(3000.0, 600.0, np.random.default_rng(5))
    first = model.counts[:10].astype(float)
    assert np.bincount((short // 60).astype(np.int64), minlength=10) == pytest.approx(
        first / first.sum() * short.size, abs=1.0)


def test_keys_in_productions_order_warm_a_cache_as_production_did(tmp_path):
    from hotshard.sim.scenarios import prepare
    from hotshard.sim.system import ServiceModel, simulate

    profile = count_profile([str(shared("traces", "web07.parquet"))], key="key")
    path = tmp_path / "web07.json"
    profile.save(str(path))
    size = max(2, int(profile.keys) // 100)   # an LRU of 1% of the distinct keys
    measured = profile.locality.lru_hit_rate(size)
    rates = {}
    for order in ("locality", "irm"):
        ready = prepare({"profile": str(path), "order": order, "shards": 1,
                         "cache_size": size, "arrivals": "poisson"})
        assert (ready.key_order is not None) == (order == "locality")
        events = int(profile.events)
        result = simulate(ready.sampler, rps=events / 60.0, duration=60.0,
                          model=ServiceModel(shards=1, cache_size=size),
                          read_share=1.0, rng=3, key_order=ready.key_order)
        rates[order] = result.cache_hit_rate
    # the stream made from the locality section hits as the trace did (generate's bar: within
    # 0.03); independent draws (Che's model) see a colder cache
    assert rates["locality"] == pytest.approx(measured, abs=0.03)
    assert rates["irm"] < measured - 0.05


def test_an_event_channel_is_drawn_in_the_windows_it_was_hot():
    from hotshard.workload.profile_sampler import from_profile
    from hotshard.workload.timeline_draws import timeline_positions, window_events

    profile = Profile.load(EXAMPLES / "incident-event.profile.json")
    sampler = from_profile(profile)
    timelines = profile.timelines
    per_window = window_events(timelines, profile.arrivals, profile.events)
    n = 1_200_000
    positions = timeline_positions(sampler, timelines, per_window,
                                   (np.arange(n) + 0.5) / n, np.random.default_rng(2))
    event = int(np.argmax(timelines.counts.sum(axis=1)))   # the event channel: head rank 0
    share = timelines.counts[event] / per_window            # its share, window by window
    drawn = (positions == event).reshape(timelines.windows, -1).mean(axis=1)
    # 100,000 draws a window: a binomial share's sd is under 0.0016; 0.01 is > 6 sd
    assert drawn == pytest.approx(share, abs=0.01)
    assert share.max() > 0.4 and share.min() < 0.1   # hot at the peak, not all hour


def test_a_profile_without_time_sections_says_how_it_is_simulated(tmp_path):
    doc = json.loads((EXAMPLES / "incident.profile.json").read_text())
    for section in ("arrivals", "locality", "timelines"):   # counts only
        del doc[section]
    (tmp_path / "counts.json").write_text(json.dumps(doc))
    res = run_cli("simulate", str(tmp_path / "counts.json"), "--rps", "500", "--duration",
                  "20s", "-n", "8")
    assert res.returncode == 0
    assert "no locality section" in res.stderr and "no arrivals section" in res.stderr
    assert "poisson" in res.stdout
    res = run_cli("simulate", str(tmp_path / "counts.json"), "--rps", "500", "--duration",
                  "20s", "--arrivals", "profile")
    assert res.returncode == 2 and "needs a profile with an arrivals section" in res.stderr
    res = run_cli("simulate", str(tmp_path / "counts.json"), "--rps", "500", "--duration",
                  "20s", "--order", "locality")
    assert res.returncode == 2 and "needs a profile with a locality section" in res.stderr
    assert "Traceback" not in res.stderr


def test_scenario_options_merge_as_the_command_does():
    """simulate's --scenario NAME [--opt ...] is the library's scenario_options: the scenario
    over the defaults, each given option on top, a given key source replacing the scenario's."""
    from hotshard.errors import InputError
    from hotshard.sim.scenarios import DEFAULTS, scenario, scenario_options

    base = scenario_options("incident-production")
    assert base["profile"].endswith("incident.profile.json") and base["dist"] is None
    assert base["rps"] == scenario("incident-production").options["rps"]
    faster = scenario_options("incident-production", rps=5000.0, shards=8)
    assert (faster["rps"], faster["shards"]) == (5000.0, 8)
    assert {k: v for k, v in faster.items() if k not in ("rps", "shards")} == \
        {k: v for k, v in base.items() if k not in ("rps", "shards")}
    uniform = scenario_options("incident-production", dist="uniform:100")
    assert uniform["profile"] is None and uniform["dist"] == "uniform:100"
    assert scenario_options(dist="zipf:1.1:1000")["partitioner"] == DEFAULTS["partitioner"]
    with pytest.raises(InputError, match="give a PROFILE, dist SPEC or scenario NAME"):
        scenario_options()
    with pytest.raises(InputError, match="not both"):
        scenario_options(profile="p.json", dist="uniform:10")
