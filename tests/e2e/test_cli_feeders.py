"""`hotshard generate --format k6 | csv-feeder` as a user runs it, and the example scripts that
read the files: examples/k6/script.js (under Node.js with stand-ins for k6's modules, and
under k6 itself where it is installed) and examples/feeder_locustfile.py (a real headless
Locust process). Each script runs against a loopback HTTP server started by the test, which
records the channel of every request.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, run_cli
from tests.drive._servers import serving_in_thread

K6_SCRIPT = ROOT / "examples" / "k6" / "script.js"
LOCUSTFILE = ROOT / "examples" / "feeder_locustfile.py"
# text keys a URL, a CSV reader and a JSON parser each must take care of
TEXT_KEYS = ["a,b", 'say "hi"', "a/b", "a b", "ünï ☃", "back\\slash", "50%", "q?x=1#y"]
# integer IDs a JavaScript number cannot hold exactly (2^53 + 1, the int64 maximum)
BIG_IDS = [9_007_199_254_740_993, 9_223_372_036_854_775_807]


def _one_error_line(res) -> str:
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotshard: error: "), res.stderr
    return lines[0]


def _generate(profile: Path, out: Path, *args: str) -> None:
    res = run_cli("generate", str(profile), "--seed", "3", "-o", str(out), "-q", *args)
    assert res.returncode == 0, res.stderr


def _parquet_keys(profile: Path, tmp_path: Path, events: str) -> list[str]:
    out = tmp_path / "reference.parquet"
    _generate(profile, out, "--messages", events)
    return [str(k) for k in pq.read_table(out, columns=["channel_id"]).column(0).to_pylist()]


def _profile_of(keys: list, tmp_path: Path, name: str) -> Path:
    """A profile of a trace of these keys, made by `hotshard profile` (each key seen often)."""
    trace, profile = tmp_path / f"{name}.parquet", tmp_path / f"{name}.json"
    pq.write_table(pa.table({"key": keys * 40}), trace)
    res = run_cli("profile", str(trace), "--key", "key", "-o", str(profile))
    assert res.returncode == 0, res.stderr
    return profile


@pytest.fixture
def text_profile(tmp_path) -> Path:
    return _profile_of(TEXT_KEYS, tmp_path, "text")


def test_k6_and_csv_feeder_hold_the_parquet_keys_in_order(tmp_path, web07_path):
    keys = _parquet_keys(web07_path, tmp_path, "2e4")
    _generate(web07_path, tmp_path / "keys.json", "--messages", "2e4", "--format", "k6")
    assert json.loads((tmp_path / "keys.json").read_text()) == keys
    _generate(web07_path, tmp_path / "keys.csv", "--messages", "2e4", "--format", "csv-feeder")
    assert (tmp_path / "keys.csv").read_text().splitlines() == ["channel_id", *keys]


def test_text_keys_survive_both_layouts(tmp_path, text_profile):
    keys = _parquet_keys(text_profile, tmp_path, "2000")
    assert set(keys) == set(TEXT_KEYS)
    _generate(text_profile, tmp_path / "keys.json", "--messages", "2000", "--format", "k6")
    assert json.loads((tmp_path / "keys.json").read_text(encoding="utf-8")) == keys
    _generate(text_profile, tmp_path / "keys.csv", "--messages", "2000", "--format",
              "csv-feeder")
    with (tmp_path / "keys.csv").open(newline="", encoding="utf-8") as handle:
        assert [row for [row] in csv.reader(handle)] == ["channel_id", *keys]


@pytest.mark.parametrize("fmt", ["k6", "csv-feeder"])
def test_feeders_stream_to_stdout(tmp_path, web07_path, fmt):
    _generate(web07_path, tmp_path / "file", "--messages", "5000", "--format", fmt)
    res = run_cli("generate", str(web07_path), "--seed", "3", "--messages", "5000", "--format",
                  fmt, "-o", "-")
    assert res.returncode == 0, res.stderr
    assert res.stdout == (tmp_path / "file").read_text()


def test_a_json_name_alone_is_json_lines_with_a_note(tmp_path):
    out = tmp_path / "keys.json"
    res = run_cli("generate", "--dist", "uniform:10", "--messages", "3", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "hotshard: note: " in res.stderr and "choose the k6 format" in res.stderr
    assert [set(json.loads(line)) >= {"channel_id", "op"}
            for line in out.read_text().splitlines()] == [True] * 3


@pytest.mark.parametrize(("name", "fmt", "words"), [
    ("keys.jsonl", "k6", "keys.jsonl names a jsonl file but the format is k6"),
    ("keys.parquet", "csv-feeder", "(csv-feeder is written as .csv)"),
    ("keys.csv", "k6", "(k6 is written as .json)"),
])
def test_a_name_of_another_format_is_refused(tmp_path, name, fmt, words):
    res = run_cli("generate", "--dist", "uniform:10", "--messages", "10", "-o",
                  str(tmp_path / name), "--format", fmt)
    assert words in _one_error_line(res)
    assert not list(tmp_path.iterdir())


def test_verify_reads_csv_feeder_and_k6_files(tmp_path, web07_path):
    feeder, k6 = tmp_path / "keys.csv", tmp_path / "keys.json"
    _generate(web07_path, feeder, "--messages", "2e5", "--format", "csv-feeder")
    res = run_cli("generate", "verify", str(web07_path), str(feeder))
    assert res.returncode == 0, res.stdout + res.stderr
    # a feeder records no order: its exact counts (locality order) pass the exact checks
    assert "PASS  head counts" in res.stdout and "PASS  tail counts" in res.stdout
    _generate(web07_path, k6, "--messages", "2e5", "--format", "k6")
    res = run_cli("generate", "verify", str(web07_path), str(k6))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "PASS  head counts" in res.stdout and "PASS  tail counts" in res.stdout


def test_help_names_the_feeders():
    res = run_cli("generate", "--help")
    assert res.returncode == 0
    text = " ".join(res.stdout.split())
    assert "[parquet|csv|jsonl|k6|csv-feeder]" in text
    assert "SharedArray" in text and "JMeter" in text and "2^53" in text


# ---- the example scripts -------------------------------------------------------------------


class _Target(ThreadingHTTPServer):
    """Loopback HTTP/1.1 server: 200 to GET /channels/{channel}/messages, recording each
    channel (URL-decoded) in arrival order."""

    daemon_threads = True

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.channels: list[str] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        parts = urlsplit(self.path).path.split("/")
        ok = len(parts) == 4 and parts[1] == "channels" and parts[3] == "messages"
        if ok:
            with self.server.lock:
                self.server.channels.append(unquote(parts[2]))
        body = b'{"messages":[]}' if ok else b""
        self.send_response(200 if ok else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def target():
    with serving_in_thread(_Target()) as server:
        yield server


def _in_order_from_the_top(seen: list[str], keys: list[str], slack: int) -> None:
    """``seen`` are the first keys of the endless cycle through ``keys``, give or take the
    ``slack`` requests in flight (taken but not yet arrived, or arrived out of turn)."""
    cycle = (keys * (len(seen) // len(keys) + 2))[: len(seen) + slack]
    assert seen and not Counter(seen) - Counter(cycle), (seen[:10], keys[:10])


_K6_STANDINS = {  # just enough of k6's modules for the script to run under Node.js
    "index.js": "export function check(value, sets) {\n"
                "  return Object.values(sets).every((f) => f(value));\n}\n",
    "data.js": "export class SharedArray {\n"
               "  constructor(name, make) {\n"
               "    const array = make();\n"
               "    if (!Array.isArray(array)) throw new Error('SharedArray: not an array');\n"
               "    return Object.freeze(array);\n  }\n}\n",
    "http.js": "export default { get(url, params) {\n"
               "  globalThis.requests.push({ url, params });\n"
               "  return { status: 200 };\n} };\n",
    "execution.js": "export default { scenario: {\n"
                    "  get iterationInTest() { return globalThis.iteration; },\n} };\n",
}
_K6_HARNESS = """
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [script, keys, iterations] = process.argv.slice(2);
globalThis.__ENV = { BASE_URL: 'http://target', KEYS: keys };
globalThis.open = (p) => fs.readFileSync(path.resolve(path.dirname(script), p), 'utf8');
globalThis.requests = [];
const mod = await import(pathToFileURL(script));
for (let i = 0; i < Number(iterations); i++) {
  globalThis.iteration = i;
  mod.default();
}
console.log(JSON.stringify({ options: mod.options, requests: globalThis.requests }));
"""


def _run_k6_script_under_node(tmp_path: Path, keys: Path, iterations: int) -> dict:
    package = tmp_path / "node_modules" / "k6"
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({
        "name": "k6", "type": "module",
        "exports": {".": "./index.js", "./data": "./data.js", "./http": "./http.js",
                    "./execution": "./execution.js"}}))
    for name, text in _K6_STANDINS.items():
        (package / name).write_text(text)
    script = tmp_path / "script.mjs"  # the example, as an ES module beside the stand-ins
    shutil.copy(K6_SCRIPT, script)
    (tmp_path / "harness.mjs").write_text(_K6_HARNESS)
    proc = subprocess.run(["node", "harness.mjs", str(script), str(keys), str(iterations)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("keys_of", ["text", "big ids"])
def test_the_k6_script_reads_the_keys_in_order_open_loop(tmp_path, keys_of):
    profile = _profile_of(TEXT_KEYS if keys_of == "text" else BIG_IDS, tmp_path, "p")
    keys_file = tmp_path / "keys.json"
    _generate(profile, keys_file, "--messages", "50", "--format", "k6")
    keys = json.loads(keys_file.read_text(encoding="utf-8"))
    run = _run_k6_script_under_node(tmp_path / "node", keys_file, iterations=len(keys) + 7)
    scenario = run["options"]["scenarios"]["hotshard_keys"]
    assert scenario["executor"] == "constant-arrival-rate"  # an open model
    assert scenario["rate"] > 0 and scenario["maxVUs"] >= scenario["preAllocatedVUs"]
    channels = []
    for request in run["requests"]:
        url = urlsplit(request["url"])
        assert url.netloc == "target" and url.query == "limit=50"
        _, first, channel, last = url.path.split("/")
        assert (first, last) == ("channels", "messages")
        channels.append(unquote(channel))
        assert request["params"]["tags"]["name"] == "GET /channels/{channel}/messages"
    assert channels == keys + keys[:7]  # iteration i reads key i, wrapping at the end
    if keys_of == "big ids":  # exact digits: strings, not JavaScript numbers
        assert set(channels) == {str(k) for k in BIG_IDS}


# locust is never imported here (it patches the standard library): it runs as a subprocess
def test_the_locust_feeder_sends_the_file_keys_in_order(tmp_path, text_profile, target):
    keys_file = tmp_path / "keys.csv"
    _generate(text_profile, keys_file, "--messages", "30", "--format", "csv-feeder")
    with keys_file.open(newline="", encoding="utf-8") as handle:
        keys = [row for [row] in csv.reader(handle)][1:]
    users = 2
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", str(users),
         "-r", str(users), "-t", "3s", "--host", target.url, "--feeder", str(keys_file),
         "--feeder-user-rate", "25", "--only-summary", "--loglevel", "WARNING"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    seen = list(target.channels)
    assert len(seen) > len(keys)  # 2 users at 25/s for 3 s: round the 30 keys again
    _in_order_from_the_top(seen, keys, slack=users)
    assert "/channels/[channel]/messages" in proc.stdout + proc.stderr  # one stats row
