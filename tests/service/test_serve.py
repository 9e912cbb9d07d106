"""`hotshard serve` end to end: a real service on a free loopback port, used as a client would."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time

import httpx
import pytest

from tests.conftest import process_state, run_cli
from tests.service._traffic import PLAIN_HTTP, all_pages, serve, wait_healthy


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("serve") / "data", "--shards", "4") as service:
        yield service


def post(svc, channel, body="hello", user="ann"):
    return svc.post(f"/channels/{channel}/messages", json={"user": user, "body": body})


def test_write_then_read_round_trip_newest_first(svc):
    ids = []
    for i in range(5):
        r = post(svc, "room-1", body=f"m{i}")
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    assert ids == sorted(ids) and len(set(ids)) == 5  # time-ordered, unique
    page = svc.get("/channels/room-1/messages", params={"limit": 3}).json()
    assert [m["body"] for m in page["messages"]] == ["m4", "m3", "m2"]
    assert [m["id"] for m in page["messages"]] == ids[:1:-1]
    assert page["next_before"] == ids[2]


def test_paging_with_before_visits_every_message_once(svc):
    written = [post(svc, "pager", body=f"b{i}").json()["id"] for i in range(23)]
    assert all_pages(svc, "pager", limit=5) == written[::-1]


@pytest.mark.parametrize("channel", ["4711", "982", "general", "chan:eu-1"])
def test_x_shard_is_what_hotshard_shard_prints(svc, channel):
    r = post(svc, channel)
    shown = run_cli("shard", channel, "-p", "kafka", "-n", "4", "--json")
    assert shown.returncode == 0, shown.stderr
    expected = json.loads(shown.stdout.splitlines()[0])["shard"]
    assert r.headers["x-shard"] == str(expected) == str(r.json()["shard"])
    read = svc.get(f"/channels/{channel}/messages")
    assert read.headers["x-shard"] == str(expected)


@pytest.mark.parametrize(("method", "path", "payload", "status"), [
    ("post", "/channels/room/messages", {"user": "a", "body": ""}, 422),
    ("post", "/channels/room/messages", {"user": "", "body": "x"}, 422),
    ("post", "/channels/room/messages", {"user": "a"}, 422),
    ("post", "/channels/room/messages", {"user": "a", "body": "x", "extra": 1}, 422),
    ("post", "/channels/room/messages", {"user": "a", "body": "x" * 5000}, 413),
    ("post", "/channels/room/messages", {"user": "a\x01", "body": "x"}, 422),
    ("post", "/channels/room/messages", b'{"user": "a", "body": "\\ud800"}', 422),
    ("post", "/channels/bad%20channel/messages", {"user": "a", "body": "x"}, 422),
    ("post", "/channels/" + "c" * 200 + "/messages", {"user": "a", "body": "x"}, 422),
    ("get", "/channels/room/messages?limit=0", None, 422),
    ("get", "/channels/room/messages?limit=1001", None, 422),
    ("get", "/channels/room/messages?limit=abc", None, 422),
    ("get", "/channels/room/messages?before=-5", None, 422),
    ("get", "/channels/room/messages?before=99999999999999999999999", None, 422),
    ("get", "/channels/room#1/messages", None, 404),
    ("get", "/nowhere", None, 404),
])
def test_client_mistakes_get_4xx_with_a_json_error(svc, method, path, payload, status):
    if isinstance(payload, bytes):  # raw JSON: a lone surrogate no client library would send
        kw = {"content": payload, "headers": {"content-type": "application/json"}}
    else:
        kw = {"json": payload} if payload is not None else {}
    r = getattr(svc, method)(path, **kw)
    assert r.status_code == status, r.text
    assert r.json()["error"]


def test_a_body_that_is_not_json_says_how_to_send_it(svc):
    r = svc.post("/channels/room/messages", content=b"user=a&body=x",
                 headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 422
    assert "Content-Type: application/json" in r.json()["error"]


def test_a_huge_upload_is_refused_before_it_is_read(svc):
    r = svc.post("/channels/room/messages", content=b"{" + b" " * 1_000_000 + b"}",
                 headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_stats_hotkeys_metrics_health(svc):
    for _ in range(30):
        post(svc, "popular")
    post(svc, "quiet")
    stats = svc.stats()
    assert stats["service"]["partitioner"] == "kafka"
    assert len(stats["shards"]) == 4
    # how channels are placed, at the top level, for a driver that attributes failures itself
    assert {k: stats[k] for k in ("partitioner", "shard_count", "key_type", "layout")} == {
        "partitioner": "kafka", "shard_count": 4, "key_type": "auto", "layout": {}}
    assert stats["service"]["shard_timeout_s"] == 10.0
    for shard in stats["shards"]:
        assert shard["pid"] > 0 and shard["up"] and shard["restarts"] == 0
        assert {"requests", "cpu_percent", "queue_depth", "p50_ms", "p99_ms", "cache_hits",
                "coalesced"} <= set(shard)
    assert sum(s["writes"] for s in stats["shards"]) >= 31
    assert stats["service"]["hop_p50_ms"] is not None
    top = svc.get("/hotkeys", params={"k": 3}).json()
    assert top["keys"][0]["key"] == "popular"
    first = top["keys"][0]
    assert first["count"] - first["error"] <= 30 + 5 <= first["count"] + 35  # window holds all
    assert "error_bound" in top and "guarantee" in top
    metrics = svc.get("/metrics").text
    assert "hotshard_shard_requests_total" in metrics and "hotshard_worker_up" in metrics
    assert svc.get("/health").json()["status"] == "ok"
    assert svc.get("/openapi.json").json()["paths"]["/channels/{channel}/messages"]


def test_admin_mitigations_refuse_typos_and_switch_at_run_time(svc):
    admin = svc.admin_headers
    r = svc.post("/admin/mitigations", json={"coalesec": True}, headers=admin)
    assert r.status_code == 400 and "coalesec" in r.json()["error"]
    r = svc.post("/admin/mitigations", content=b"{not json",
                 headers={**admin, "content-type": "application/json"})
    assert r.status_code == 400
    r = svc.post("/admin/mitigations", json={"split_into": 65}, headers=admin)
    assert r.status_code == 400 and "split_into must be 1 (off) to 64" in r.json()["error"]
    r = svc.post("/admin/mitigations", json={"replicas": 0}, headers=admin)
    assert r.status_code == 400 and "primary included" in r.json()["error"]
    r = svc.post("/admin/mitigations", json={"cache_hit": 0.5}, headers=admin)  # a what-if
    assert r.status_code == 400 and "cache_hit" in r.json()["error"]
    r = svc.post("/admin/mitigations", json={"cache_ttl_s": 30, "channels": ["cached"]},
                 headers=admin)
    assert r.status_code == 200 and r.json()["cache_ttl_s"] == 30
    post(svc, "cached", body="one")
    assert svc.get("/channels/cached/messages").headers["x-source"] == "shard"
    post(svc, "cached", body="two")
    cached = svc.get("/channels/cached/messages")  # a TTL cache: staleness is the price
    assert cached.headers["x-source"] == "cache"
    assert [m["body"] for m in cached.json()["messages"]] == ["one"]
    svc.post("/admin/mitigations", json={"cache_ttl_s": 0, "channels": "hot"}, headers=admin)
    fresh = svc.get("/channels/cached/messages")
    assert [m["body"] for m in fresh.json()["messages"]] == ["two", "one"]


@pytest.mark.slow
def test_split_channel_pages_correctly_across_time_buckets(tmp_path):
    with serve(tmp_path / "data", "--shards", "4", "--split-into", "4", "--split-bucket", "0.02",
               "--mitigate", "big,other") as svc:
        written, shards = [], set()
        for i in range(60):
            r = post(svc, "big", body=f"m{i}")
            assert r.status_code == 201
            written.append(r.json()["id"])
            shards.add(r.headers["x-shard"])
            if i % 15 == 14:
                time.sleep(0.05)  # let the 20 ms time slot move on: writes rotate buckets
        assert len(shards) >= 2, shards  # the channel's writes really went to several shards
        assert all_pages(svc, "big", limit=7) == written[::-1]
        plan = json.loads((tmp_path / "data" / "splits.json").read_text())["splits"][0]
        assert len(set(plan["shards"])) == 4  # four sub-partitions on four different shards
        for key, shard in zip(plan["keys"], plan["shards"], strict=True):
            shown = run_cli("shard", key, "-p", "kafka", "-n", "4", "--json")
            assert json.loads(shown.stdout)["shard"] == shard
    # a restarted service still finds the split channel's history in its buckets
    with serve(tmp_path / "data", "--shards", "4") as svc:
        page = svc.get("/channels/big/messages", params={"limit": 1000}).json()
        assert [m["id"] for m in page["messages"]] == written[::-1]


def test_load_fills_the_shards_where_the_router_places_them(tmp_path):
    out = tmp_path / "m.parquet"
    made = run_cli("generate", "--dist", "zipf:1.1:500", "--messages", "20000",
                   "--seed", "3", "-o", str(out))
    assert made.returncode == 0, made.stderr
    import pyarrow.parquet as pq

    from hotshard.service.router import Router

    table = pq.read_table(out, columns=["channel_id"])
    channels = [str(c) for c in table.column("channel_id").to_pylist()]
    expected = [0] * 4
    for shard in Router("kafka", 4).shards_of(channels):
        expected[int(shard)] += 1
    with serve(tmp_path / "data", "--shards", "4", "--load", str(out)) as svc:
        stats = svc.stats()
        assert [s["writes"] for s in stats["shards"]] == [0] * 4  # loaded, not posted
        hot = max(set(channels), key=channels.count)
        page = svc.get(f"/channels/{hot}/messages", params={"limit": 1000}).json()
        assert len(page["messages"]) == min(1000, channels.count(hot))
    stderr = svc.process.stderr
    assert stderr is not None
    import sqlite3
    for shard in range(4):
        db = sqlite3.connect(tmp_path / "data" / f"shard-{shard:03d}.sqlite3")
        assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == expected[shard]
        db.close()


def test_wrong_inputs_to_serve_are_one_line_errors(tmp_path):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        r = run_cli("serve", "--port", str(port), "--data", str(tmp_path / "d1"))
        assert r.returncode == 2 and "in use" in r.stderr and "Traceback" not in r.stderr
    finally:
        busy.close()
    r = run_cli("serve", "--data", str(tmp_path / "no" / "such" / "dir"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = run_cli("serve", "--load", str(tmp_path / "missing.parquet"), "--data",
                str(tmp_path / "d2"))
    assert r.returncode == 2 and "missing.parquet" in r.stderr
    (tmp_path / "d3").mkdir()
    (tmp_path / "d3" / "hotshard-serve.json").write_text(
        json.dumps({"format": "hotshard.serve/1", "partitioner": "kafka", "shards": 8}))
    r = run_cli("serve", "--shards", "4", "--data", str(tmp_path / "d3"), "--port", "0")
    assert r.returncode == 2 and "--shards 8" in r.stderr
    bad_columns = tmp_path / "x.csv"
    bad_columns.write_text("a,b\n1,2\n")
    bad_channel = tmp_path / "y.csv"
    bad_channel.write_text("timestamp,channel_id\n2026-01-01T00:00:00Z,ok\n"
                           "2026-01-01T00:00:01Z,has space\n")
    for path, words in ((bad_columns, "no channel_id or timestamp column"),
                        (bad_channel, "'has space'")):
        r = run_cli("serve", "--load", str(path), "--data", str(tmp_path / "d4"))
        assert r.returncode == 2 and words in r.stderr, r.stderr
        assert not (tmp_path / "d4").exists()  # checked before anything was made
    r = run_cli("serve", "--split-into", "65")
    assert r.returncode == 2 and "--split-into" in r.stderr


@pytest.mark.slow
def test_kill_9_of_a_shard_loses_no_acknowledged_write(tmp_path):
    """Writes under load; kill -9 one shard's process; every 201 is readable after its
    restart, the killed shard answered 503 + Retry-After meanwhile, the others kept serving."""
    with serve(tmp_path / "data", "--shards", "4") as svc:
        channels = [f"c{i}" for i in range(40)]
        shard_of = {c: int(post(svc, c, body="first").headers["x-shard"]) for c in channels}
        victim = shard_of[channels[0]]
        pid = svc.stats()["shards"][victim]["pid"]
        acked: list[tuple[str, int]] = []
        refused: dict[int, list[int]] = {}
        wrong: list[str] = []  # asserted in the test's thread: a writer's assert is lost
        stop = threading.Event()
        lock = threading.Lock()

        def writer(offset: int) -> None:
            with httpx.Client(base_url=svc.url, timeout=30, verify=PLAIN_HTTP) as client:
                i = offset
                while not stop.is_set():
                    channel = channels[i % len(channels)]
                    r = client.post(f"/channels/{channel}/messages",
                                    json={"user": "w", "body": f"n{i}"})
                    with lock:
                        if r.status_code == 201:
                            acked.append((channel, r.json()["id"]))
                        else:
                            refused.setdefault(shard_of[channel], []).append(r.status_code)
                            # a 503 says when to retry, or, for a write already handed to
                            # the shard, that its outcome is unknown (no Retry-After)
                            if r.status_code == 503 and not (
                                    int(r.headers.get("retry-after", "0")) >= 1
                                    or "outcome is unknown" in r.json()["error"]):
                                wrong.append(f"503 without Retry-After: {r.text}")
                            # every failure names its shard, so a driver can attribute it
                            if r.headers.get("x-shard") != str(shard_of[channel]):
                                wrong.append(f"{channel}: X-Shard {r.headers.get('x-shard')}")
                    i += 4
                    # ~40 writes/s a thread: writes in flight at the kill, and acknowledged
                    # ones on every shard, without four closed loops taking both cores
                    stop.wait(0.02)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        os.kill(pid, signal.SIGKILL)
        time.sleep(1.5)
        stop.set()
        for t in threads:
            t.join()
        wait_healthy(svc.url)
        after = svc.stats()["shards"][victim]
        assert after["restarts"] == 1 and after["pid"] != pid
        assert not wrong, wrong[:3]
        assert set(refused) <= {victim}, refused  # only the killed shard ever refused
        assert all(code == 503 for code in refused.get(victim, []))
        by_channel: dict[str, set[int]] = {}
        for channel, message_id in acked:
            by_channel.setdefault(channel, set()).add(message_id)
        for channel, ids in by_channel.items():
            page = svc.get(f"/channels/{channel}/messages", params={"limit": 1000}).json()
            stored = {m["id"] for m in page["messages"]}
            assert ids <= stored, f"{channel}: lost {sorted(ids - stored)[:5]}"
        assert len(acked) > 100


@pytest.mark.slow
@pytest.mark.timing  # its subject is a 1 s timeout: it asserts each answer's latency
def test_a_frozen_shard_gets_504_with_x_shard_within_the_shard_timeout(tmp_path):
    """SIGSTOP one shard's worker: its channels' requests are answered 504, naming the shard,
    after --shard-timeout (not held for ever); the other shard keeps serving; SIGCONT and it
    serves again."""
    with serve(tmp_path / "data", "--shards", "2", "--shard-timeout", "1s") as svc:
        channels = [f"f{i}" for i in range(12)]
        shard_of = {c: int(post(svc, c).headers["x-shard"]) for c in channels}
        assert set(shard_of.values()) == {0, 1}
        frozen = shard_of[channels[0]]
        pid = svc.stats()["shards"][frozen]["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            answers = []
            for channel in channels:
                started = time.monotonic()
                r = post(svc, channel) if len(answers) % 2 else \
                    svc.get(f"/channels/{channel}/messages")
                answers.append((channel, r, time.monotonic() - started))
            shard_now = svc.stats()["shards"][frozen]
            state = process_state(pid)
            for i, (channel, r, took) in enumerate(answers):
                seen = (f"answer {i} ({channel}): {r.status_code} from "
                        f"{r.headers.get('x-source')} in {took:.3f} s; the frozen worker {pid} "
                        f"is in state {state!r} (T: stopped), the shard's pid now "
                        f"{shard_now['pid']}, restarts {shard_now['restarts']}")
                assert r.headers["x-shard"] == str(shard_of[channel]), seen
                if shard_of[channel] == frozen:
                    assert r.status_code == 504, seen
                    assert "within 1 s" in r.json()["error"], seen
                    assert 0.9 < took < 5, seen
                else:
                    assert r.status_code in (200, 201) and took < 1, seen
            stats = svc.stats()["shards"]
            timed_out = sum(1 for c, _, _ in answers if shard_of[c] == frozen)
            assert stats[frozen]["timeouts"] == timed_out
            assert stats[1 - frozen]["timeouts"] == 0
        finally:
            os.kill(pid, signal.SIGCONT)
        assert post(svc, channels[0]).status_code == 201


def test_mitigations_follow_the_sketch_to_the_hot_channel(tmp_path):
    """--mitigate hot (the default): the page cache serves the channel the sketch reports
    above --hot-share, never a cold one; Ctrl-C then stops the service cleanly (exit 0)."""
    # a 60 s sketch window: the 120 posts stay in it however slowly a loaded machine sends
    # them (the default 10 s window could forget the first before the last arrived)
    with serve(tmp_path / "data", "--shards", "2", "--cache-ttl", "60s",
               "--hot-window", "60s") as svc:
        post(svc, "quiet")   # at start: one request of one is no heat (MIN_HOT_WINDOW_REQUESTS)
        for i in range(120):
            post(svc, "popular", body=f"p{i}")
        deadline = time.monotonic() + 10
        while svc.get("/channels/popular/messages").headers["x-source"] != "cache":
            assert time.monotonic() < deadline, "the hot channel was never cached"
            time.sleep(0.1)
        for _ in range(3):  # 1 of ~125 requests: under 5%, never treated as hot
            assert svc.get("/channels/quiet/messages").headers["x-source"] == "shard"
        top = svc.get("/hotkeys").json()
        assert top["keys"][0]["key"] == "popular" and top["hot_share"] == 0.05
        # and /stats says when it was made hot, on which shard, at what share
        shard = int(svc.get("/channels/popular/messages").headers["x-shard"])
        actions = svc.get("/stats").json()["actions"]
        assert [(a["action"], a["key"], a["shard"]) for a in actions] == \
            [("hot", "popular", shard)]
        assert actions[0]["share"] >= 0.05 and abs(actions[0]["at"] - time.time()) < 60
    assert svc.process.returncode == 0
