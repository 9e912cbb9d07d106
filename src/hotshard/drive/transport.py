"""Sending requests: a small keep-alive HTTP/1.1 client on asyncio protocols, and templates.

Why our own client: an open-loop driver must send thousands of requests a second from one
Python process at their scheduled instants; a general client spends most of that budget on
features we do not use. This one writes a pre-formatted request, parses the status line and
the headers we need (``Content-Length``, ``Transfer-Encoding``, ``Connection``, ``X-Shard``),
and reuses connections; one request per connection at a time (no pipelining), new connections
opened as concurrency needs them.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import ssl
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from hotshard.errors import InputError, TransportError

__all__ = ["HttpTarget", "RequestTemplate", "TransportError", "parse_template"]

_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD")
MAX_OPENING = 16  # connections being opened at once


@dataclass(frozen=True)
class RequestTemplate:
    method: str
    path: str  # with {key}

    def render(self, key: str) -> str:
        return self.path.replace("{key}", quote(key, safe=""))


def parse_template(text: str, what: str) -> RequestTemplate:
    """'METHOD /path/{key}...' -> RequestTemplate; InputError naming ``what`` otherwise."""
    parts = str(text).split(None, 1)
    if len(parts) != 2 or parts[0].upper() not in _METHODS or not parts[1].startswith("/"):
        raise InputError(f"{what} template must be 'METHOD /path' with {{key}} where the key "
                         f"goes, e.g. 'GET /channels/{{key}}/messages?limit=50'; got {text!r}")
    if "{key}" not in parts[1]:
        raise InputError(f"{what} template {text!r} has no {{key}}: every request would hit "
                         "one key")
    if re.search(r"\s", parts[1]):
        raise InputError(f"{what} template path must not contain spaces: {text!r}")
    return RequestTemplate(parts[0].upper(), parts[1])


# the largest response held (a page of history is kilobytes; a target answering more is not
# one to measure)
MAX_RESPONSE_BYTES = 16 * 1024 * 1024


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future | None = None
        self.closed = False
        self.keep_alive = True

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def connection_lost(self, exc) -> None:  # type: ignore[override]
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(TransportError("connection reset"))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > MAX_RESPONSE_BYTES:   # a target streaming without end
            self.keep_alive = False
            self.buffer.clear()
            if self.transport is not None:
                self.transport.close()
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_exception(TransportError("response too large"))
            return
        if self.waiter is not None and not self.waiter.done():
            try:
                parsed = self._parse()
            except (TransportError, ValueError) as e:
                self.keep_alive = False
                self.waiter.set_exception(e if isinstance(e, TransportError)
                                          else TransportError("malformed response"))
                return
            if parsed is not None:
                self.waiter.set_result(parsed)

    def _parse(self) -> tuple[int, str | None] | None:
        """(status, X-Shard) once a whole response is buffered; consumes it."""
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        try:
            status = int(head[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            raise TransportError("malformed response") from None
        length, chunked, shard = 0, False, None
        for line in head[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value.strip())
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif name == "connection" and value.strip().lower() == "close":
                self.keep_alive = False
            elif name == "x-shard":
                shard = value.strip()
        body_start = end + 4
        if chunked:
            done = self.buffer.find(b"\r\n0\r\n\r\n", body_start - 2)
            if done < 0:
                return None
            del self.buffer[:done + 7]
        else:
            if len(self.buffer) < body_start + length:
                return None
            del self.buffer[:body_start + length]
        return status, shard

    async def exchange(self, data: bytes, timeout: float) -> tuple[int, str | None]:
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)  # type: ignore[union-attr]
        try:
            parsed = self._parse() if self.buffer else None
            if parsed is not None:
                return parsed
            return await asyncio.wait_for(self.waiter, timeout)
        except TimeoutError:
            self.keep_alive = False
            raise TransportError("timeout") from None
        finally:
            self.waiter = None


class HttpTarget:
    """Requests to one HTTP(S) origin from read and write templates.

    Parameters
    ----------
    url : the origin, ``http://host:port`` (a path prefix is kept).
    read, write : templates such as ``GET /channels/{key}/messages?limit=50``.
    timeout : seconds before a request counts as a ``timeout`` error.
    max_connections : connections open at most; a request beyond waits for one (and that
        wait is the driver's dispatch lag).
    """

    def __init__(self, url: str, *, read: str = "GET /channels/{key}/messages?limit=50",
                 write: str = "POST /channels/{key}/messages", timeout: float = 30.0,
                 max_connections: int = 1024) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(f"target must be an http:// or https:// URL, got {url!r}")
        try:
            self.port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise InputError(f"target URL has a bad port: {url!r}") from None
        self.url = url
        self.host = parts.hostname
        self.prefix = parts.path.rstrip("/")
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.read = parse_template(read, "read")
        self.write = parse_template(write, "write")
        self.timeout = timeout
        self._idle: list[_Connection] = []
        self._waiters: collections.deque[asyncio.Future] = collections.deque()
        self._total = 0      # connections open or opening
        self._opening = 0
        self.max_connections = max_connections
        host = self.host if ":" not in self.host else f"[{self.host}]"
        self._host_header = host if parts.port is None else f"{host}:{self.port}"

    async def check(self) -> None:
        """Open one connection, or raise InputError saying why the target is unreachable."""
        try:
            conn = await asyncio.wait_for(self._connect(), 5.0)
        except (OSError, TimeoutError) as e:
            reason = getattr(e, "strerror", None) or type(e).__name__
            raise InputError(f"cannot reach {self.url}: {reason}; is the service running?"
                             ) from None
        self._idle.append(conn)
        self._total += 1

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(_Connection, self.host, self.port, ssl=self.ssl)
        return conn

    def build(self, is_read: bool, key: str, body_size: int, n: int) -> bytes:
        """The request bytes for one arrival."""
        template = self.read if is_read else self.write
        path = self.prefix + template.render(key)
        lines = [f"{template.method} {path} HTTP/1.1", f"Host: {self._host_header}",
                 "User-Agent: hotshard-drive"]
        body = b""
        if template.method in ("POST", "PUT", "PATCH"):
            body = json.dumps({"user": f"u{n % 100000}", "body": "m" * max(1, body_size)},
                              separators=(",", ":")).encode()
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    async def prewarm(self, connections: int) -> None:
        """Open ``connections`` before the run starts (a connect costs several times a
        request on an open connection, and thousands at once swamp the target's accept)."""
        while self._total < min(connections, self.max_connections):
            batch = min(MAX_OPENING, connections - self._total)
            self._total += batch
            try:
                opened = await asyncio.gather(*(self._connect() for _ in range(batch)))
            except (OSError, TimeoutError):
                self._total -= batch
                raise TransportError("connect error") from None
            self._idle.extend(opened)

    async def _acquire(self) -> _Connection:
        """An idle connection, a new one (at most MAX_OPENING opening at once, at most
        ``max_connections`` in all), or the next one released."""
        loop = asyncio.get_running_loop()
        while True:
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
                self._total -= 1
            if self._opening < MAX_OPENING and self._total < self.max_connections:
                self._opening += 1
                self._total += 1
                try:
                    return await asyncio.wait_for(self._connect(), self.timeout)
                except TimeoutError:
                    self._total -= 1
                    raise TransportError("connect timeout") from None
                except OSError as e:
                    self._total -= 1
                    raise TransportError("connection refused" if isinstance(
                        e, ConnectionRefusedError) else "connect error") from None
                finally:
                    self._opening -= 1
                    self._wake(None)
            waiter = loop.create_future()
            self._waiters.append(waiter)
            conn = await waiter
            if conn is not None and not conn.closed:
                return conn

    def _wake(self, conn: _Connection | None) -> bool:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return True
        return False

    def _release(self, conn: _Connection) -> None:
        if conn.keep_alive and not conn.closed:
            if not self._wake(conn):
                self._idle.append(conn)
            return
        if conn.transport is not None:
            conn.transport.close()
        self._total -= 1
        self._wake(None)

    async def send(self, data: bytes) -> tuple[int, str | None, float]:
        """(HTTP status, X-Shard, loop time the request was written) of one request;
        TransportError below HTTP. Waiting for a connection happens before the write time,
        so it counts as the driver's dispatch lag, not the target's service time."""
        conn = await self._acquire()
        written = asyncio.get_running_loop().time()
        try:
            status, shard = await conn.exchange(data, self.timeout)
        except TransportError:
            conn.keep_alive = False
            self._release(conn)
            raise
        self._release(conn)
        return status, shard, written

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._idle:
            if conn.transport is not None:
                conn.transport.close()
        self._idle.clear()
