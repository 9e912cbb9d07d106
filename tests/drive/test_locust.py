"""hotshard.drive.locust: a real Locust master and workers on loopback, against a tiny target.

Locust monkey-patches the standard library for gevent when imported, so this suite never
imports ``hotshard.drive.locust``: every Locust process is a subprocess running
``examples/locustfile.py``, stopped by the pid the test started. The target is a threaded
HTTP/1.1 server in the test process that answers 200 at once and records what it got.

What the schedule should produce is known exactly: ``Schedule.for_process`` and
``load_keys(...).batch`` are pure functions of the seed and the arrival index, so the test
computes the very requests the workers must send (count, keys, reads vs writes, each worker's
share) without running Locust, and compares.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from hotshard.drive.keys import load_keys
from hotshard.drive.schedule import Schedule
from tests.conftest import ROOT
from tests.drive._servers import serving_in_thread

if importlib.util.find_spec("locust") is None:  # never import it here: it patches the stdlib
    pytest.skip("locust is not installed (pip install hotshard[locust])",
                allow_module_level=True)

# timing: Locust's own clocks and rates on real processes; runs one at a time, the rest at
# idle priority (Makefile). The two tests of a run refused or failed as a whole (bad options;
# every request timing out) assert exit codes and messages only, so they run in the parallel
# pass.
timing = pytest.mark.timing

LOCUSTFILE = ROOT / "examples" / "locustfile.py"
KEYS = "uniform:20"


class _Target(ThreadingHTTPServer):
    """Loopback HTTP/1.1 keep-alive server: 200 to everything under /channels/, recording
    (monotonic time, method, key) of each request."""

    daemon_threads = True

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[float, str, str]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        parts = self.path.split("/")
        if len(parts) > 2 and parts[1] == "channels":
            with self.server.lock:
                self.server.seen.append((time.monotonic(), self.command, parts[2]))
            status, body = 200, b'{"messages":[]}'
        else:
            status, body = 404, b""
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def target():
    with serving_in_thread(_Target()) as server:
        yield server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _locust(log: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *args],
                            cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def _expected(rate: float, duration: float, seed: int, shares: int):
    """Per share, the arrival indices the schedule gives it; and keys/reads of them all."""
    schedule = Schedule(rate, duration, "poisson", 0.0, seed)
    per_share = [np.concatenate([i for i, _ in schedule.for_process(w, shares)])
                 for w in range(shares)]
    everything = np.sort(np.concatenate(per_share))
    keys, reads, _ = load_keys(KEYS, seed=seed).batch(everything)
    return per_share, Counter(keys), int(reads.sum()), int((~reads).sum())


@timing
def test_two_workers_send_the_schedule_and_the_master_merges_their_histograms(target,
                                                                              tmp_path):
    rate, duration, seed = 150.0, 4.0, 7
    out, port = tmp_path / "observations.json", _free_port()
    options = ["--host", target.url, "--hotshard-keys", KEYS, "--hotshard-rate", str(rate),
               "--hotshard-duration", str(duration), "--hotshard-seed", str(seed)]
    procs = []
    try:
        procs.append(_locust(tmp_path / "master.log", "--master", "--headless",
                             "--expect-workers", "2", "-u", "2", "-r", "2", "-t", "40s",
                             "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                             "--hotshard-out", str(out), "--csv", str(tmp_path / "locust"),
                             *options))
        for w in range(2):
            procs.append(_locust(tmp_path / f"worker{w}.log", "--worker", "--master-host",
                                 "127.0.0.1", "--master-port", str(port)))
        master = procs[0]
        try:
            code = master.wait(45)
        except subprocess.TimeoutExpired:
            pytest.fail("the master did not end the run: "
                        + (tmp_path / "master.log").read_text()[-3000:])
        for proc in procs[1:]:
            proc.wait(15)  # the master's quit stops the workers
    finally:
        _stop(procs)
    log = (tmp_path / "master.log").read_text()
    assert code == 0, log[-3000:]
    assert out.exists(), log[-3000:]
    doc = json.loads(out.read_text())
    drive, locust = doc["drive"], doc["locust"]

    # every request the server answered was recorded, and nothing else
    seen = list(target.seen)
    assert drive["interrupted"] is False and locust["unfinished"] == 0
    assert drive["completed"] == len(seen) == drive["ok"]
    assert doc["errors"]["by_kind"] == {} and drive["dropped"] == 0
    assert doc["errors"]["share"] == 0 and doc["valid"] is True

    # exactly the schedule's requests: its count, its keys, its reads and writes, split by share
    per_share, keys, reads, writes = _expected(rate, duration, seed, 2)
    assert drive["sent"] == sum(s.size for s in per_share) == len(seen)
    assert Counter(key for _, _, key in seen) == keys
    assert set(keys) <= {str(k) for k in range(20)}
    assert Counter(method for _, method, _ in seen) == {"GET": reads, "POST": writes}
    assert (drive["reads"], drive["writes"]) == (reads, writes)
    assert locust["workers"] == locust["workers_reported"] == doc["drive"]["processes"] == 2
    for row in locust["per_worker"]:
        assert row["sent"] == row["completed"] == per_share[row["share"]].size > 0

    # ...at the target rate: N ~ Poisson(rate x duration); 4 sd leaves ~6e-5 to chance
    expected = rate * duration
    assert abs(len(seen) - expected) < 4 * math.sqrt(expected)
    assert doc["rate_rps"] == rate
    assert abs(doc["achieved_rps"] - len(seen) / duration) < 1e-6
    # ...and on time: the server saw them over the schedule's span, not in a burst
    times = sorted(t for t, _, _ in seen)
    schedule = Schedule(rate, duration, "poisson", 0.0, seed)
    first = min(float(t[0]) for _, t in schedule.blocks())
    _, last = schedule.extent()
    assert abs((times[-1] - times[0]) - (last - first)) < 1.0
    assert drive["dispatch_lag_ms"]["p99"] < 500  # loose: a shared, noisy CI box

    # the merged histogram holds every request; Locust's own stats saw the same requests
    assert doc["latency_ms"]["max"] >= doc["latency_ms"]["p99"] >= doc["latency_ms"]["p50"] > 0
    with (tmp_path / "locust_stats.csv").open() as f:
        rows = {row["Name"]: row for row in csv.DictReader(f)}
    assert int(rows["Aggregated"]["Request Count"]) == len(seen)
    assert int(rows["Aggregated"]["Failure Count"]) == 0
    assert "merged HdrHistograms" in log
    # the time axis merges the workers' windows: every request in one window, by its intended
    # second
    assert sum(w["requests"] for w in doc["windows"]) == len(seen)
    assert doc["windows"][0]["start_s"] == 0 and doc["windows"][-1]["end_s"] >= duration - 1


@timing
def test_one_process_stopped_by_run_time_reports_what_it_sent(target, tmp_path):
    """Without workers the same file drives from one process; -t shorter than the schedule
    stops it, and the partial run says so (requests out at the stop are counted, not lost)."""
    out = tmp_path / "observations.json"
    proc = _locust(tmp_path / "local.log", "--headless", "-u", "1", "-r", "1", "-t", "3s",
                   "--host", target.url, "--hotshard-keys", KEYS, "--hotshard-rate", "100",
                   "--hotshard-duration", "30", "--hotshard-out", str(out))
    try:
        code = proc.wait(30)
    finally:
        _stop([proc])
    log = (tmp_path / "local.log").read_text()
    assert code == 0, log[-3000:]
    doc = json.loads(out.read_text())
    drive, locust = doc["drive"], doc["locust"]
    seen = len(target.seen)
    assert drive["interrupted"] is True
    assert locust["workers"] == locust["workers_reported"] == 1
    assert drive["completed"] <= seen <= drive["completed"] + locust["unfinished"]
    assert drive["sent"] == drive["completed"] + locust["unfinished"]
    # -t counts from the start of spawning, the schedule from 1 s later: ~2 s of 100/s (the
    # plug-in refreshes gevent's cached clock, else Locust's timer fired a second or more early)
    assert 0 < doc["duration_s"] < 3 and 50 < seen < 350
    assert "ends the run before the schedule" in log


def test_bad_options_stop_the_master_before_any_load(tmp_path):
    proc = _locust(tmp_path / "bad.log", "--headless", "-u", "1", "-t", "5s",
                   "--host", "http://127.0.0.1:9", "--hotshard-keys", "zipf:nope")
    try:
        code = proc.wait(30)
    finally:
        _stop([proc])
    log = (tmp_path / "bad.log").read_text()
    assert code == 2, log[-2000:]
    assert "hotshard: error: keys 'zipf:nope'" in log


@pytest.mark.slow
def test_a_run_whose_requests_fail_exits_3_with_the_warning(tmp_path):
    """A listener that never answers: every request times out. Locust's own exit code would
    be 0 (it counts no failure of its users); the plug-in marks the run invalid and exits 3."""
    from tests.drive._servers import run_server

    out = tmp_path / "observations.json"
    with run_server("silent") as url:
        proc = _locust(tmp_path / "fail.log", "--headless", "-u", "1", "-r", "1", "-t", "8s",
                       "--host", url, "--hotshard-keys", KEYS, "--hotshard-rate", "50",
                       "--hotshard-duration", "2", "--hotshard-timeout", "0.5",
                       "--hotshard-out", str(out))
        try:
            code = proc.wait(40)
        finally:
            _stop([proc])
    log = (tmp_path / "fail.log").read_text()
    assert code == 3, log[-3000:]
    assert "WARNING: invalid run: 100% of" in log
    doc = json.loads(out.read_text())
    assert doc["valid"] is False and set(doc["errors"]["by_kind"]) == {"timeout"}
