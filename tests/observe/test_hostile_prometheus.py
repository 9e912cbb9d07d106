"""`observe prometheus` against a server that is not a well-behaved Prometheus: one answering a
byte every half second, one answering 300 MB, one redirecting elsewhere, one whose samples are
NaN or infinite, and answers in shapes Prometheus never gives. Each ends in one line (exit 2)
within its bounds, or in observations that say what was left out."""

from __future__ import annotations

import json
import time

import pytest

from tests._fake_http import fake_http as fake_prometheus
from tests.conftest import peak_rss_mb, run_cli

WINDOW = ["--start", "1000", "--end", "1060"]


def _json(req, doc, status=200):
    body = json.dumps(doc).encode()
    req.send_response(status)
    req.send_header("Content-Type", "application/json")
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)


def _vector(values):
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"shard": str(i)}, "value": [1060, v]} for i, v in enumerate(values)]}}


# timing: its subject is a deadline (--timeout plus a second), asserted on the wall clock
@pytest.mark.timing
def test_a_trickling_server_ends_within_the_timeout(tmp_path):
    def trickle(req):
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.end_headers()
        for _ in range(200):
            req.wfile.write(b" ")
            req.wfile.flush()
            time.sleep(0.5)

    with fake_prometheus(trickle) as url:
        started = time.monotonic()
        res = run_cli("observe", "prometheus", url, *WINDOW, "--cpu", "rate(x[1m])", "--requests",
                      "rate(y[1m])", "--timeout", "3s")
        took = time.monotonic() - started
    assert res.returncode == 2, res.stderr
    assert "did not finish answering within 3 s" in res.stderr
    assert took < 3 + 1.0, took   # the deadline plus the process's own start
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_huge_answer_is_refused_without_being_held(tmp_path):
    """300 MB promised and streamed: refused past the read cap, the process staying far below
    the answer's size (its peak RSS measured by the kernel for the child)."""
    def huge(req):
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.end_headers()
        chunk = b" " * (1 << 20)
        for _ in range(300):
            req.wfile.write(chunk)

    with fake_prometheus(huge) as url:
        code, rss, err = peak_rss_mb("observe", "prometheus", url, *WINDOW, "--cpu",
                                     "rate(x[1m])", "--requests", "rate(y[1m])", "--timeout",
                                     "30s")
    assert code == 2, err
    assert "more than the" in err and "narrow the query" in err
    assert rss < 200, rss


def test_a_redirect_is_not_followed(tmp_path):
    def redirect(req):
        req.send_response(302)
        req.send_header("Location", "http://elsewhere.example:9090/api/v1/query")
        req.send_header("Content-Length", "0")
        req.end_headers()

    with fake_prometheus(redirect) as url:
        res = run_cli("observe", "prometheus", url, *WINDOW, "--cpu", "rate(x[1m])", "--requests",
                      "rate(y[1m])")
    assert res.returncode == 2
    assert "redirected" in res.stderr and "elsewhere.example" in res.stderr


def test_nan_and_infinite_samples_are_left_out_with_a_note(tmp_path):
    """Four shards answer NaN or +-Inf: they are named as left out, not silently dropped
    (which made the fifth "100% of the requests" without a word)."""
    def answer(req):
        _json(req, _vector(["NaN", "+Inf", "-Inf", "NaN", "5"]))

    out = tmp_path / "o.json"
    with fake_prometheus(answer) as url:
        res = run_cli("observe", "prometheus", url, *WINDOW, "--cpu", "rate(x[1m])", "--requests",
                      "rate(y[1m])", "-o", str(out))
    assert res.returncode == 0, res.stderr
    notes = json.loads(out.read_text())["observe"]["notes"]
    assert any("shards 0, 1, 2, 3" in n and "no finite value" in n for n in notes), notes


@pytest.mark.parametrize("data", [
    {"resultType": "vector", "result": "x"},
    {"resultType": "vector", "result": [5]},
    {"resultType": "vector", "result": [{"metric": "a", "value": [1, "2"]}]},
    {"resultType": "vector", "result": [{"metric": {"shard": "0"}}]},
    {"resultType": "vector", "result": [{"metric": {"shard": "0"}, "value": [1]}]},
    {"resultType": "vector", "result": [{"metric": {"shard": "0"}, "value": ["t", "1"]}]},
    {"resultType": "vector", "result": [{"metric": {"shard": {"x": 1}}, "value": [1, "1"]}]},
    {"resultType": "matrix", "result": [{"metric": {"shard": "0"}, "values": 7}]},
])
def test_an_answer_in_a_shape_prometheus_never_gives_is_one_line(tmp_path, data):
    def answer(req):
        _json(req, {"status": "success", "data": data})

    with fake_prometheus(answer) as url:
        res = run_cli("observe", "prometheus", url, *WINDOW, "--cpu", "rate(x[1m])", "--requests",
                      "rate(y[1m])")
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "Traceback" not in res.stderr


def test_server_text_reaches_the_terminal_escaped_and_cut(tmp_path):
    def answer(req):
        _json(req, {"status": "error", "errorType": "bad_data",
                    "error": "\x1b[2J\rFORGED line\u202e" + "y" * 100_000}, status=400)

    with fake_prometheus(answer) as url:
        res = run_cli("observe", "prometheus", url, *WINDOW, "--cpu", "rate(x[1m])", "--requests",
                      "rate(y[1m])")
    assert res.returncode == 2
    assert "\x1b" not in res.stderr and "\r" not in res.stderr and "\u202e" not in res.stderr
    assert "\\x1b" in res.stderr and len(res.stderr) < 1000


def test_series_summing_past_the_largest_number_are_left_out_with_a_note(tmp_path):
    def answer(req):
        _json(req, {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"shard": "0", "pod": "a"}, "value": [1060, "1e308"]},
            {"metric": {"shard": "0", "pod": "b"}, "value": [1060, "1e308"]},
            {"metric": {"shard": "1"}, "value": [1060, "4"]}]}})

    out = tmp_path / "o.json"
    with fake_prometheus(answer) as url:
        res = run_cli("observe", "prometheus", url, *WINDOW, "--cpu", "rate(x[1m])",
                      "--requests", "rate(y[1m])", "-o", str(out))
    assert res.returncode == 0, res.stderr
    notes = json.loads(out.read_text())["observe"]["notes"]
    assert any("shard 0 left out" in n and "past the largest number" in n for n in notes), notes
