"""`drive` against a target that is not a well-behaved service: one redirecting every request,
one whose /stats trickles, is huge, odd or truncated, one naming a new shard on every answer,
one whose shard restarted mid-run. The run is measured and kept, bounded in time and memory,
and says what it could not trust."""

from __future__ import annotations

import json
import time

import pytest

from hotshard.drive.record import MAX_DISTINCT_SHARDS, OTHER_SHARD, Recorder
from hotshard.drive.run import sane_stats
from tests._fake_http import fake_http, reply
from tests.conftest import run_cli

STATS = {"shards": [{"id": 0, "cpu_seconds": 1.0, "pid": 10}, {"id": 1, "cpu_seconds": 2.0,
                                                                "pid": 11}]}


def target(messages, stats):
    """A target on 127.0.0.1: ``messages(req)`` answers the channel requests, ``stats(req)``
    its /stats."""
    return fake_http(lambda req: (stats if req.path.startswith("/stats") else messages)(req))


def _stats_ok(req):
    reply(req, body=json.dumps(STATS).encode())


def _drive(url, tmp_path, *extra):
    out = tmp_path / "obs.json"
    res = run_cli("drive", url, "--dist", "uniform:20", "--rps", "40", "--duration", "1.5s",
                  "--seed", "1", "-o", str(out), "-q", *extra)
    return res, (json.loads(out.read_text()) if out.exists() else None)


def test_a_target_redirecting_every_request_is_no_valid_run(tmp_path):
    """Every answer a 302: drive does not follow it, so none of the run reached the service
    it was pointed at: failures, the run invalid (exit 3), each counted as http 302."""
    def redirect(req):
        reply(req, 302, b"", [("Location", "http://elsewhere.example/")])

    with target(redirect, _stats_ok) as url:
        res, doc = _drive(url, tmp_path)
    assert res.returncode == 3, res.stderr
    assert doc["valid"] is False
    assert doc["errors"]["by_kind"] == {"http 302": doc["errors"]["failed"]}
    assert doc["errors"]["share"] == 1.0


@pytest.mark.parametrize("stats", ["trickle", "huge", "truncated", "shards-dict",
                                   "odd-numbers", "deep"])
def test_an_untrustworthy_stats_costs_only_the_cpu_never_the_run(tmp_path, stats):
    def serve_stats(req):
        if stats == "trickle":
            req.send_response(200)
            req.send_header("Content-Length", "100000")
            req.end_headers()
            for _ in range(60):
                req.wfile.write(b" ")
                req.wfile.flush()
                time.sleep(0.5)
        elif stats == "huge":
            req.send_response(200)
            req.end_headers()
            for _ in range(300):
                req.wfile.write(b" " * (1 << 20))
        elif stats == "truncated":
            reply(req, body=json.dumps(STATS).encode()[:-9])
        elif stats == "shards-dict":
            reply(req, body=b'{"shards": {"0": 1}}')
        elif stats == "odd-numbers":
            reply(req, body=json.dumps({"shards": [
                {"id": 0, "cpu_seconds": "lots", "pid": [1]}, {"id": {"x": 1}},
                {"id": 1, "cpu_seconds": 1e308, "replicas": "r"}, 7]}).encode())
        else:
            reply(req, body=b'{"shards": ' + b"[" * 50_000 + b"]" * 50_000 + b"}")

    def ok(req):
        reply(req, 200, b'{"messages": []}', [("X-Shard", "0")])

    started = time.monotonic()
    with target(ok, serve_stats) as url:
        res, doc = _drive(url, tmp_path)
    assert res.returncode == 0, res.stderr
    assert doc["valid"] is True and doc["drive"]["completed"] > 0
    assert "Traceback" not in res.stderr
    assert time.monotonic() - started < 25   # two /stats reads, each within its deadline


def test_sane_stats_keeps_what_it_can_use():
    doc = sane_stats({"shards": [{"id": 0, "cpu_seconds": float("nan"), "pid": 3},
                                 {"id": True}, {"id": "x" * 100}, "s",
                                 {"id": "1", "cpu_seconds": 2.5, "replicas": [
                                     {"replica": 1, "cpu_seconds": 1.0}, 5]}]})
    assert doc["shards"] == [{"id": 0, "pid": 3},
                             {"id": "1", "cpu_seconds": 2.5,
                              "replicas": [{"replica": 1, "cpu_seconds": 1.0}]}]
    assert sane_stats({"shards": "no"}) is None and sane_stats([1]) is None


def test_a_new_shard_name_on_every_answer_stays_bounded():
    rec = Recorder()
    for i in range(3 * MAX_DISTINCT_SHARDS):
        rec.record(intended=i * 1e-4, sent=i * 1e-4, done=i * 1e-4 + 0.001,
                   shard=f"s{i}", error=None, is_read=True, key="k")
    rec.record(intended=1, sent=1, done=1.001, shard="\x1b[31m", error=None, is_read=True,
               key="k")
    assert len(rec.shards) == MAX_DISTINCT_SHARDS + 1
    assert rec.shards[OTHER_SHARD].requests == 2 * MAX_DISTINCT_SHARDS + 1


def test_a_shard_that_restarted_mid_run_has_unknown_cpu_not_zero(tmp_path):
    """Its process changed between the two /stats reads: the CPU difference of two processes
    means nothing (it read 0%: a hot shard that crashed looked idle)."""
    reads = []

    def changing(req):
        reads.append(1)
        after = len(reads) > 1
        reply(req, body=json.dumps({"shards": [
            {"id": 0, "cpu_seconds": 5.0 if after else 1.0, "pid": 10},
            {"id": 1, "cpu_seconds": 0.2 if after else 9.0, "pid": 99 if after else 11,
             "restarts": 1 if after else 0}]}).encode())

    def ok(req):
        reply(req, 200, b'{"messages": []}', [("X-Shard", "0" if "k0" in req.path else "1")])

    with target(ok, changing) as url:
        res, doc = _drive(url, tmp_path)
    assert res.returncode == 0, res.stderr
    cpu = {s["id"]: s.get("cpu") for s in doc["shards"]}
    assert cpu["1"] is None and cpu["0"] is not None
    assert any("shard 1 restarted during the run" in w for w in doc["drive"]["warnings"])


# timing: the signal must land after the command started and before its first request, which
# a starved machine (the idle pass) can move past either edge
@pytest.mark.timing
@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_drive_stopped_before_its_first_request_exits_130_with_nothing_written(
        tmp_path, processes):
    """Ctrl-C while the driver processes start: no run to judge ("100% of 0 requests
    failed", exit 3, before), and no start time to count from (a 57-year duration_s with
    two processes, before)."""
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT

    def ok(req):
        reply(req, 200, b'{"messages": []}', [("X-Shard", "0")])

    def slow_stats(req):   # the read before the run: the driver waits on it (2 s bound)
        time.sleep(1.5)
        _stats_ok(req)

    out = tmp_path / "obs.json"
    with target(ok, slow_stats) as url:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hotshard", "drive", url, "--dist", "uniform:20", "--rps",
             "20", "--duration", "30s", "--workers", processes, "-q", "-o", str(out)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # stopped once started and before its first request: during its first /stats read,
        # or (two processes) while they spawn after it
        time.sleep(3.0 if processes == "1" else 2.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    if out.exists():   # it had started after all: then its record is a real run's
        doc = json.loads(out.read_text())
        assert doc["duration_s"] < 30 and doc["drive"]["interrupted"] is True
    else:
        assert "interrupted" in err
