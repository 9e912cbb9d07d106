"""`observe prometheus --preset node` and `--preset process` against live exporters: a real
Prometheus scraping Debian's node_exporter and a "burner" process (one core spinning, its
``process_cpu_seconds_total`` served as client libraries' process collector serves it) every
quarter second, checked against /proc over the same window.

What is compared. The node preset's CPU of the node_exporter instance is the machine's busy
fraction, all CPUs together: the rate of node_cpu_seconds_total in modes other than idle and
iowait over the rate of all modes, which is /proc/stat's first line read at the window's edges,
(total - idle - iowait) / total. The process preset's CPU of the burner instance is its CPU
seconds per second; /proc/<pid>/stat's utime + stime (clock ticks) read at the window's edges
give the same.

Why the tolerance. Prometheus holds samples at its scrapes, every SCRAPE_S: both presets give the
average over the span between the first and the last scrape inside the window (the process
preset's counter deltas over that span; the node preset's ratio of two rate()s, whose
extrapolations to the range's edges cancel), while /proc is read at the window's edges. Each
edge can be off by up to one scrape interval, and over that second the load may be anything in
[0, 1] (the burner shares 2 cores with Prometheus, the exporter and whatever else the machine
runs), so the two averages can differ by up to 2 * SCRAPE_S / window of a fraction in [0, 1]:
0.2 for a 2.5 s window scraped every 0.25 s (as for 10 s at 1 s: the bound is the ratio, so the
test scrapes four times a second and waits a quarter as long, spinning a core for 2.5 s).
Clock ticks (0.01 s at each edge of each counter, read by /proc and by the exporters alike) add
4 x 0.01 / 2.5 = 0.016 at most, rounded up to 0.02. (Read at the first and last scrapes' own
times instead, /proc agreed with both presets to within 0.002 when this test was written, with
1 s scrapes over 10 s.)
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hotshard.observe.prometheus import PRESETS
from tests.conftest import run_cli
from tests.observe._prom import free_port, need, prometheus, scrapes, stop

pytestmark = pytest.mark.timing

SCRAPE_S = 0.25
WINDOW_S = 2.5
TOLERANCE = 2 * SCRAPE_S / WINDOW_S + 0.02
TICK = os.sysconf("SC_CLK_TCK")

# One core spinning in the main thread from GET /spin to GET /rest (the window and the scrape
# after it, not Prometheus' start nor the observe commands after); /metrics from a
# background thread with the process collector's process_cpu_seconds_total (user + system
# CPU seconds of the process).
BURNER = '''\
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


spinning = threading.Event()


class Metrics(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path in ("/spin", "/rest"):
            spinning.set() if self.path == "/spin" else spinning.clear()
            self.send_response(204)
            self.end_headers()
            return
        if self.path != "/metrics":
            self.send_error(404)
            return
        times = os.times()
        body = ("# HELP process_cpu_seconds_total Total user and system CPU time spent in "
                "seconds.\\n"
                "# TYPE process_cpu_seconds_total counter\\n"
                f"process_cpu_seconds_total {times.user + times.system!r}\\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", int(sys.argv[1])), Metrics)
threading.Thread(target=server.serve_forever, daemon=True).start()
while True:
    spinning.wait()
    while spinning.is_set():
        pass
'''


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


def _machine() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs from /proc/stat: the first 8 fields (guest time
    is already inside user and nice); busy leaves out idle and iowait."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    return sum(fields) - idle - iowait, sum(fields)


def _process_seconds(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICK


def _wait_http(url: str, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited with status {proc.returncode}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as r:
            if r.status == 200:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not answer {url} within 20 s")
        time.sleep(0.1)


@contextlib.contextmanager
def _started(args: list[str], url: str, what: str, log: Path) -> Iterator[subprocess.Popen]:
    """Start ``args``, wait until ``url`` answers, stop it (by this pid) afterwards."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_http(url, proc, what)
            yield proc
        finally:
            stop(proc)


def _observe(prom: str, t0: float, t1: float, out: Path, *args: str) -> dict:
    r = run_cli("observe", "prometheus", prom, "--start", _rfc3339(t0), "--end", _rfc3339(t1),
                *args, "-o", str(out))
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


def test_presets_node_and_process_match_proc(tmp_path):
    node_port, burner_port = free_port(), free_port()
    node_target, burner_target = f"127.0.0.1:{node_port}", f"127.0.0.1:{burner_port}"
    script = tmp_path / "burner.py"
    script.write_text(BURNER)
    node_exporter = [need("prometheus-node-exporter"), f"--web.listen-address={node_target}",
                     "--collector.disable-defaults", "--collector.cpu"]
    jobs = {"node": {"static_configs": [{"targets": [node_target]}]},
            "burner": {"static_configs": [{"targets": [burner_target]}]}}
    with _started(node_exporter, f"http://{node_target}/metrics", "node_exporter",
                  tmp_path / "node_exporter.log"), \
            _started([sys.executable, str(script), str(burner_port)],
                     f"http://{burner_target}/metrics", "the burner",
                     tmp_path / "burner.log") as burner, \
            prometheus(tmp_path / "prom", jobs, SCRAPE_S) as prom:
        started = time.time()
        for job in jobs:  # Prometheus' first scrapes come seconds after it is ready
            scrapes(prom, job, started, targets=1)
        urllib.request.urlopen(f"http://{burner_target}/spin", timeout=5).close()
        t0 = time.time()
        busy0, total0 = _machine()
        cpu0 = _process_seconds(burner.pid)
        time.sleep(max(0.0, t0 + WINDOW_S - time.time()))  # the window itself
        t1 = time.time()
        busy1, total1 = _machine()
        cpu1 = _process_seconds(burner.pid)
        for job in jobs:  # Prometheus holds the window's last scrapes
            scrapes(prom, job, t1, targets=1)
        urllib.request.urlopen(f"http://{burner_target}/rest", timeout=5).close()
        node = _observe(prom, t0, t1, tmp_path / "node.json", "--preset", "node")
        process = _observe(prom, t0, t1, tmp_path / "process.json", "--preset", "process")
        # an arbitrary --requests PROMQL: node_exporter's own /metrics requests, one a scrape
        scraped = _observe(prom, t0, t1, tmp_path / "scraped.json", "--preset", "process",
                           "--requests", "sum by (instance) (increase("
                           "promhttp_metric_handler_requests_total[$__range]))")
        bad = tmp_path / "bad.json"
        r = run_cli("observe", "prometheus", prom, "--start", f"{t0:.3f}", "--end",
                    f"{t1:.3f}", "--preset", "process", "--cpu",
                    "rate(process_cpu_seconds_total[$__range]", "-o", str(bad))
    machine_busy = (busy1 - busy0) / (total1 - total0)
    burner_cpu = (cpu1 - cpu0) / (t1 - t0)
    node_shards = {s["id"]: s for s in node["shards"]}
    process_shards = {s["id"]: s for s in process["shards"]}
    print(f"node {node_shards[node_target]['cpu']:.4f} vs /proc/stat {machine_busy:.4f}; "
          f"burner {process_shards[burner_target]['cpu']:.4f} vs /proc {burner_cpu:.4f}")
    assert set(node_shards) == {node_target}
    assert set(process_shards) == {node_target, burner_target}  # node_exporter's own process
    # the burner spins a core: ~1 (`make test` runs the other tests at idle priority), more
    # than half of one even when others' work shares the 2 cores
    assert burner_cpu > 0.5, burner_cpu
    assert abs(node_shards[node_target]["cpu"] - machine_busy) <= TOLERANCE, (
        node_shards, machine_busy)
    assert node_shards[node_target]["node"] == node_target
    assert abs(process_shards[burner_target]["cpu"] - burner_cpu) <= TOLERANCE, (
        process_shards, burner_cpu)
    assert PRESETS["node"].cpu_note in node["observe"]["notes"]  # a machine's, not a core's
    for obs, preset in ((node, PRESETS["node"]), (process, PRESETS["process"])):
        notes = obs["observe"]["notes"]
        assert f"requests per shard left out: {preset.why_no_requests}" in notes, notes
        assert f"latency left out: {preset.why_no_latency}" in notes, notes
        assert all("requests" not in s and "p99_ms" not in s for s in obs["shards"])
        assert "latency_ms" not in obs and "rate_rps" not in obs
    # increase() over $__range counts the window's scrapes (extrapolated to its edges, rounded
    # to whole requests: 0.5 at most), so the rate over the window is one a scrape interval
    window = t1 - t0
    requests = {s["id"]: s.get("requests") for s in scraped["shards"]}
    assert requests[burner_target] is None  # the burner serves no such counter
    assert requests[node_target] == pytest.approx(window / SCRAPE_S, abs=0.5)
    assert scraped["duration_s"] == pytest.approx(window, abs=0.002)  # the times' milliseconds
    assert scraped["rate_rps"] == pytest.approx(1 / SCRAPE_S, abs=0.5 / window + 0.001)
    # a PromQL syntax error is one line naming Prometheus' complaint, and no file
    assert r.returncode == 2
    assert r.stderr.startswith("hotshard: error: Prometheus at ") and "bad_data" in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not bad.exists()
