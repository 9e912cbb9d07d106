"""Observations documents (hotshard.observations/1): round trips, validation messages, files."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from hotshard.errors import HotshardError, InputError, ObservationsError
from hotshard.observations import (
    FORMAT,
    Latency,
    Observations,
    ShardObservation,
    load,
    salvage,
)

# The example the observations format was designed from (every field, with its placeholders),
# the "open | closed | null" placeholder given a real value.
DESIGN_EXAMPLE = {
    "format": "hotshard.observations/1",
    "label": "production | load test | simulation | ...",
    "rate_rps": 3000, "achieved_rps": 2998, "duration_s": 600,
    "model": "open",
    "key_generator": "uniform | zipf | profile | production | ...",
    "latency_ms": {"p50": 12, "p90": 60, "p99": 800, "p999": 1500, "max": 2100},
    "service_time_ms": {"p99": 35},
    "shards": [{"id": "0", "node": "node-a", "cpu": 0.95, "requests": 123456, "p99_ms": 900}],
    "cache_hit_rate": 0.62, "payload_bytes_mean": 180, "distinct_keys": 2000000,
    "network": {"cross_zone_rtt_ms": 1.1},
}
MINIMAL = {"format": FORMAT, "label": "production"}


def doc(**fields):
    """A minimal document plus ``fields``."""
    return {**MINIMAL, **fields}


def three_shards(**third):
    return [{"id": "0", "cpu": 0.2}, {"id": "1", "cpu": 0.3}, {"id": "2", **third}]


def write(tmp_path, text: str):
    path = tmp_path / "obs.json"
    path.write_text(text)
    return path


# -- round trips ---------------------------------------------------------------------------------
def test_design_example_round_trips_to_an_equal_dict():
    assert Observations.from_dict(DESIGN_EXAMPLE).to_dict() == DESIGN_EXAMPLE


def test_to_dict_keeps_the_design_key_order():
    out = Observations.from_dict(DESIGN_EXAMPLE).to_dict()
    assert list(out) == list(DESIGN_EXAMPLE)
    assert list(out["shards"][0]) == ["id", "node", "cpu", "requests", "p99_ms"]
    assert list(out["latency_ms"]) == ["p50", "p90", "p99", "p999", "max"]


def test_save_then_load_gives_the_same_observations(tmp_path):
    obs = Observations.from_dict(DESIGN_EXAMPLE)
    path = tmp_path / "run.json"
    obs.save(path)
    assert Observations.load(path) == obs
    assert json.loads(path.read_text()) == DESIGN_EXAMPLE


def test_minimal_file_has_only_format_and_label(tmp_path):
    path = write(tmp_path, json.dumps(MINIMAL))
    obs = load(path)
    assert obs.label == "production"
    assert obs.rate_rps is None and obs.latency_ms is None and obs.model is None
    assert obs.shards == ()
    assert obs.to_dict() == MINIMAL


def test_null_fields_count_as_absent():
    obs = Observations.from_dict(doc(model=None, rate_rps=None, latency_ms=None))
    assert obs.model is None and obs.rate_rps is None
    assert obs.to_dict() == MINIMAL


def test_unknown_fields_survive_a_file_round_trip(tmp_path):
    original = doc(region="eu-west-1", notes={"dashboard": ["a", 1]},
                   shards=[{"id": "0", "cpu": 0.5, "slots": "0-5460"}])
    path = tmp_path / "run.json"
    Observations.from_dict(original).save(path)
    again = load(path)
    assert again.extra == {"region": "eu-west-1", "notes": {"dashboard": ["a", 1]}}
    assert again.shards[0].extra == {"slots": "0-5460"}
    assert again.to_dict() == original


def test_to_dict_returns_a_copy_that_cannot_change_the_observations():
    obs = Observations.from_dict(doc(notes={"a": [1]}, network={"cross_zone_rtt_ms": 1}))
    out = obs.to_dict()
    out["notes"]["a"].append(2)
    out["network"]["cross_zone_rtt_ms"] = 99
    assert obs.to_dict() == doc(notes={"a": [1]}, network={"cross_zone_rtt_ms": 1})


# -- validation messages -------------------------------------------------------------------------
@pytest.mark.parametrize(("document", "message"), [
    (doc(shards=three_shards(cpu=95)),
     "observations shards[2].cpu must be a fraction in [0, 1], got 95 (write 0.95 for 95%)"),
    (doc(shards=three_shards(cpu=-0.1)),
     "observations shards[2].cpu must be a fraction in [0, 1], got -0.1"),
    (doc(cache_hit_rate=62),
     "observations cache_hit_rate must be a fraction in [0, 1], got 62 (write 0.62 for 62%)"),
    (doc(rate_rps="3000"),
     'observations rate_rps must be a number > 0, got "3000" (a string)'),
    (doc(achieved_rps=True),
     "observations achieved_rps must be a number >= 0, got true (a boolean)"),
    (doc(rate_rps=float("nan")),
     "observations rate_rps must be a number > 0, got NaN (not a finite number)"),
    (doc(duration_s=float("inf")),
     "observations duration_s must be a number > 0, got Infinity (not a finite number)"),
    (doc(duration_s=0), "observations duration_s must be a number > 0, got 0"),
    (doc(distinct_keys=-1), "observations distinct_keys must be an integer >= 0, got -1"),
    (doc(shards=three_shards(requests=1.5)),
     "observations shards[2].requests must be an integer >= 0, got 1.5"),
    (doc(model="Open"),
     'observations model must be "open", "closed" or null, got "Open" (a string)'),
    (doc(label=""), 'observations label must be a non-empty string, got "" (a string)'),
    (doc(label=7), "observations label must be a non-empty string such as \"7\", got 7 "
                   "(a number)"),
    (doc(latency_ms={"p50": 12, "p90": 60, "p99": 50}),
     "observations latency_ms.p99 must be >= p90 (60), got 50: percentiles never decrease"),
    (doc(service_time_ms={"p50": -1}),
     "observations service_time_ms.p50 must be a number >= 0, got -1"),
    (doc(latency_ms={"p95": 3, "p98": 4}),
     "observations latency_ms.p98 is not a known latency name; use min, p50, p75, p90, p95, "
     "p99, p999, p9999, max, mean"),
    (doc(latency_ms=800),
     'observations latency_ms must be an object of percentile -> ms such as {"p99": 800}, '
     "got 800 (a number)"),
    (doc(latency_ms={"min": 1, "max": 10, "mean": 11}),
     "observations latency_ms.mean must lie between min and max, got 11"),
    (doc(shards={"id": "0"}),
     'observations shards must be a list of shard objects, got {"id": "0"} (an object)'),
    (doc(shards=[{"cpu": 0.5}]),
     'observations shards[0].id is missing: every shard needs an id, e.g. "0"'),
    (doc(shards=[{"id": 0}]),
     'observations shards[0].id must be a non-empty string such as "0", got 0 (a number)'),
    (doc(shards=[{"id": "a"}, {"id": "a"}]),
     'observations shards[1].id "a" repeats shards[0]: shard ids must be unique'),
    (doc(shards=[{"id": "a", "p50_ms": 9, "p99_ms": 3}]),
     "observations shards[0].p99_ms must be >= p50_ms (9), got 3: percentiles never decrease"),
    (doc(network={"cross_zone_rtt_ms": "1ms"}),
     'observations network.cross_zone_rtt_ms must be a number >= 0, got "1ms" (a string)'),
    (doc(weird=[float("nan")]),
     "observations weird must be plain JSON (strings, finite numbers, lists, objects), "
     "got [NaN]"),
])
def test_invalid_field_is_named_with_its_rule(document, message):
    with pytest.raises(ObservationsError) as info:
        Observations.from_dict(document)
    assert str(info.value) == message


def test_missing_label_is_reported():
    with pytest.raises(ObservationsError, match=r"^observations label is missing: name what"):
        Observations.from_dict({"format": FORMAT})


def test_missing_format_is_reported():
    with pytest.raises(ObservationsError) as info:
        Observations.from_dict({"label": "x"})
    assert str(info.value) == (
        "observations format must be 'hotshard.observations/1', got nothing")


def test_wrong_format_is_reported():
    with pytest.raises(ObservationsError) as info:
        Observations.from_dict(doc(format="grafana/7"))
    assert str(info.value) == ("observations format must be 'hotshard.observations/1', "
                               'got "grafana/7" (a string)')


def test_a_profile_given_as_observations_says_where_it_goes():
    with pytest.raises(ObservationsError, match=r"this is a profile .* pass it with profile,"):
        Observations.from_dict(doc(format="hotshard.profile/1"))


def test_a_document_must_be_an_object():
    with pytest.raises(ObservationsError) as info:
        Observations.from_dict([MINIMAL])
    assert str(info.value).startswith("observations must be a JSON object, got [")


def test_observations_error_is_a_hotshard_error_and_a_value_error():
    assert issubclass(ObservationsError, HotshardError)
    assert issubclass(ObservationsError, ValueError)


# -- direct construction (simulator, driver) -----------------------------------------------------
def test_direct_construction_validates_too():
    with pytest.raises(ObservationsError, match=r"shard\.cpu must be a fraction in \[0, 1\], "
                                                r"got 95 \(write 0\.95 for 95%\)"):
        ShardObservation("0", cpu=95)


def test_direct_construction_rejects_decreasing_percentiles():
    with pytest.raises(ObservationsError, match=r"latency\.p99 must be >= p50 \(10\)"):
        Latency(p50=10, p99=5)


def test_direct_construction_accepts_plain_dicts_and_numpy_scalars():
    obs = Observations("simulation", latency_ms={"p99": np.float64(3.5)},
                       shards=[ShardObservation("0", requests=np.int64(7), cpu=np.float32(0.5))])
    assert obs.latency_ms == Latency(p99=3.5)
    assert type(obs.shards[0].requests) is int and type(obs.shards[0].cpu) is float
    assert json.loads(obs.to_json())["shards"] == [{"id": "0", "cpu": 0.5, "requests": 7}]


def test_extra_may_not_shadow_a_known_field():
    with pytest.raises(ObservationsError, match=r"extra\.rate_rps is a known field"):
        Observations("x", extra={"rate_rps": 5})


def test_replace_revalidates():
    obs = Observations.from_dict(DESIGN_EXAMPLE)
    with pytest.raises(ObservationsError, match="cache_hit_rate must be a fraction"):
        dataclasses.replace(obs, cache_hit_rate=1.5)


@pytest.mark.parametrize(("obj", "name"), [
    (Observations("x"), "label"),
    (ShardObservation("0"), "cpu"),
    (Latency(p99=1.0), "p99"),
])
def test_instances_are_frozen(obj, name):
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, name, 0.5)


# -- views for diagnosis -------------------------------------------------------------------------
def test_shard_views_follow_shard_order():
    obs = Observations("x", shards=[ShardObservation("a", cpu=0.2, requests=10),
                                    ShardObservation("b", cpu=0.9, requests=30)])
    assert obs.shard_cpu == (0.2, 0.9)
    assert obs.shard_requests == (10, 30)
    assert obs.total_requests == 40
    assert obs.hottest_shard.id == "b"


def test_views_are_none_when_a_shard_lacks_the_value():
    obs = Observations("x", shards=[ShardObservation("a", cpu=0.2),
                                    ShardObservation("b", requests=5)])
    assert obs.shard_cpu is None
    assert obs.total_requests is None
    assert obs.hottest_shard is None


def test_views_are_none_without_shards():
    obs = Observations("x")
    assert (obs.shard_cpu, obs.total_requests, obs.hottest_shard) == (None, None, None)


def test_hottest_shard_falls_back_to_requests_without_cpu():
    obs = Observations("x", shards=[ShardObservation("a", requests=50, cpu=0.1),
                                    ShardObservation("b", requests=90)])
    assert obs.hottest_shard.id == "b"


def test_latency_quantiles_are_increasing_pairs():
    lat = Latency.from_dict({"max": 2100, "p50": 12, "p999": 1500, "mean": 30})
    assert lat.quantiles() == ((0.5, 12), (0.999, 1500), (1.0, 2100))


# -- files ---------------------------------------------------------------------------------------
def test_load_of_a_missing_path_names_it(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(ObservationsError) as info:
        load(missing)
    assert str(info.value) == f"no such file of observations: {missing}"


def test_load_of_a_directory_is_refused(tmp_path):
    with pytest.raises(ObservationsError, match="is a directory, not a file of observations"):
        load(tmp_path)


def test_load_of_an_empty_file_says_so(tmp_path):
    path = write(tmp_path, "  \n")
    with pytest.raises(ObservationsError) as info:
        load(path)
    assert str(info.value) == (f'{path}: observations: the file is empty; expected a JSON '
                               f'object with "format" and "label"')


def test_load_of_non_json_gives_the_line(tmp_path):
    path = write(tmp_path, '{\n  "format": "hotshard.observations/1",\n  "label": x\n}\n')
    with pytest.raises(ObservationsError) as info:
        load(path)
    assert str(info.value) == f"{path}: observations: not JSON (line 3: Expecting value)"


def test_load_prefixes_field_errors_with_the_path(tmp_path):
    path = write(tmp_path, json.dumps(doc(shards=three_shards(cpu=95))))
    with pytest.raises(ObservationsError) as info:
        load(path)
    assert str(info.value) == (f"{path}: observations shards[2].cpu must be a fraction in "
                               "[0, 1], got 95 (write 0.95 for 95%)")


def test_load_rejects_a_nan_token_by_field(tmp_path):
    path = write(tmp_path, '{"format": "hotshard.observations/1", "label": "x", '
                           '"rate_rps": NaN}')
    with pytest.raises(ObservationsError, match=r"rate_rps must be a number > 0, got NaN"):
        load(path)


def test_load_rejects_a_key_given_twice(tmp_path):
    path = write(tmp_path, '{"format": "hotshard.observations/1", "label": "a", "label": "b"}')
    with pytest.raises(ObservationsError) as info:
        load(path)
    assert str(info.value) == f'{path}: observations: key "label" appears twice in one object'


def test_load_accepts_a_byte_order_mark(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(MINIMAL).encode())
    assert load(path).label == "production"


def test_save_failure_leaves_old_file_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    path.write_text("old content\n")

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(InputError, match="cannot write .*run.json: No space left on device"):
        Observations.from_dict(DESIGN_EXAMPLE).save(path)
    assert path.read_text() == "old content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_save_into_a_missing_directory_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        Observations("x").save(tmp_path / "no" / "run.json")


def test_saved_file_is_indented_json_ending_in_newline(tmp_path):
    path = tmp_path / "run.json"
    Observations.from_dict(copy.deepcopy(MINIMAL)).save(path)
    assert path.read_text() == ('{\n  "format": "hotshard.observations/1",\n'
                                '  "label": "production"\n}\n')


# -- layering ------------------------------------------------------------------------------------
def test_module_imports_no_other_hotshard_package():
    code = ("import sys, hotshard.observations; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('hotshard'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["hotshard", "hotshard._atomic", "hotshard._files", "hotshard._format",
                   "hotshard._validate", "hotshard.errors", "hotshard.observations"]


# -- salvaging a hand-written file ----------------------------------------------------------------
def test_salvage_keeps_valid_fields_and_names_each_dropped_one(tmp_path):
    doc = {"format": FORMAT, "label": "production", "rate_rps": 3000,
           "cache_hit_rate": 62,  # percent, not a fraction
           "latency_ms": {"p50": 900, "p99": 800},  # decreasing: a copying slip
           "shards": [{"id": "0", "cpu": 0.2, "requests": 10},
                      {"id": "1", "cpu": 95, "requests": 12},
                      {"cpu": 0.3}]}
    path = tmp_path / "prod.json"
    path.write_text(json.dumps(doc))
    obs, dropped = Observations.load_salvaged(path)
    assert obs.rate_rps == 3000 and obs.cache_hit_rate is None and obs.latency_ms is None
    assert [s.id for s in obs.shards] == ["0", "1"]
    assert obs.shards[1].cpu is None and obs.shards[1].requests == 12
    text = "\n".join(dropped)
    assert "cache_hit_rate" in text and "write 0.62 for 62%" in text
    assert "latency_ms.p99" in text and "shards[1].cpu" in text and "shards[2].id" in text
    assert len(dropped) == 4


def test_salvage_cannot_rescue_another_format_or_a_missing_label(tmp_path):
    for doc, words in (({"format": "grafana/7", "label": "x"}, "format"),
                       ({"format": FORMAT}, "label"), ([1, 2], "object")):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(doc))
        with pytest.raises(ObservationsError, match=words):
            Observations.load_salvaged(path)


def test_salvage_of_a_valid_file_drops_nothing(tmp_path):
    obs = Observations(label="x", rate_rps=5, shards=({"id": "0", "cpu": 0.5},))
    path = tmp_path / "ok.json"
    obs.save(path)
    assert Observations.load_salvaged(path) == (obs, ())


def test_salvage_reports_a_systematic_slip_once(tmp_path):
    shards = [{"id": str(i), "cpu": 20 + i, "requests": 5} for i in range(64)]
    path = tmp_path / "pct.json"
    path.write_text(json.dumps({"format": FORMAT, "label": "production", "shards": shards}))
    obs, dropped = Observations.load_salvaged(path)
    assert len(dropped) == 1 and "the same for 63 more shards (values 20 to 83)" in dropped[0]
    assert obs.shard_requests == (5,) * 64 and obs.shard_cpu is None


def test_windows_round_trip_and_name_the_peak():
    doc = {"format": FORMAT, "label": "run", "windows": [
        {"start_s": 0, "end_s": 60, "requests": 100, "latency_ms": {"p50": 4, "p99": 9},
         "shards": [{"id": "0", "requests": 60, "cpu": 0.3}, {"id": "1", "requests": 40,
                                                               "cpu": 0.2}]},
        {"start_s": 60, "end_s": 120, "requests": 100,
         "shards": [{"id": "0", "requests": 10, "cpu": 0.1}, {"id": "1", "requests": 90,
                                                               "cpu": 0.95}]}]}
    obs = Observations.from_dict(doc)
    assert Observations.from_dict(obs.to_dict()) == obs
    assert obs.peak_window.start_s == 60 and obs.peak_window.shard_cpu == (0.1, 0.95)
    assert Observations.from_dict({"format": FORMAT, "label": "old"}).windows == ()


@pytest.mark.parametrize("windows,message", [
    ([{"start_s": 5, "end_s": 5}], "windows[0].end_s must be > start_s"),
    ([{"end_s": 5}], "windows[0].start_s is missing"),
    ([{"start_s": 0, "end_s": 10}, {"start_s": 5, "end_s": 20}], "do not overlap"),
    ("soon", "windows"),
    ([{"start_s": i, "end_s": i + 1} for i in range(10_001)], "coarser windows"),
])
def test_bad_windows_are_named(windows, message):
    with pytest.raises(ObservationsError, match=re.escape(message)):
        Observations.from_dict({"format": FORMAT, "label": "run", "windows": windows})


def test_salvage_keeps_the_good_windows_and_drops_a_bad_one():
    windows = [{"start_s": i * 10, "end_s": (i + 1) * 10,
                "shards": [{"id": "0", "requests": 5, "cpu": 0.5}]} for i in range(4)]
    windows[2]["shards"][0]["cpu"] = -0.3
    obs, problems = salvage({"format": FORMAT, "label": "run", "windows": windows})
    assert [w.start_s for w in obs.windows] == [0, 10, 30]
    assert len(problems) == 1 and "windows[2].shards[0].cpu" in problems[0]


def test_actions_round_trip_and_a_bad_one_is_named():
    from hotshard.errors import ObservationsError
    from hotshard.observations import Observations

    action = {"t": 5.56, "at": 1796578104.269, "action": "hot", "key": "big-stream",
              "shard": "1", "share": 0.1548, "applies": ["cache"]}
    obs = Observations.from_dict({"format": "hotshard.observations/1", "label": "run",
                                  "actions": [action, {**action, "action": "lifted",
                                                       "t": 20.0, "shard": 1}]})
    assert obs.actions[0] == action and obs.actions[1]["shard"] == "1"
    assert Observations.from_dict(obs.to_dict()).to_dict() == obs.to_dict()
    for bad, said in (({**action, "share": 2}, "actions[0].share"),
                      ({k: v for k, v in action.items() if k != "t"}, "actions[0].t"),
                      ({**action, "key": ""}, "actions[0].key")):
        with pytest.raises(ObservationsError, match=said.replace("[", r"\[").replace("]", r"\]")):
            Observations.from_dict({"format": "hotshard.observations/1", "label": "run",
                                    "actions": [bad]})
