"""An event's transient read from a run's observations (``diagnose.transient``): the same
reading for a live run and a simulated one, and shown by simulate, diagnose and report."""

from __future__ import annotations

import json

import pytest

from hotshard.detect.policy import Detection
from hotshard.diagnose.transient import event_transients, transient_lines
from hotshard.observations import Observations
from tests.conftest import run_cli

# the event's shard "1": CPU per 1 s window, an event from 5 s (found at 5.4 s) to 12 s
CPU = [0.10, 0.11, 0.10, 0.09, 0.10, 0.40, 0.30, 0.12, 0.11, 0.10, 0.12, 0.11]
P99 = [5.0, 5.0, 6.0, 5.0, 5.0, 80.0, 45.0, 7.0, 6.0, 6.0, 7.0, 6.0]


def _obs(actions, cpu=CPU, detection=True, **record) -> Observations:
    windows = [{"start_s": float(i), "end_s": float(i + 1), "requests": 100,
                "shards": [{"id": "0", "requests": 50, "cpu": 0.1, "p99_ms": 5.0},
                           {"id": "1", "requests": 50, "cpu": c, "p99_ms": p}]}
               for i, (c, p) in enumerate(zip(cpu, P99, strict=True))]
    drive = {"events": [{"key": "big", "share": 0.5, "start_s": 5.0, "end_s": 12.0}],
             **record}
    if detection:
        drive["detection"] = Detection(window_s=2.0).to_dict()
    return Observations.from_dict({"format": "hotshard.observations/1", "label": "run",
                                   "duration_s": 12.0, "windows": windows,
                                   "actions": actions, "drive": drive})


def test_onset_detection_relief_and_time_above_the_target():
    """Before detection the shard's peak window is 40%, after it the median of the second
    half is 11%: halfway is 25.5%, first reached by the window ending at 8 s (12%; the
    window [6, 7) is still 30%), so relief is 3 s after the onset. p99 above 40 ms in the
    windows [5, 6) and [6, 7): 2 s."""
    obs = _obs([{"t": 5.4, "key": "big", "shard": "1", "action": "hot", "share": 0.12},
                {"t": 1.0, "key": "other", "shard": "0", "action": "hot"}])
    (t,) = event_transients(obs, slo_ms=40.0)
    assert (t.shard, t.detected_s, t.relief_s) == ("1", 5.4, 8.0)
    assert t.time_to_detect == pytest.approx(0.4) and t.time_to_relief == 3.0
    assert (t.load_before, t.load_after) == (0.40, pytest.approx(0.11))
    assert t.p99_during_ms == 80.0 and t.p99_after_ms == 6.0
    assert t.above_slo_s == 2.0 and t.resolution_s == 1.0
    text = "\n".join(transient_lines(t))
    assert "detected 0.40 s after the onset" in text
    assert "relieved 3.0 s after the onset (read in 1 s windows)" in text
    assert "too slow for this ramp: the shard's p99 was above 40 ms for 2.00 s" in text
    # the rule's floor: 5% of a 2 s window at a 50% share is 0.2 s
    assert "the rule's floor: 0.2 s" in text and "a 1 s window (--hot-window)" in text


def test_a_mitigation_that_does_not_take_load_off_the_shard_is_no_relief():
    flat = [0.10] * 5 + [0.40] * 7
    obs = _obs([{"t": 5.4, "key": "big", "shard": "1", "action": "hot"}], cpu=flat)
    (t,) = event_transients(obs)
    assert t.detected_s == 5.4 and t.relief_s is None
    assert any("not relieved" in line for line in transient_lines(t))


def test_an_event_never_found_says_so_and_a_run_without_events_has_no_transient():
    (t,) = event_transients(_obs([]))
    assert t.detected_s is None and t.relief_s is None
    assert "never reported hot" in "\n".join(transient_lines(t))
    plain = Observations.from_dict({"format": "hotshard.observations/1", "label": "x"})
    assert event_transients(plain) == ()
    # a hostile record costs the transient its verdict, never the reading
    odd = _obs([], detection=False, detection_extra=1)
    odd = Observations.from_dict({**odd.to_dict(), "drive": {
        **odd.extra["drive"], "detection": {"window_s": "soon"},
        "events": [{"key": "big", "share": "x"}, 7, *odd.extra["drive"]["events"]]}})
    (t,) = event_transients(odd)
    assert t.detection is None and t.key == "big"


SIM = ["simulate", "--dist", "uniform:2000", "-n", "4", "--rps", "250", "--duration", "16s",
       "--service", "exp:2ms", "--event", "4711:0.5:5s:16s", "--seed", "3"]


def test_simulate_detect_diagnose_and_report_show_the_transient(tmp_path):
    out = tmp_path / "sim.json"
    res = run_cli(*SIM, "--cache-hit", "0.99", "--detect", "--hot-window", "2s",
                  "--slo-ms", "50", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "detection: a key is hot at 5% of a 2 s window" in res.stdout
    assert "event on 4711: 50% of the requests from 5 s to 16 s" in res.stdout
    assert "detected 0.50 s after the onset" in res.stdout
    assert "relieved" in res.stdout and "verdict: fast enough" in res.stdout
    doc = json.loads(out.read_text())
    assert doc["actions"][0]["key"] == "4711" and doc["actions"][0]["t"] == 5.5
    diag = run_cli("diagnose", str(out), "--slo-ms", "1")
    assert diag.returncode == 0, diag.stderr
    assert "Transient (onset, detection, relief):" in diag.stdout
    # a 1 ms target is above the shard's p99 even after relief: no faster rule would meet it,
    # and the verdict says so instead of blaming the detector
    assert "out of reach for detection" in diag.stdout
    as_json = json.loads(run_cli("diagnose", str(out), "--json").stdout)
    assert as_json["transients"][0]["detected_s"] == 5.5
    html = tmp_path / "r.html"
    rep = run_cli("report", str(out), "-o", str(html), "--slo-ms", "1")
    assert rep.returncode == 0, rep.stderr
    assert "event on 4711" in html.read_text()
    assert "out of reach for detection" in html.read_text()


@pytest.mark.parametrize(("extra", "said"), [
    (["--detect", "--hot-window", "0.2s"], "the hot-key window must be 1 s to 3600 s"),
    (["--detect", "--hot-share", "0"], "at 0 every key would be hot"),
    (["--hot-share", "0.1"], "--hot-share sets the detection that --detect models"),
    (["--detect", "--apply-time", "-1s"], "'--apply-time'")])
def test_a_detection_setting_that_cannot_work_is_one_line(extra, said):
    res = run_cli(*SIM, *extra)
    assert res.returncode == 2, res.stderr
    assert said in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_without_an_injected_event_the_rules_actions_are_summed_up_key_by_key():
    from hotshard.diagnose.transient import action_lines

    actions = [{"t": 0.5, "key": "a", "shard": "3", "action": "hot", "share": 0.07},
               {"t": 6.0, "key": "a", "shard": "3", "action": "lifted", "share": 0.04},
               {"t": 9.0, "key": "a", "shard": "3", "action": "hot", "share": 0.06},
               {"t": 2.0, "key": "b", "shard": "1", "action": "hot", "share": 0.2},
               {"t": 30.0, "key": "b", "shard": "1", "action": "lifted", "share": 0.01}]
    lines = action_lines(actions)
    assert lines[0] == "the hot-key rule acted on 2 keys:"
    assert lines[1] == ("  key a (shard 3): hot at 0.5 s (7.0% of the window), lifted 1x and "
                        "found again 1x")
    assert lines[2] == "  key b (shard 1): hot at 2 s (20.0% of the window), lifted at 30 s"
    assert "sits at the hot share" in lines[3]
