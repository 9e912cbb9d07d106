"""Loopback HTTP servers for the driver's tests, run in a subprocess so the driver keeps its core.

``fast``: a trivial HTTP/1.1 keep-alive server on an asyncio Protocol. Every request to
``/channels/<key>/...`` gets ``200 OK`` with ``Content-Length`` and ``X-Shard: crc32(key) % 4``;
it counts requests and keys. ``stall``: the same, except that once, from ``stall_after_s``
seconds after the first ``/channels/`` request, it answers nothing for ``stall_s`` seconds:
requests arriving in that window are answered when the window ends (``time.monotonic``).

Control paths (not counted, never stalled): ``GET /__stats`` -> ``{"count": n, "keys":
{key: n}}``; ``GET /__reset`` zeroes the counts. Anything else is ``404``.

    python -m tests.drive._servers --kind fast --port 8080
    python -m tests.drive._servers --kind stall --port 8080 --stall-after-s 1.5 --stall-s 1

``silent`` accepts connections and never answers a ``/channels/`` request (a hung listener;
it answers ``/__stats`` only); ``dies`` is ``fast`` until
``stall_after_s`` seconds after its first ``/channels/`` request, then exits (a killed gateway:
connections reset, new ones refused).

``run_server(kind, **opts)`` starts one on a free 127.0.0.1 port, waits until it accepts a TCP
connection, yields its URL and kills it (by the pid it started) on the way out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARDS = 4
_BODY = b'{"messages":[]}'
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


def shard_of(key: str) -> int:
    """The X-Shard the server answers for ``key`` (tests compute it the same way)."""
    return zlib.crc32(key.encode()) % SHARDS


def _ok(body: bytes, shard: int | None = None) -> bytes:
    extra = b"" if shard is None else b"X-Shard: %d\r\n" % shard
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            % len(body)) + extra + b"\r\n" + body


_RESPONSES = [_ok(_BODY, s) for s in range(SHARDS)]


class _State:
    """What the server counted, and its one stall window (monotonic seconds)."""

    def __init__(self, stall_after_s: float | None, stall_s: float) -> None:
        self.count = 0
        self.keys: Counter[str] = Counter()
        self.stall_after_s = stall_after_s
        self.stall_s = stall_s
        self.window: tuple[float, float] | None = None  # set at the first counted request
        self.die_after_s: float | None = None  # "dies": exit this long after the first

    def release_at(self, now: float) -> float | None:
        """When a request arriving at ``now`` may be answered (None: at once)."""
        if self.stall_after_s is None:
            return None
        if self.window is None:
            start = now + self.stall_after_s
            self.window = (start, start + self.stall_s)
        start, end = self.window
        return end if start <= now < end else None


class _Http(asyncio.Protocol):
    def __init__(self, state: _State) -> None:
        self.state = state
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.held: list[bytes] = []  # answers waiting for the end of the stall, in order

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        out = []
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            length = 0
            cl = buf.find(b"Content-Length:", 0, end)
            if cl < 0:
                cl = buf.find(b"content-length:", 0, end)
            if cl >= 0:
                eol = buf.find(b"\r\n", cl)
                length = int(buf[cl + 15:eol])
            if len(buf) < end + 4 + length:
                break
            line_end = buf.find(b"\r\n")
            path = bytes(buf[:line_end]).split(b" ", 2)[1].decode("latin-1")
            del buf[:end + 4 + length]
            out.append(self._answer(path))
        if out:
            self._send(b"".join(out))

    def _answer(self, path: str) -> bytes:
        if path.startswith("/channels/"):
            key = path.split("/", 3)[2].split("?", 1)[0]
            if self.state.count == 0 and self.state.die_after_s is not None:
                asyncio.get_running_loop().call_later(self.state.die_after_s, os._exit, 0)
            self.state.count += 1
            self.state.keys[key] += 1
            return _RESPONSES[shard_of(key)]
        if path == "/__stats":
            return _ok(json.dumps({"count": self.state.count,
                                   "keys": dict(self.state.keys)}).encode())
        if path == "/__reset":
            self.state.count = 0
            self.state.keys.clear()
            return _ok(b"{}")
        return _NOT_FOUND

    def _send(self, data: bytes) -> None:
        if self.held:  # an earlier answer on this connection is still held: keep the order
            self.held.append(data)
            return
        release = self.state.release_at(time.monotonic())
        if release is None:
            self.transport.write(data)  # type: ignore[union-attr]
            return
        self.held.append(data)
        loop = asyncio.get_running_loop()
        loop.call_at(loop.time() + max(0.0, release - time.monotonic()), self._flush)

    def _flush(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(self.held))
        self.held.clear()


class _Silent(asyncio.Protocol):
    """Accepts the connection, reads everything, never answers a ``/channels/`` request (a
    hung listener); it counts them, and answers ``GET /__stats`` so a test can wait until
    requests are really held instead of sleeping a guess."""

    def __init__(self, state: _State) -> None:
        self.state = state
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:  # heads only: GETs carry no body
            line = bytes(self.buffer[:self.buffer.find(b"\r\n")])
            del self.buffer[:end + 4]
            if line.startswith(b"GET /__stats "):
                self.transport.write(_ok(json.dumps(  # type: ignore[union-attr]
                    {"count": self.state.count, "keys": {}}).encode()))
            elif b" /channels/" in line:
                self.state.count += 1


async def _serve(port: int, stall_after_s: float | None, stall_s: float,
                 kind: str = "fast") -> None:
    state = _State(stall_after_s, stall_s)
    if kind == "dies":
        state.die_after_s = stall_after_s
        state.stall_after_s = None
    loop = asyncio.get_running_loop()
    factory = (lambda: _Silent(state)) if kind == "silent" else (lambda: _Http(state))
    server = await loop.create_server(factory, "127.0.0.1", port, backlog=4096,
                                      reuse_address=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=("fast", "stall", "silent", "dies"), default="fast")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stall-after-s", type=float, default=1.5)
    parser.add_argument("--stall-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    stall_after = args.stall_after_s if args.kind == "stall" else None
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.port, args.stall_after_s if args.kind == "dies"
                           else stall_after, args.stall_s, args.kind))


# -- the test side ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def server_stats(url: str) -> dict:
    """``GET /__stats``: requests served and the count of each key."""
    with urllib.request.urlopen(url + "/__stats", timeout=10) as r:
        return json.loads(r.read())


def wait_for_requests(url: str, count: int, timeout: float = 60.0) -> int:
    """Poll ``/__stats`` until the server has seen ``count`` requests (or ``timeout`` passed):
    a fault injected after it meets a run that is really under way, however loaded the
    machine. Returns the count seen last."""
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        seen = server_stats(url)["count"]
        if seen >= count:
            break
        time.sleep(0.1)
    return seen


def reset(url: str) -> None:
    with urllib.request.urlopen(url + "/__reset", timeout=10) as r:
        r.read()


@contextlib.contextmanager
def serving_in_thread(server):
    """An in-process ``socketserver`` server serving from a thread; yielded once it accepts
    connections, shut down and closed on exit."""
    import threading

    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with socket.create_connection(server.server_address, timeout=5):
            pass  # accepting
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextlib.contextmanager
def run_server(kind: str = "fast", *, stall_after_s: float = 1.5, stall_s: float = 1.0,
               timeout: float = 20.0) -> Iterator[str]:
    """A server of ``kind`` ("fast", "stall", "silent" or "dies") in a subprocess on a free
    loopback port; yields ``http://127.0.0.1:PORT`` once it accepts connections; killed on exit."""
    for _attempt in range(3):  # the free port can be taken between probe and bind: retry
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.drive._servers", "--kind", kind, "--port", str(port),
             "--stall-after-s", str(stall_after_s), "--stall-s", str(stall_s)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            deadline = time.monotonic() + timeout
            while proc.poll() is None and time.monotonic() < deadline:
                if _accepts(port):
                    break
                time.sleep(0.02)
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                if "Address already in use" in err:
                    continue
                raise RuntimeError(f"test server exited {proc.returncode}: {err}")
            if not _accepts(port):
                raise RuntimeError(f"test server on port {port} not up after {timeout} s")
            yield f"http://127.0.0.1:{port}"
            return
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            if proc.stderr is not None:
                proc.stderr.close()
    raise RuntimeError("no free port for the test server after 3 attempts")


if __name__ == "__main__":
    main()
