"""`hotshard simulate` as a user runs it: the incident's three scenarios and bad input."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli


def _simulate(*args):
    res = run_cli("simulate", *args, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _cpu(doc):
    return sorted(s["cpu"] for s in doc["shards"])


@pytest.fixture(scope="module")
def incident():
    """The three scenarios, one simulated hour each (seed 0), as observations."""
    return {name: _simulate("--scenario", name)
            for name in ("incident-test", "incident-production", "incident-mitigated")}


@pytest.mark.slow
def test_the_load_test_looks_fine(incident):
    doc = incident["incident-test"]
    assert doc["format"] == "hotshard.observations/1" and doc["model"] == "open"
    assert doc["key_generator"] == "uniform"
    assert 30 <= doc["latency_ms"]["p99"] <= 50  # the incident: p99 about 40 ms (+-25%)
    cpu = _cpu(doc)
    assert cpu[-1] - cpu[0] < 0.05  # every shard within a few points of the others


@pytest.mark.slow
def test_production_has_one_hot_shard_and_a_long_tail(incident):
    doc = incident["incident-production"]
    cpu = _cpu(doc)
    median = cpu[len(cpu) // 2]
    assert 0.71 <= cpu[-1] <= 1.0  # one shard at about 95% (+-25%, capped by saturation)
    assert 0.15 <= median <= 0.25  # the others near 20%
    assert 600 <= doc["latency_ms"]["p99"] <= 1000  # p99 about 800 ms
    assert cpu[-2] < 0.7  # one hot shard, not a hot cluster


@pytest.mark.slow
def test_the_mitigations_bring_p99_under_100_ms(incident):
    doc = incident["incident-mitigated"]
    assert doc["latency_ms"]["p99"] < 100
    assert max(_cpu(doc)) < 0.5
    assert doc["simulation"]["mitigations"]["coalesce"] is True


def test_explicit_options_override_the_scenario():
    doc = _simulate("--scenario", "incident-production", "--duration", "2m", "--rps", "1000")
    assert doc["duration_s"] == 120 and doc["rate_rps"] == 1000
    assert doc["simulation"]["model"]["arrivals"]["kind"] == "profile"  # the scenario's still


def test_text_summary_and_files(tmp_path):
    out = tmp_path / "sim.json"
    res = run_cli("simulate", "--dist", "zipf:1.1:1e5", "--rps", "2000", "--duration", "1m",
                  "-n", "16", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "latency   p50/p90/p99/p99.9/max" in res.stdout and "hottest (latency" in res.stdout
    from hotshard.observations import Observations

    assert len(Observations.load(out).shards) == 16


def test_scenario_list():
    res = run_cli("simulate", "scenarios")
    assert res.returncode == 0
    assert [line.split()[0] for line in res.stdout.splitlines()] == [
        "incident-test", "incident-production", "incident-mitigated"]


@pytest.mark.parametrize(("args", "words"), [
    (["--rps", "10"], "give a PROFILE, --dist SPEC or --scenario NAME"),
    (["--scenario", "nosuch"], "no scenario 'nosuch'"),
    (["--dist", "uniform:10", "--rps", "-5"], "--rps"),
    (["--dist", "uniform:10", "--duration", "0"], "--duration"),
    (["--dist", "uniform:10", "-n", "0"], "--shards"),
    (["--dist", "uniform:10", "--shard-workers", "0"], "--shard-workers"),
    (["--dist", "uniform:10", "--service", "lognormal:5ms:2ms"], "p99"),
    (["--dist", "uniform:10", "--arrivals", "trace:/nonexistent/rates.txt"], "rates.txt"),
    (["--dist", "uniform:10", "--plot", "x.txt"], "unknown image type"),
])
def test_bad_input_is_one_line(tmp_path, args, words):
    res = run_cli("simulate", *args, "--duration" if "--duration" not in args else "--seed",
                  "10s" if "--duration" not in args else "0", cwd=tmp_path)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotshard: error:"), res.stderr
    assert words in lines[0], lines[0]
    assert not list(tmp_path.iterdir())


def test_plot_of_a_simulation(tmp_path):
    out = tmp_path / "sim.png"
    res = run_cli("simulate", "--scenario", "incident-production", "--duration", "1m",
                  "--plot", str(out))
    assert res.returncode == 0, res.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000


def test_the_summary_says_how_reads_and_events_were_taken(tmp_path, web07_path):
    res = run_cli("simulate", str(web07_path), "--duration", "2m", "--event",
                  "107:0.3:30s:1m30s")
    assert res.returncode == 0, res.stderr
    assert "reads 90% of requests" in res.stdout
    assert "event: 30% of all requests to key 107 from 30s to 1m30s" in res.stdout
    doc = _simulate(str(web07_path), "--duration", "1m", "--read-share", "0.5")
    assert doc["simulation"]["reads"] == "50% of requests"


def test_a_rate_trace_sets_rate_and_length(tmp_path, web07_path):
    trace = tmp_path / "rates.txt"
    trace.write_text("100\n" * 60)
    doc = _simulate(str(web07_path), "--arrivals", f"trace:{trace}")
    assert doc["rate_rps"] == 100 and doc["duration_s"] == 60
    # a Poisson count with mean 6000: within 5 sd
    assert abs(doc["achieved_rps"] * 60 - 6000) < 5 * 6000 ** 0.5


@pytest.mark.parametrize(("args", "words"), [
    (["--event", "107:0.3:20m:30m", "--duration", "10m"], "starts at 20m, after the simulated"),
    (["--event", "107:0.6:0:1m", "--event", "71:0.6:0:1m", "--duration", "2m"],
     "ask for 120% of all traffic"),
    (["--rps", "1e9", "--duration", "1h"], "the simulator takes on"),
    (["--rps", "0.000001", "--duration", "1s"], "less than one request"),
])
def test_impossible_runs_are_refused(web07_path, args, words):
    res = run_cli("simulate", str(web07_path), *args)
    assert res.returncode == 2 and words in res.stderr, res.stderr


# -- a profile's own rate and span, its time axis, its saturated window ----------------------
@pytest.fixture(scope="module")
def event_profile(tmp_path_factory):
    """Two hours at 50 req/s; one channel takes 40% of 60:00-70:00 (tests/sim/event_trace)."""
    from tests.sim.event_trace import event_profile as make

    return make(tmp_path_factory.mktemp("event"))


def test_a_profile_is_simulated_at_its_measured_rate_over_its_span(event_profile):
    from hotshard.observations import Observations
    from tests.sim.event_trace import event_shard

    args = ("simulate", str(event_profile), "-p", "redis-cluster", "-n", "16", "--seed", "2")
    res = run_cli(*args, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    rate = json.loads(event_profile.read_text())["rate"]
    assert (doc["rate_rps"], doc["duration_s"]) == (rate["mean_rps"], rate["seconds"])
    assert doc["duration_s"] == 7200
    assert "note: simulating the profile's measured rate" in res.stderr
    # the windows: the profile's twelve timeline windows, in the observations' shape
    windows = doc["windows"]
    assert [(w["start_s"], w["end_s"]) for w in windows] == [
        (600.0 * k, 600.0 * (k + 1)) for k in range(12)]
    assert set(windows[0]) == {"start_s", "end_s", "requests", "rate_rps", "latency_ms",
                               "shards"}
    assert set(windows[0]["shards"][0]) == {"id", "cpu", "p99_ms", "requests"}
    assert sum(w["requests"] for w in windows) == round(doc["achieved_rps"] * 7200)
    # the event happened in 60:00-70:00, and so it does here, on the channel's shard
    hot = str(event_shard())
    peak = Observations.from_dict(doc).peak_window
    assert (peak.start_s, peak.end_s) == (3600, 4200)
    assert max(peak.shards, key=lambda s: s.cpu).id == hot
    # same seed, same numbers
    assert run_cli(*args, "--json").stdout == res.stdout
    text = run_cli(*args)
    assert text.returncode == 0, text.stderr
    assert f"peak window 60:00-70:00: shard {hot} at " in text.stdout
    rows = [line for line in text.stdout.splitlines() if line.startswith("    60:00-70:00")]
    assert len(rows) == 1 and rows[0].endswith("<- peak")


def test_a_shard_saturated_in_its_event_window_is_named(event_profile):
    from tests.sim.event_trace import event_shard

    # 70 ms a request: the event's 20 req/s alone are 1.4x a worker in its window; its
    # shard's ~3.3 req/s over the run (0.23x) and every other shard (0.7x at most) are fine
    res = run_cli("simulate", str(event_profile), "-p", "redis-cluster", "-n", "16",
                  "--service", "exp:70ms")
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 1, res.stderr
    assert warnings[0].startswith(f"hotshard: warning: shard {event_shard()} saturates in "
                                  "60:00-70:00 though not over the whole run: it gets ")
    assert "req/s x 70 ms mean service = 1." in warnings[0]


def test_a_profile_without_time_sections_runs_as_before(event_profile, tmp_path):
    from tests.sim.event_trace import without_time_sections

    counts = without_time_sections(event_profile, tmp_path / "counts.json")
    res = run_cli("simulate", str(counts), "--duration", "1m", "-n", "8", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["rate_rps"], doc["duration_s"]) == (3000, 60)   # today's default rate
    assert "measured no rate" in res.stderr and "no arrivals section" in res.stderr
    assert len(doc["windows"]) == 20 and doc["windows"][1]["start_s"] == 3


def test_a_month_from_a_profile_is_not_a_default(event_profile, tmp_path):
    doc = json.loads(event_profile.read_text())
    doc["rate"].update(mean_rps=3000.0, seconds=30 * 86400)
    path = tmp_path / "month.json"
    path.write_text(json.dumps(doc))
    res = run_cli("simulate", str(path), "-n", "16")
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotshard: error:"), res.stderr
    assert "7.78e+09 requests, more than the 1e+09" in lines[0]
