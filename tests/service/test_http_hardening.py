"""The gateway's HTTP layer against hostile clients: an oversized chunked body gets 413, and a
request head that never completes (slowloris) has its connection closed."""

from __future__ import annotations

import contextlib
import socket
import time

import pytest

from hotshard.service import httpguard
from tests.service._traffic import asgi_server, serve


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("http") / "data", "--shards", "1") as service:
        yield service


def _exchange(port: int, raw: bytes, timeout: float = 10.0) -> bytes:
    """Send ``raw``, read until the server closes or ``timeout``."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        data = b""
        with contextlib.suppress(OSError):
            while chunk := s.recv(65536):
                data += chunk
        return data


def _chunked(body: bytes, size: int = 1000) -> bytes:
    parts = [b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size])
             for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\n\r\n"


@pytest.mark.parametrize("path", ["/channels/room/messages", "/admin/mitigations"])
def test_an_oversized_chunked_body_gets_413(svc, path):
    port = int(svc.url.rsplit(":", 1)[1])
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: {svc.admin_headers['Authorization']}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    reply = _exchange(port, head + _chunked(b"{" + b" " * 200_000 + b"}"))
    assert reply.startswith(b"HTTP/1.1 413 "), reply[:200]
    assert b'"error"' in reply


def test_a_small_chunked_body_still_works(svc):
    port = int(svc.url.rsplit(":", 1)[1])
    body = b'{"user": "ann", "body": "sent in chunks"}'
    head = (f"POST /channels/chunky/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n").encode()
    reply = _exchange(port, head + _chunked(body, size=7))
    assert reply.startswith(b"HTTP/1.1 201 "), reply[:200]
    page = svc.get("/channels/chunky/messages").json()
    assert [m["body"] for m in page["messages"]] == ["sent in chunks"]


async def _hello(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"5")]})
    await send({"type": "http.response.body", "body": b"hello"})


def _guarded_server():
    """The guarded protocol serving a tiny app on a free loopback port."""
    return asgi_server(_hello)


def _closed_within(conn: socket.socket, seconds: float) -> bool:
    conn.settimeout(seconds)
    try:
        return conn.recv(1024) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_a_request_head_that_never_completes_is_closed(monkeypatch):
    monkeypatch.setattr(httpguard, "HEADER_TIMEOUT_S", 0.5)
    with _guarded_server() as port:
        silent = socket.create_connection(("127.0.0.1", port))
        half = socket.create_connection(("127.0.0.1", port))
        half.sendall(b"GET /hel")
        drip = socket.create_connection(("127.0.0.1", port))
        started = time.monotonic()
        for byte in b"GET / HTTP/1.1\r\nHost: x\r\n":  # one byte each 0.1 s: never done
            if time.monotonic() - started > 1.5:
                break
            try:
                drip.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.1)
        for conn in (silent, half, drip):
            assert _closed_within(conn, 3.0)
            conn.close()
        assert time.monotonic() - started < 5
        # a normal client is served, and its kept-alive connection lives on between requests
        with socket.create_connection(("127.0.0.1", port), timeout=5) as ok:
            for _ in range(2):
                ok.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                reply = b""
                while not reply.endswith(b"hello"):
                    reply += ok.recv(4096)
                assert reply.startswith(b"HTTP/1.1 200")
                time.sleep(0.8)  # idle beyond the head timeout: that is keep-alive's business
            ok.sendall(b"GET / HT")  # then half a second request: closed
            assert _closed_within(ok, 3.0)


def test_the_service_uses_the_guarded_protocol_with_a_documented_timeout():
    import inspect

    from hotshard.service import server

    assert "http=GuardedH11Protocol" in inspect.getsource(server.serve)
    assert httpguard.HEADER_TIMEOUT_S == 10.0
