"""The file sources: k6 summaries, a real headless Locust run's --csv, dashboard CSVs; and
every source's bad input: one line naming what is missing, exit 2, nothing written.

The k6 files are written by hand (no k6 binary here) from k6's documentation: the
handleSummary layout from Grafana k6 docs, "Custom summary", section "Summary data reference"
(metrics[NAME] = {type, contains, values}, state.testRunDurationMs); the --summary-export
layout as that page's predecessor and k6's legacy export write it (each metric's values in
its own object; a Rate's passes/fails/value, passes being the true samples, on
http_req_failed the failed requests).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import run_cli

HANDLE_SUMMARY = {
    "root_group": {"name": "", "path": "", "groups": [], "checks": []},
    "options": {"summaryTrendStats": ["avg", "min", "med", "max", "p(90)", "p(95)", "p(99)"],
                "summaryTimeUnit": "", "noColor": False},
    "state": {"isStdOutTTY": False, "isStdErrTTY": False, "testRunDurationMs": 30898.965069},
    "metrics": {
        "http_reqs": {"type": "counter", "contains": "default",
                      "values": {"count": 6000, "rate": 194.18}},
        "http_req_duration": {"type": "trend", "contains": "time",
                              "values": {"avg": 41.2, "min": 2.1, "med": 12.5, "max": 2100.0,
                                         "p(90)": 80.0, "p(95)": 140.0, "p(99)": 800.0}},
        "http_req_duration{expected_response:true}": {
            "type": "trend", "contains": "time",
            "values": {"avg": 40.0, "min": 2.1, "med": 12.4, "max": 2050.0, "p(90)": 79.0,
                       "p(95)": 138.0, "p(99)": 790.0}},
        "http_req_failed": {"type": "rate", "contains": "default",
                            "values": {"rate": 0.005, "passes": 30, "fails": 5970}},
        "vus_max": {"type": "gauge", "contains": "default",
                    "values": {"value": 200, "min": 200, "max": 200}},
        "dropped_iterations": {"type": "counter", "contains": "default",
                               "values": {"count": 12, "rate": 0.39}},
        "http_reqs{shard:0}": {"type": "counter", "contains": "default",
                               "values": {"count": 4200, "rate": 135.9}},
        "http_reqs{shard:1}": {"type": "counter", "contains": "default",
                               "values": {"count": 1800, "rate": 58.3}},
        "http_req_duration{shard:0}": {"type": "trend", "contains": "time",
                                       "values": {"med": 30.0, "p(99)": 900.0}},
        "http_req_duration{shard:1}": {"type": "trend", "contains": "time",
                                       "values": {"med": 5.0, "p(99)": 40.0}},
    },
}
SUMMARY_EXPORT = {
    "root_group": {"name": "", "path": "", "id": "d41d8cd98f00b204e9800998ecf8427e",
                   "groups": {}, "checks": {}},
    "metrics": {
        "http_reqs": {"count": 180, "rate": 4.36938},
        "http_req_duration": {"avg": 144.56, "min": 104.11, "med": 110.47, "max": 1140.0,
                              "p(90)": 203.54, "p(95)": 215.95,
                              "thresholds": {"p(95)<500": False}},
        "http_req_failed": {"passes": 0, "fails": 180, "value": 0},
        "vus": {"value": 1, "min": 1, "max": 19},
    },
}


def _write(tmp_path, name, doc) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_k6_handle_summary(tmp_path):
    src = _write(tmp_path, "summary.json", HANDLE_SUMMARY)
    out = tmp_path / "test.json"
    r = run_cli("observe", "k6", src, "--executor", "constant-arrival-rate", "--shard-tag",
                "shard", "-o", str(out))
    assert r.returncode == 0, r.stderr
    obs = json.loads(out.read_text())
    assert obs["label"] == "load test" and obs["model"] == "open"
    assert obs["duration_s"] == 30.899 and obs["rate_rps"] == 194.18
    # successes only (expected_response:true), med -> p50, avg -> mean
    assert obs["latency_ms"] == {"min": 2.1, "p50": 12.4, "p90": 79.0, "p95": 138.0,
                                 "p99": 790.0, "max": 2050.0, "mean": 40.0}
    assert obs["errors"] == {"share": 0.005, "attempted": 6000, "failed": 30}
    assert [(s["id"], s["requests"], s["p99_ms"]) for s in obs["shards"]] == [
        ("0", 4200, 900.0), ("1", 1800, 40.0)]
    assert obs["observe"]["k6"]["dropped_iterations"] == 12


def test_k6_summary_export_without_executor_says_the_model_is_unknown(tmp_path):
    src = _write(tmp_path, "export.json", SUMMARY_EXPORT)
    r = run_cli("observe", "k6", src)
    assert r.returncode == 0, r.stderr
    obs = json.loads(r.stdout)
    assert "model" not in obs and "shards" not in obs
    assert obs["duration_s"] == pytest.approx(180 / 4.36938, abs=1e-3)
    assert obs["latency_ms"]["p50"] == 110.47 and obs["latency_ms"]["p95"] == 215.95
    assert obs["errors"]["failed"] == 0 and obs["errors"]["attempted"] == 180
    assert "model left out: k6 writes no executor" in r.stderr
    assert "failures included" in r.stderr


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = b"{}" if not self.path.startswith("/fail") else b"no"
        self.send_response(200 if body == b"{}" else 500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


LOCUSTFILE = """
from locust import HttpUser, constant_throughput, task

class U(HttpUser):
    wait_time = constant_throughput(20)

    @task(9)
    def ok(self):
        self.client.get("/channels/1/messages")

    @task(1)
    def fail(self):
        self.client.get("/fail")
"""


# timing: the run's duration as Locust's CSV records it (its stats history, a row a second)
# and its request count follow the wall clock; starved beside the rest of the suite, Locust
# writes fewer rows than the 4 s it ran
@pytest.mark.timing
@pytest.mark.skipif(importlib.util.find_spec("locust") is None, reason="locust not installed")
def test_locust_csv_of_a_real_headless_run(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        (tmp_path / "locustfile.py").write_text(LOCUSTFILE)
        run = subprocess.run(
            [sys.executable, "-m", "locust", "-f", str(tmp_path / "locustfile.py"),
             "--headless", "-u", "5", "-r", "5", "-t", "4s", "--csv", str(tmp_path / "run"),
             "--host", f"http://127.0.0.1:{server.server_address[1]}", "--only-summary"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert (tmp_path / "run_stats.csv").exists(), run.stderr[-2000:]
    out = tmp_path / "test.json"
    r = run_cli("observe", "locust", str(tmp_path / "run"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    obs = json.loads(out.read_text())
    import csv

    with open(tmp_path / "run_stats.csv") as f:
        total = next(row for row in csv.DictReader(f) if row["Name"] == "Aggregated")
    count, failed = int(total["Request Count"]), int(total["Failure Count"])
    assert obs["model"] == "closed" and obs["observe"]["locust"]["users_max"] == 5
    assert obs["errors"] == {"share": failed / count, "attempted": count, "failed": failed}
    # 5 users at 20/s for ~4 s: ~400 requests at most (fewer when Locust waits for CPU: this
    # test runs beside others, so the floor is a tenth), one in ten to /fail (binomial, a
    # 6 sd band at whatever count it made)
    assert 40 < count < 500
    assert abs(failed / count - 0.1) < 6 * (0.09 / count) ** 0.5
    assert obs["rate_rps"] == pytest.approx(float(total["Requests/s"]), abs=1e-3)
    assert obs["latency_ms"]["p50"] == float(total["50%"])
    assert 3 <= obs["duration_s"] <= 6


def test_dashboard_csv_per_shard(tmp_path):
    header = '"Time","cpu{shard=""0""}","cpu{shard=""1""}","other"\n'
    rows = "".join(f"{1733300000000 + 15000 * i},{a},{b},9\n"
                   for i, (a, b) in enumerate([(90, 20), (95, 22), (100, 18)]))
    (tmp_path / "cpu.csv").write_text("sep=,\n" + header + rows)
    (tmp_path / "rps.csv").write_text(
        "Time,shard 0,shard 1\n2024-12-04 08:13:20,100,10\n2024-12-04 08:13:35,200,10\n"
        "2024-12-04 08:13:50,300,10\n")
    r = run_cli("observe", "csv", f"cpu={tmp_path / 'cpu.csv'}",
                f"requests={tmp_path / 'rps.csv'}", "--shard-pattern",
                r"shard\D*(\d+)")
    assert r.returncode == 0, r.stderr
    obs = json.loads(r.stdout)
    shards = {s["id"]: s for s in obs["shards"]}
    assert shards["0"]["cpu"] == 0.95 and shards["1"]["cpu"] == 0.2  # percents, by range
    # rates times the step to the next row (15 s; the last row gets the median step)
    assert shards["0"]["requests"] == (100 + 200 + 300) * 15
    assert shards["1"]["requests"] == 3 * 10 * 15
    assert "read as percents" in r.stderr and "'other'" in r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["prometheus", "http://127.0.0.1:1", "--start", "-5m", "--preset", "hotshard"],
     "cannot reach Prometheus at http://127.0.0.1:1: connection refused"),
    (["prometheus", "http://127.0.0.1:1", "--start", "-5m"], "nothing to ask Prometheus"),
    (["prometheus", "http://127.0.0.1:1", "--start", "now", "--end", "-5m", "--cpu", "x"],
     "the window is empty"),
    (["prometheus", "http://127.0.0.1:1", "--start", "yesterday", "--cpu", "x"],
     "is not a time"),
    (["redis-cluster://127.0.0.1:1", "--duration", "1s"], "cannot reach Redis"),
    (["k6", "MISSING.json"], "no such k6 summary"),
    (["locust", "nothing"], "no Locust stats at"),
    (["csv", "FILE.csv"], "say what FILE.csv holds"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    out = tmp_path / "o.json"
    r = run_cli("observe", *args, "-o", str(out))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_file_of_another_tool_or_version(tmp_path):
    cases = {
        "obs.json": ({"format": "hotshard.observations/1", "label": "x"},
                     "a hotshard document"),
        "other.json": ({"results": []}, 'no "metrics" object'),
        "mixed.json": ({"metrics": {"a": {"values": {}}, "b": {"count": 1}}},
                       "a layout this version does not read"),
    }
    for name, (doc, message) in cases.items():
        r = run_cli("observe", "k6", _write(tmp_path, name, doc))
        assert r.returncode == 2 and message in r.stderr, (name, r.stderr)
    old = tmp_path / "old_stats.csv"  # Locust 0.x: "Method", "# requests", ...
    old.write_text('"Method","Name","# requests","# failures"\n"GET","/",10,0\n')
    r = run_cli("observe", "locust", str(tmp_path / "old"))
    assert r.returncode == 2 and "no column 'Type'" in r.stderr
    k6_as_locust = tmp_path / "k6_stats.csv"
    k6_as_locust.write_text("metric_name,timestamp,metric_value\nhttp_reqs,1,1\n")
    r = run_cli("observe", "locust", str(tmp_path / "k6"))
    assert r.returncode == 2 and "not Locust's --csv stats" in r.stderr
    (tmp_path / "p.csv").write_text("Time,series A\n1733300000000,1\n1733300015000,2\n")
    r = run_cli("observe", "csv", f"cpu={tmp_path / 'p.csv'}")
    assert r.returncode == 2 and "no column's name has a shard" in r.stderr
