"""The gateway in process, over a fake shard backend whose failures the test chooses: every
answer to a channel request names its shard (X-Shard) whatever went wrong, a shard that never
answers gets 504 within the shard timeout, a body that stalls gets 408, /stats says how
channels are placed, and the admin guard accepts the address a real connection arrived on."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from pathlib import Path

import httpx
import pytest

from hotshard.errors import InputError
from hotshard.service import httpguard
from hotshard.service.admin import (
    AdminGuard,
    is_local_address,
    local_authority,
    service_names,
)
from hotshard.service.chat import DEFAULT_SHARD_TIMEOUT_S, ChatService
from hotshard.service.gateway import create_app
from hotshard.service.router import Router
from hotshard.service.split import SplitRegistry
from hotshard.service.supervisor import (
    ShardError,
    ShardTimeout,
    ShardUnavailable,
    WorkerInfo,
)
from tests.service._traffic import asgi_server, http_get, http_post

TOKEN = "t" * 24
CHANNELS = ["room", "4711", "a.b:c-d", "z"]


class FakeClient:
    """A shard's client (the ShardClient interface) that behaves as told."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.in_flight = 0

    async def call(self, op: str, args: dict, *, timeout: float = 60.0) -> tuple:
        b = self.behaviour
        if b == "down":  # as the Redis backend raises it: without the shard's number
            raise ShardUnavailable("node is unreachable (connection refused)", retry_after=2)
        if b == "error":
            raise ShardError("disk I/O error")
        if b == "refused":
            raise InputError("the shard refused the row")
        if b == "bug":
            raise RuntimeError("a bug in the backend")
        if b == "hang":  # frozen (SIGSTOP): never answers
            await asyncio.Event().wait()
        if b == "slow":  # answers, after the shard timeout
            await asyncio.sleep(timeout + 5)
        return (1 << 22 if op == "append" else []), 0.0


class FakeSupervisor:
    """Workers whose every call behaves as ``behaviour`` ("restarting": none is up)."""

    replicas = 1

    def __init__(self, shards: int, behaviour: str) -> None:
        self.shards = shards
        self.behaviour = behaviour
        self.client = FakeClient(behaviour)

    def primary(self, shard: int) -> FakeClient:
        if self.behaviour == "restarting":
            raise ShardUnavailable(f"shard {shard} is restarting", shard=shard)
        return self.client

    def reader(self, shard: int, *, use_replicas: bool) -> FakeClient:
        return self.primary(shard)

    def workers(self) -> list[WorkerInfo]:
        return [WorkerInfo(s, 0, None, self.behaviour != "restarting", 0, 0)
                for s in range(self.shards)]


def gateway(data: Path, behaviour: str = "ok", *, shard_timeout_s: float = 0.3,
            router: Router | None = None, guard: AdminGuard | None = None):
    """(the gateway's ASGI app over a fake backend, its ChatService)."""
    router = router or Router("kafka", 4)
    chat = ChatService(FakeSupervisor(router.shards, behaviour), router,
                       SplitRegistry(data, router), shard_timeout_s=shard_timeout_s)
    app = create_app(chat, max_body_bytes=4096,
                     admin=guard or AdminGuard(TOKEN, service_names("127.0.0.1", 8080)))
    return app, chat


async def _send(app, method: str, path: str, **kw) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
        return await c.request(method, path, **kw)


def request(app, method: str, path: str, **kw) -> httpx.Response:
    return asyncio.run(_send(app, method, path, **kw))


def _message(method: str) -> dict:
    return {"json": {"user": "ann", "body": "hi"}} if method == "POST" else {}


@pytest.mark.parametrize(("behaviour", "status"), [
    ("ok", None), ("restarting", 503), ("down", 503), ("error", 500), ("refused", 400),
    ("bug", 500), ("hang", 504), ("slow", 504)])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_every_answer_to_a_channel_request_names_its_shard(tmp_path, behaviour, status,
                                                           method):
    app, chat = gateway(tmp_path, behaviour)
    for channel in CHANNELS:
        r = request(app, method, f"/channels/{channel}/messages", **_message(method))
        expected = status or (201 if method == "POST" else 200)
        assert r.status_code == expected, r.text
        assert r.headers["x-shard"] == str(chat.router.shard_of(channel)), (channel, r.headers)
        if status:
            assert r.headers["content-type"] == "application/json"
            assert r.json()["error"]
        if status == 503:
            assert int(r.headers["retry-after"]) >= 1
        if status == 504:
            assert "did not answer within 0.3 s" in r.json()["error"]


def test_client_mistakes_on_a_valid_channel_name_its_shard_too(tmp_path):
    app, chat = gateway(tmp_path)
    home = str(chat.router.shard_of("room"))
    for method, path, kw, status in [
            ("POST", "/channels/room/messages", {"json": {"user": "a"}}, 422),
            ("POST", "/channels/room/messages", {"json": {"user": "a", "body": "x" * 5000}},
             413),
            ("POST", "/channels/room/messages", {"content": b"{" + b" " * 30_000 + b"}",
                                                 "headers": {"content-type": "application/json"}},
             413),
            ("GET", "/channels/room/messages?limit=0", {}, 422),
            ("PUT", "/channels/room/messages", {}, 405)]:
        r = request(app, method, path, **kw)
        assert r.status_code == status, (path, r.text)
        assert r.headers.get("x-shard") == home, (path, status, r.headers)
    # no channel, or not a valid one: no shard to name
    r = request(app, "GET", "/channels/has%20space/messages")
    assert r.status_code == 422 and "x-shard" not in r.headers
    assert "x-shard" not in request(app, "GET", "/nowhere").headers


def test_a_shard_that_never_answers_is_answered_504_within_the_shard_timeout(tmp_path):
    app, chat = gateway(tmp_path, "hang", shard_timeout_s=0.3)

    async def many() -> list[httpx.Response]:
        return await asyncio.gather(*(_send(app, "GET", f"/channels/c{i}/messages")
                                      for i in range(20)))

    started = time.monotonic()
    answers = asyncio.run(many())
    assert time.monotonic() - started < 3
    assert {r.status_code for r in answers} == {504}
    by_shard: dict[str, int] = {}
    for r in answers:
        by_shard[r.headers["x-shard"]] = by_shard.get(r.headers["x-shard"], 0) + 1
    stats = request(app, "GET", "/stats").json()
    assert {str(s["id"]): s["timeouts"] for s in stats["shards"] if s["timeouts"]} == by_shard
    assert stats["service"]["shard_timeout_s"] == 0.3


def test_the_shard_timeout_is_bounded_and_documented():
    assert DEFAULT_SHARD_TIMEOUT_S == 10.0  # README and `serve --help` say 10 s
    assert issubclass(ShardTimeout, TimeoutError)
    for bad in (0, -1, float("nan"), "5"):
        with pytest.raises(InputError, match="shard_timeout_s"):
            ChatService(FakeSupervisor(1, "ok"), Router("kafka", 1), None,  # type: ignore
                        shard_timeout_s=bad)


# -- /stats: how channels are placed -------------------------------------------------------

@pytest.mark.parametrize(("partitioner", "shards", "options", "key_type"), [
    ("kafka", 4, {}, "auto"),
    ("kafka", 4, {"key_type": "text"}, "text"),
    ("cassandra", 6, {"num_tokens": 8, "ring_seed": 3}, "auto"),
    ("jump", 5, {"key_type": "bigint"}, "bigint"),
    ("redis-cluster", 3, {}, "text"),
    ("ketama", 7, {}, "text"),
])
def test_stats_says_how_channels_are_placed(tmp_path, partitioner, shards, options, key_type):
    """A driver rebuilds the placement from /stats alone and places every channel as the
    service does (the X-Shard of each answer)."""
    router = Router(partitioner, shards, **options)
    app, _ = gateway(tmp_path, router=router)
    stats = request(app, "GET", "/stats").json()
    assert stats["partitioner"] == partitioner and stats["shard_count"] == shards
    assert stats["key_type"] == key_type and stats["live_slot_map"] is False
    assert len(stats["shards"]) == shards and stats["service"]["partitioner"] == partitioner
    theirs = Router(stats["partitioner"], stats["shard_count"],
                    key_type=None if stats["key_type"] == "auto" else stats["key_type"],
                    **stats["layout"])
    channels = ["42", "9223372036854775807", "0042", "7"]
    if key_type != "bigint":  # (a text channel has no shard when keys are typed bigint)
        channels += [*CHANNELS, "18446744073709551616", "x" * 100]
    for channel in channels:
        answer = request(app, "GET", f"/channels/{channel}/messages")
        assert answer.headers["x-shard"] == str(theirs.shard_of(channel)), channel


# -- request bodies that stall -------------------------------------------------------------

def _raw(port: int, raw: bytes, timeout: float = 10.0) -> tuple[bytes, float]:
    """Send ``raw`` and read until the server closes: (reply, seconds until closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        started = time.monotonic()
        data = b""
        with contextlib.suppress(OSError):
            while chunk := s.recv(65536):
                data += chunk
        return data, time.monotonic() - started


def test_a_request_body_that_stalls_gets_408_and_its_connection_closed(tmp_path, monkeypatch):
    monkeypatch.setattr(httpguard, "BODY_TIMEOUT_S", 0.5)
    app, chat = gateway(tmp_path)
    home = str(chat.router.shard_of("room")).encode()
    with asgi_server(app) as port:
        head = (f"POST /channels/room/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\n").encode()
        # announces 100 bytes, sends 1
        reply, took = _raw(port, head + b"Content-Length: 100\r\n\r\n{")
        assert reply.startswith(b"HTTP/1.1 408 "), reply[:300]
        assert b"x-shard: " + home + b"\r\n" in reply and b"connection: close" in reply
        assert b"not complete within 0.5 s" in reply and took < 3
        # chunked, never finished
        reply, took = _raw(port, head + b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"use")
        assert reply.startswith(b"HTTP/1.1 408 ") and took < 3
        # a route that never reads its body is bounded the same way
        reply, took = _raw(port, b"GET /stats HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 408 ") and b"x-shard" not in reply and took < 3
        # a body sent whole, even in pieces, is served
        body = b'{"user": "ann", "body": "in time"}'
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
            for i in range(0, len(body), 10):
                time.sleep(0.05)
                s.sendall(body[i:i + 10])
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 201 "), reply[:300]


def test_the_body_timeout_is_documented():
    assert httpguard.BODY_TIMEOUT_S == 10.0  # the README says 10 s


# -- the admin guard, with the address a real connection arrived on --------------------------

def _dual_stack_loopback() -> socket.socket:
    """A listening IPv6 socket that takes IPv4 connections to 127.0.0.1, as a service bound to
    `::` does (it sees them as ::ffff:127.0.0.1); skipped where there is no IPv6."""
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(("::ffff:127.0.0.1", 0))
    except OSError as e:
        sock.close()
        pytest.skip(f"no dual-stack socket here: {e}")
    return sock


def test_admin_accepts_the_address_a_dual_stack_connection_arrived_on(tmp_path):
    """What uvicorn puts in scope["server"] for an IPv4 connection to a `::` socket is the
    IPv4-mapped address: the guard must read it as the IPv4 address the client named."""
    sock = _dual_stack_loopback()
    port = sock.getsockname()[1]
    # only what a wildcard bind itself contributes: the loopback names are not there, so the
    # request passes only by the address its connection arrived on
    guard = AdminGuard(TOKEN, frozenset({f"[::]:{port}"}))
    app, _ = gateway(tmp_path, guard=guard)
    seen = []

    async def recording(scope, receive, send):
        if scope["type"] == "http":
            seen.append(scope["server"])
        await app(scope, receive, send)

    with asgi_server(recording, sock):
        headers = {"authorization": f"Bearer {TOKEN}"}
        r = http_get(f"http://127.0.0.1:{port}/admin/mitigations", headers=headers,
                     timeout=10)
        assert r.status_code == 200, r.text
        r = http_post(f"http://127.0.0.1:{port}/admin/mitigations", timeout=10,
                      json={"coalesce": True},
                      headers={**headers, "origin": f"http://127.0.0.1:{port}"})
        assert r.status_code == 200 and r.json()["coalesce"] is True, r.text
        r = http_get(f"http://127.0.0.1:{port}/admin/mitigations", timeout=10,
                     headers={**headers, "host": f"rebound.example:{port}"})
        assert r.status_code == 403
    assert seen[0][0] == "::ffff:127.0.0.1"  # the real scope, as the guard gets it
    assert local_authority(seen[0]) == (f"127.0.0.1:{port}",)


def test_a_wildcard_bind_accepts_any_address_of_this_machine():
    """--host 0.0.0.0: `Host: <one of this machine's IPs>:PORT` passes whichever address the
    connection came in on (127.0.0.0/8 is this machine's on every system); a name or an
    address elsewhere does not."""
    guard = AdminGuard.for_bind(TOKEN, "0.0.0.0", 8080)
    assert guard.any_local_port == 8080
    ok = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    on_loopback = ("127.0.0.1:8080",)
    assert guard.refusal({**ok, "host": "127.0.0.2:8080"}, "POST",
                         arrived_on=on_loopback) is None
    assert guard.refusal({**ok, "host": "127.0.0.2:8080", "origin": "http://127.0.0.2:8080"},
                         "POST", arrived_on=on_loopback) is None
    assert guard.refusal({**ok, "host": "127.0.0.2:9999"}, "POST").status == 403
    assert guard.refusal({**ok, "host": "evil.example:8080"}, "POST").status == 403
    elsewhere = "203.0.113.254"
    if not is_local_address(elsewhere):
        assert guard.refusal({**ok, "host": f"{elsewhere}:8080"}, "POST").status == 403
    # a specific bind keeps to its names and the arrival address
    bound = AdminGuard.for_bind(TOKEN, "127.0.0.1", 8080)
    assert bound.any_local_port is None
    assert bound.refusal({**ok, "host": "127.0.0.2:8080"}, "POST").status == 403
    assert AdminGuard.for_bind(TOKEN, "::", 8080).any_local_port == 8080


def test_addresses_compare_in_one_form():
    assert local_authority(("::ffff:192.0.2.2", 8080)) == ("192.0.2.2:8080",)
    assert local_authority(("fe80::1%eth0", 8080)) == ("[fe80::1]:8080",)
    assert local_authority(("0:0:0:0:0:0:0:1", 80)) == ("[::1]:80",)
    guard = AdminGuard(TOKEN, service_names("::", 8080))
    ok = {"authorization": f"Bearer {TOKEN}"}
    assert guard.refusal({**ok, "host": "192.0.2.2:8080"}, "GET",
                         arrived_on=local_authority(("::ffff:192.0.2.2", 8080))) is None
    assert guard.refusal({**ok, "host": "[0::1]:8080"}, "GET") is None
    assert is_local_address("127.0.0.1") and is_local_address("[::ffff:127.0.0.1]")
    assert not is_local_address("0.0.0.0") and not is_local_address("localhost")
