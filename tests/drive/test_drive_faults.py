"""A run that went wrong must look wrong: failures apart from successes, an invalid run marked
and exiting 3, and diagnose/report leaving an invalid run's latency out.

The targets are real processes on loopback (tests/drive/_servers.py): one that exits mid-run
(a killed gateway: connections reset, new ones refused) and one that accepts and never answers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hotshard.drive.breakdown import error_block, run_is_valid, summary, to_observations
from hotshard.drive.record import Recorder
from hotshard.drive.run import DriveConfig, DriveResult
from hotshard.observations import Observations
from tests.drive._servers import run_server, wait_for_requests

ROOT = Path(__file__).resolve().parents[2]
HOTSHARD = [sys.executable, "-m", "hotshard"]


def _drive(url: str, tmp_path: Path, *extra: str, timeout: float = 60.0,
           request_timeout: str = "5s") -> tuple[subprocess.CompletedProcess, dict | None]:
    """`hotshard drive URL` for 3 s at 300/s. Each request may take ``request_timeout``:
    generous, so a run whose failures are refusals and resets never also times out because
    the machine was busy (these tests run beside others); the test of timeouts sets it."""
    out = tmp_path / "obs.json"
    proc = subprocess.run([*HOTSHARD, "drive", url, "--dist", "uniform:1000", "--rps", "300",
                           "--duration", "3s", "--timeout", request_timeout, "-o", str(out),
                           *extra],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    doc = json.loads(out.read_text()) if out.exists() else None
    return proc, doc


# timing: which errors a run sees depends on the server answering within the request timeout
# and on where the kill falls in the run; starved beside the rest of the suite, a live server's
# answer can take longer than the timeout and show as an error the test does not expect
@pytest.mark.timing
def test_a_gateway_killed_mid_run_is_an_invalid_run_exit_3(tmp_path):
    with run_server("dies", stall_after_s=1.0) as url:
        proc, doc = _drive(url, tmp_path)
    assert proc.returncode == 3, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("WARNING: invalid run:") and "--max-error-rate 1%" in first
    assert "Traceback" not in proc.stderr
    errors = doc["errors"]
    assert doc["valid"] is False
    # about 2 of the 3 s were against a dead server: well over the 1% limit
    assert 0.4 < errors["share"] < 0.9
    assert set(errors["by_kind"]) <= {"connection refused", "connection reset", "connect error"}
    assert errors["failed"] == sum(errors["by_kind"].values())
    # every arrival is accounted for: ok + failed + dropped + unfinished
    drive = doc["drive"]
    assert drive["ok"] + errors["failed"] + errors["dropped"] + errors["unfinished"] \
        == errors["attempted"] == drive["sent"] + drive["dropped"]
    # the achieved rate is of successes: about a third of the target
    assert doc["achieved_rps"] == pytest.approx(drive["ok"] / doc["duration_s"])
    assert doc["achieved_rps"] < 0.6 * doc["rate_rps"]


@pytest.mark.timing  # the timeouts' own latency and the run's wall time are its subject
def test_a_listener_that_never_answers_is_all_timeouts_with_no_latency(tmp_path):
    with run_server("silent") as url:
        started = time.monotonic()
        proc, doc = _drive(url, tmp_path, request_timeout="0.5s")
        took = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith("WARNING: invalid run: 100% of")
    assert doc["valid"] is False and doc["errors"]["share"] == 1.0
    assert set(doc["errors"]["by_kind"]) == {"timeout"}
    assert "latency_ms" not in doc  # no success: no success latency, not the timeouts'
    # the failures' own timing is the timeout (0.5 s), measured from the intended time
    assert 500 <= doc["errors"]["latency_ms"]["p50"] < 600
    # bounded by the timeout: the run, its drain and the /stats probes, not minutes
    assert took < 3 + 0.5 + 2 * 0.5 + 15


@pytest.mark.slow
def test_a_healthy_run_is_valid_and_a_looser_limit_is_honoured(tmp_path):
    with run_server("fast") as url:
        proc, doc = _drive(url, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert doc["valid"] is True and doc["errors"]["share"] == 0
    assert not proc.stdout.startswith("WARNING")
    with run_server("dies", stall_after_s=1.0) as url:
        proc, doc = _drive(url, tmp_path, "--max-error-rate", "100")
    assert proc.returncode == 0 and doc["valid"] is True and doc["errors"]["share"] > 0.3


def test_rates_no_process_can_schedule_are_refused_before_anything_runs(tmp_path):
    proc, doc = _drive("http://127.0.0.1:9", tmp_path, "--rps", "1e9")
    assert proc.returncode == 2 and doc is None
    assert "at most 50,000/s each" in proc.stderr and "Locust" in proc.stderr
    proc, _ = _drive("http://127.0.0.1:9", tmp_path, "--rps", "120000")
    assert proc.returncode == 2 and "use --workers 3" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# -- the recorder and the observations, without a network ---------------------------------------
def _result(recorder: Recorder, sent: int, **config) -> DriveResult:
    cfg = DriveConfig(url="http://127.0.0.1:9", keys="uniform:10", rate=100, duration=1,
                      **config)
    return DriveResult(cfg, recorder, 1.0, sent, 0.0, "uniform")


def test_failures_stay_out_of_the_latency_and_land_in_their_shard():
    rec = Recorder()
    for i in range(90):
        rec.record(intended=i / 100, sent=i / 100, done=i / 100 + 0.050, shard="0",
                   error=None, is_read=True, key=f"k{i}")
    for i in range(10):  # instant failures: they must not pull the percentiles down
        rec.record(intended=i / 100, sent=i / 100, done=i / 100 + 0.0001, shard="1",
                   error="redis CLUSTERDOWN", is_read=True, key=f"j{i}")
    assert rec.latency.get_total_count() == 90 and rec.error_latency.get_total_count() == 10
    assert rec.latency.get_value_at_percentile(1) >= 49_000  # µs: only the 50 ms successes
    obs = to_observations(_result(rec, 100), "load test")
    assert obs.valid is False and obs.errors["share"] == pytest.approx(0.10)
    assert obs.errors["by_kind"] == {"redis CLUSTERDOWN": 10}
    by_id = {s.id: s for s in obs.shards}
    assert by_id["1"].errors == 10 and by_id["1"].requests == 10 and by_id["1"].p99_ms is None
    assert by_id["1"].extra["error_kinds"] == {"redis CLUSTERDOWN": 10}
    assert by_id["0"].errors == 0 and by_id["0"].p99_ms == pytest.approx(50, rel=0.01)
    lines = summary(_result(rec, 100), obs)
    assert lines[0].startswith("WARNING: invalid run: 10% of 100 requests failed")
    assert any("10 (100%: redis CLUSTERDOWN 10)" in line for line in lines)
    # merged across processes, nothing is lost
    other = Recorder()
    other.merge(rec.encode())
    assert other.shards["1"].error_kinds == {"redis CLUSTERDOWN": 10}
    assert other.error_latency.get_total_count() == 10


def test_the_error_share_counts_drops_and_requests_never_answered():
    rec = Recorder()
    for _ in range(97):
        rec.record(intended=0, sent=0, done=0.01, shard=None, error=None, is_read=True,
                   key="k")
    rec.drop(0.5)
    block = error_block(_result(rec, 99, max_error_rate=0.02))  # 2 sent, never came back
    assert (block["attempted"], block["dropped"], block["unfinished"]) == (100, 1, 2)
    assert block["share"] == pytest.approx(0.03) and not run_is_valid(block)
    assert run_is_valid(error_block(_result(rec, 99, max_error_rate=0.05)))
    assert not run_is_valid(error_block(_result(Recorder(), 0)))  # nothing sent: no run
    # a run stopped by the user: requests still out after the grace period failed too
    stopped = dataclasses.replace(_result(rec, 99, max_error_rate=0.02), interrupted=True)
    block = error_block(stopped)
    assert (block["attempted"], block["unfinished"]) == (100, 2) and not run_is_valid(block)


# -- the readers honour valid: false ---------------------------------------------------------------
def _invalid_test_run() -> Observations:
    return Observations.from_dict({
        "format": "hotshard.observations/1", "label": "load test", "model": "open",
        "rate_rps": 100, "key_generator": "uniform", "latency_ms": {"p50": 0.1, "p99": 0.3},
        "shards": [{"id": str(i), "requests": 250, "p99_ms": 0.3} for i in range(4)],
        "valid": False, "errors": {"share": 0.63, "attempted": 1000, "failed": 630,
                                   "max_error_rate": 0.01, "by_kind": {"timeout": 630}}})


def test_observations_validate_the_errors_block():
    from hotshard.observations import ObservationsError

    doc = _invalid_test_run().to_dict()
    assert Observations.from_dict(doc).invalid_reason == (
        "'load test' is not a valid run: 63% of its requests failed (limit 1%)")
    with pytest.raises(ObservationsError, match="errors.share must be a fraction"):
        Observations.from_dict({**doc, "errors": {"share": 63}})
    with pytest.raises(ObservationsError, match="valid must be true or false"):
        Observations.from_dict({**doc, "valid": "no"})
    assert Observations(label="production").is_valid


def test_diagnose_and_report_leave_an_invalid_runs_latency_out(tmp_path):
    from hotshard.diagnose.engine import diagnose
    from hotshard.diagnose.text import diagnosis_text
    from hotshard.report.html import build_report

    production = Observations.load(ROOT / "examples" / "incident-production.json")
    test = _invalid_test_run()
    result = diagnose(production, test)
    assert len(result.warnings) == 1 and "63% of its requests failed" in result.warnings[0]
    text = diagnosis_text(result).splitlines()
    assert text[1].startswith("WARNING: 'load test' is not a valid run")
    # its p99 (0.3 ms) is not used: nothing in the verdicts quotes it
    assert "0.3 ms" not in diagnosis_text(result)
    assert json.loads(json.dumps(result.to_dict()))["warnings"] == list(result.warnings)
    html = build_report([production, test])
    assert '<div class="warning"><b>Warning.</b> &#x27;load test&#x27; is not a valid run' in html
    # its shards are left out too: a run whose shard 1 answered nothing (frozen) looks like
    # a hot shard 0 to anyone who counts only the answers
    frozen = Observations.from_dict({
        **_invalid_test_run().to_dict(), "label": "production",
        "shards": [{"id": "0", "requests": 2000}, {"id": "1", "requests": 0}]})
    judged = diagnose(frozen, None)
    assert judged.finding("key-skew").verdict == "cannot judge"
    assert "per-shard figures are left out" in judged.warnings[0]


def test_the_demo_stops_rather_than_tell_its_story_on_failed_requests():
    from hotshard import demo
    from hotshard.errors import HotshardError

    settings = demo.QUICK
    with run_server("dies", stall_after_s=0.5) as url, \
            pytest.raises(HotshardError, match=r"the demo's 'uniform keys' run failed: .*"
                                               r"not a valid run: .*connection refused"):
        demo._drive(url, "uniform:1000", settings, 2.0, "uniform keys", 1, lambda _: None)


# -- stopped early ---------------------------------------------------------------------------------
def _started(url: str, tmp_path: Path, *extra: str) -> subprocess.Popen:
    out = tmp_path / "obs.json"
    return subprocess.Popen(
        [*HOTSHARD, "drive", url, "--dist", "uniform:1000", "--rps", "200", "--duration",
         "30s", "-o", str(out), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=ROOT, start_new_session=True)


def _stop_after(proc: subprocess.Popen, seconds: float, signum: int) -> tuple[str, str]:
    import signal as signals

    time.sleep(seconds)
    proc.send_signal(signum)
    try:
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signals.SIGKILL)


def test_ctrl_c_of_a_healthy_run_writes_it_and_exits_130(tmp_path):
    import signal as signals

    with run_server("fast") as url:
        proc = _started(url, tmp_path)
        stdout, stderr = _stop_after(proc, 4.0, signals.SIGINT)
    assert proc.returncode == 130, stderr
    doc = json.loads((tmp_path / "obs.json").read_text())
    assert doc["drive"]["interrupted"] is True and doc["valid"] is True
    assert "(interrupted)" in stdout.splitlines()[0] and "exit status 130" in stderr


@pytest.mark.slow
@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_stop_with_requests_stuck_counts_them_as_failed(tmp_path, processes):
    """A listener that never answers, stopped by SIGTERM once it holds 150 requests, with the
    default 30 s timeout: every request is still out; after the grace period they are unfinished
    failures, so the run is invalid (exit 3), not a valid run of nothing."""
    import signal as signals

    with run_server("silent") as url:
        proc = _started(url, tmp_path, "--workers", processes)
        # the run really under way (spawned processes start late on a loaded machine)
        held = wait_for_requests(url, 150)
        stdout, stderr = _stop_after(proc, 0.0, signals.SIGTERM)
    assert held >= 150, f"the silent server saw {held} requests in 60 s"
    assert proc.returncode == 3, (stdout, stderr)
    doc = json.loads((tmp_path / "obs.json").read_text())
    errors = doc["errors"]
    assert doc["valid"] is False and errors["share"] == 1.0
    assert errors["unfinished"] == errors["attempted"] > 100
    assert "unfinished (no answer by the end, counted as failed)" in stdout


@pytest.mark.slow
def test_a_reader_that_goes_away_loses_neither_the_file_nor_the_status(tmp_path):
    out = tmp_path / "obs.json"
    with run_server("silent") as url:
        shell = (f"{sys.executable} -m hotshard drive {url} --dist uniform:100 --rps 100 "
                 f"--duration 2s --timeout 0.5s -o {out} | head -c 1; "
                 "echo \" ${PIPESTATUS[0]}\"")
        res = subprocess.run(["bash", "-c", shell], capture_output=True, text=True,
                             cwd=ROOT, timeout=60)
    assert res.stdout.endswith(" 3\n"), (res.stdout, res.stderr)
    assert json.loads(out.read_text())["valid"] is False
    assert "Traceback" not in res.stderr
