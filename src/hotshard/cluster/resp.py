"""A small pipelined Redis Cluster client (RESP2 over asyncio protocols): the driver's and
the service's way to a cluster.

Why our own: a general client spends hundreds of microseconds per command on routing,
retries and response decoding, and an open-loop driver at thousands of commands a second
cannot afford it. This one keeps the live slot map (CLUSTER SLOTS), sends each command to its
slot's master over a few pipelined connections per node (replies come back in order, so a
FIFO of futures pairs them; hiredis parses them in C), and follows
redirections as a cluster client must: ``MOVED`` updates the slot map and resends, ``ASK``
resends once to the importing node after ``ASKING``. A redirection is not an error.

Under faults it stays honest and bounded: every new connection logs in (AUTH) before anything
else; a command's whole life (connecting, redirections, the reply) is bounded by ``timeout``;
a failure names the node the command was sent to (``RespError.node``), so a dead or frozen
node's failures are counted as that node's; a dead node is retried by the next command to it
(one connection attempt at a time per node, shared by every command waiting for it), and a
connection failure also reloads the slot map in the background (at most once a second), so a
failover's new master is found even though no node answers MOVED for a dead one.

It also holds what every hotshard command needs to talk to one node: its URL and login
(``RedisURL``, ``parse_url``: the password in the URL or, when the URL gives none, in the
environment variable ``REDISCLI_AUTH``, as redis-cli takes it) and one-off questions (``ask``,
``ask_all``, ``aask_all``: a few commands on a new connection, the slot map among them).
Each is bounded as a whole by one deadline, whatever the peer does: a peer that never
answers, or trickles bytes and never ends its reply, costs ``timeout`` seconds and one line
(``NodeUnreachable``), never a hang; the asynchronous ones run on the event loop, so no
thread is left behind for the interpreter to wait for at exit.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from hotshard.errors import HotshardError, InputError, NodeLoading, NodeUnreachable, RespError

__all__ = ["DEFAULT_TIMEOUT", "PASSWORD_ENV", "TOO_MANY_REDIRECTS", "NodeLoading",
           "NodeUnreachable", "RedisURL", "RespCluster", "RespError", "aask_all", "aexchange",
           "ask", "ask_all", "encode_command", "error_kind", "exchange", "node_key",
           "parse_info", "parse_url", "redact_url"]

CONNECTIONS_PER_NODE = 4
MAX_REDIRECTS = 5
REFRESH_EVERY_S = 1.0
TOO_MANY_REDIRECTS = "too many redirections (MOVED storm)"
PASSWORD_ENV = "REDISCLI_AUTH"  # redis-cli's: the password when the URL gives none
DEFAULT_TIMEOUT = 5.0  # seconds for one question to a node (connect, commands, replies)
MAX_REPLY_BYTES = 64 << 20  # a one-off question's replies (INFO of a node is ~10 KB)
PASSWORD_HINT = (f"give it in the environment variable {PASSWORD_ENV} (kept off command lines) "
                 "or in the URL, redis-cluster://:PASSWORD@HOST:PORT, as `hotshard cluster up` "
                 "printed it (`hotshard cluster status --dir DIR` shows it again)")


def error_kind(error: str) -> str:
    """How a failure report names an error reply: ``redis`` and the reply's first word
    (``redis CLUSTERDOWN``, ``redis LOADING``, ``redis ERR``), which is Redis's own error
    code; too many redirections is named as the MOVED storm it is."""
    if error == TOO_MANY_REDIRECTS:
        return f"redis {error}"
    return "redis " + (error.split(None, 1) or ["error"])[0]


def _retrieved(fut: asyncio.Future) -> None:
    """Mark a reply nobody awaits as seen, so a lost connection logs no stray exception."""
    if not fut.cancelled():
        fut.exception()


def encode_command(args: Sequence[Any]) -> bytes:
    """RESP array of bulk strings (a number is sent as its decimal text)."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        raw = a.encode() if isinstance(a, str) else a if isinstance(a, bytes) else \
            str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(parts)


class _Replies:
    """The replies of ``count`` commands, parsed as their bytes arrive (hiredis, text
    decoded); an error reply is a ``hiredis.ReplyError`` value, not raised."""

    def __init__(self, address: str, count: int) -> None:
        import hiredis

        self.address = address
        self.count = count
        self.reader = hiredis.Reader(encoding="utf-8", errors="replace")
        self.replies: list[Any] = []
        self.received = 0

    def feed(self, data: bytes) -> bool:
        """Take ``data``; whether every reply is complete."""
        if not data:
            raise NodeUnreachable(f"{self.address} closed the connection before its reply "
                                  "was complete: not a Redis server, or one shutting down")
        self.received += len(data)
        if self.received > MAX_REPLY_BYTES:
            raise NodeUnreachable(f"{self.address} sent more than {MAX_REPLY_BYTES >> 20} MiB "
                                  "without completing its reply: not a Redis server")
        self.reader.feed(data)
        while len(self.replies) < self.count:
            try:
                reply = self.reader.gets()
            except Exception:  # hiredis.ProtocolError
                raise NodeUnreachable(f"{self.address} is not a Redis server (its answer "
                                      "is not the Redis protocol)") from None
            if reply is False:
                return False
            self.replies.append(reply)
        return True


def _no_reply(address: str, timeout: float, connected: bool) -> NodeUnreachable:
    if not connected:
        return NodeUnreachable(f"cannot reach Redis at {address}: no connection within "
                               f"{timeout:g} s (a host that is down, or a firewall)")
    return NodeUnreachable(f"{address} accepted the connection but sent no complete reply "
                           f"within {timeout:g} s: not a Redis server, or a frozen one")


def _unreachable(address: str, error: OSError) -> NodeUnreachable:
    reason = "connection refused" if isinstance(error, ConnectionRefusedError) else \
        (error.strerror or str(error) or type(error).__name__)
    return NodeUnreachable(f"cannot reach Redis at {address}: {reason}")


def exchange(host: str, port: int, commands: Sequence[Sequence[Any]], *,
             timeout: float) -> list[Any]:
    """The replies to ``commands``, sent together on a new connection to ``host:port``.

    Connecting, sending and reading every reply share one deadline, ``timeout`` seconds
    from the call, whatever the peer does (silent, or sending a byte at a time and never
    ending its reply): each read waits only for what is left of it.

    Raises
    ------
    NodeUnreachable
        Refused, reset, closed, not RESP, or no complete reply within ``timeout``.
    """
    address = f"{host}:{port}"
    deadline = time.monotonic() + timeout
    replies = _Replies(address, len(commands))
    connected = False
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            connected = True
            sock.settimeout(max(1e-3, deadline - time.monotonic()))
            sock.sendall(b"".join(encode_command(c) for c in commands))
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                sock.settimeout(left)
                if replies.feed(sock.recv(65536)):
                    return replies.replies
    except TimeoutError:  # socket.timeout is TimeoutError
        raise _no_reply(address, timeout, connected) from None
    except OSError as e:
        raise _unreachable(address, e) from None


async def aexchange(host: str, port: int, commands: Sequence[Sequence[Any]], *,
                    timeout: float) -> list[Any]:
    """``exchange`` on the running event loop (no thread): the same replies, deadline and
    errors; the connection is closed however it ends, cancellation included."""
    address = f"{host}:{port}"
    replies = _Replies(address, len(commands))
    connected = False
    writer: asyncio.StreamWriter | None = None

    async def talk() -> list[Any]:
        nonlocal connected, writer
        reader, writer = await asyncio.open_connection(host, port)
        connected = True
        writer.write(b"".join(encode_command(c) for c in commands))
        while not replies.feed(await reader.read(65536)):
            pass
        return replies.replies

    try:
        return await asyncio.wait_for(talk(), timeout)
    except TimeoutError:
        raise _no_reply(address, timeout, connected) from None
    except OSError as e:
        raise _unreachable(address, e) from None
    finally:
        if writer is not None:
            writer.transport.abort()


def node_key(address: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port): the order nodes are numbered in."""
    h, _, p = address.rpartition(":")
    return h, int(p)


@dataclass(frozen=True)
class RedisURL:
    """A node to talk to and how to log in: ``redis[-cluster]://[[USER]:PASSWORD@]HOST[:PORT]``."""

    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    scheme: str = "redis-cluster"
    password_from: str = field(default="url", repr=False, compare=False)  # or PASSWORD_ENV

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def at(self, address: str) -> RedisURL:
        """Another node of the same cluster, with the same credentials."""
        host, port = node_key(address)
        return replace(self, host=host or self.host, port=port)

    def __str__(self) -> str:
        return self._format(quote(self.password, safe="") if self.password is not None
                            else None)

    def redacted(self) -> str:
        """The URL without its password: for messages, logs and recorded results."""
        return self._format("***" if self.password is not None else None)

    def given(self) -> str:
        """The URL as the user gave it: with its password only if that was in the URL (one
        taken from the environment stays out of output)."""
        return str(self) if self.password_from == "url" else self._format(None)

    @property
    def password_origin(self) -> str:
        """Where the password came from, for messages: ``the URL`` or the variable's name."""
        return "the URL" if self.password_from == "url" else self.password_from

    def _format(self, password: str | None) -> str:
        user = quote(self.username or "", safe="")
        login = f"{user}:{password}@" if password is not None else f"{user}@" if user else ""
        return f"{self.scheme}://{login}{self.address}"


def parse_url(url: str | RedisURL, *, environ: Mapping[str, str] | None = None) -> RedisURL:
    """``redis://`` or ``redis-cluster://`` URL (or bare ``HOST:PORT``) -> RedisURL.

    The password may be given as ``:PASSWORD@`` or ``USER:PASSWORD@``, percent-encoded as in
    any URL; when the URL gives none, it is ``REDISCLI_AUTH`` from ``environ`` (default
    ``os.environ``; unset or empty: no password), as redis-cli does. The port defaults to
    6379.
    """
    if isinstance(url, RedisURL):
        return url
    parts = urlsplit(url if "://" in url else f"redis://{url}")
    if parts.scheme not in ("redis", "redis-cluster") or not parts.hostname:
        raise InputError("expected redis://HOST:PORT or redis-cluster://[:PASSWORD@]HOST:PORT, "
                         f"got {_redact_text(url)!r}")
    try:
        port = parts.port or 6379
    except ValueError:
        raise InputError(f"bad port in {_redact_text(url)!r}") from None
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    if password is None:
        password = (os.environ if environ is None else environ).get(PASSWORD_ENV) or None
        if password is not None:
            return RedisURL(parts.hostname, port, username, password, parts.scheme,
                            PASSWORD_ENV)
    return RedisURL(parts.hostname, port, username, password, parts.scheme)


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (a URL that does not parse is returned
    with its login part cut), so a recorded target or a message never carries a secret."""
    try:
        return parse_url(url, environ={}).redacted()
    except InputError:
        return _redact_text(url)


def _redact_text(url: str) -> str:
    scheme, sep, rest = url.rpartition("://")
    login, at, host = rest.rpartition("@")
    return f"{scheme}{sep}***@{host}" if at else url


def _login(url: RedisURL) -> list[tuple[str, ...]]:
    """What a new connection sends first: AUTH with the URL's (or environment's) password."""
    if url.password is None:
        return []
    return [("AUTH", url.username, url.password) if url.username else ("AUTH", url.password)]


def _auth_error(url: RedisURL, text: str) -> InputError:
    where = url.password_origin
    if "without any password" in text or "no password is set" in text:
        fix = f"unset {where}" if url.password_from != "url" else "remove ':PASSWORD@' from it"
        return InputError(f"Redis at {url.address} has no password, but {where} gives one: "
                          f"{fix}")
    if url.password is None:
        return InputError(f"Redis at {url.address} needs a password (NOAUTH) and none was "
                          f"given: {PASSWORD_HINT}")
    return InputError(f"Redis at {url.address} refused the password in {where} (WRONGPASS): "
                      f"{PASSWORD_HINT}")


def _reply_error(url: RedisURL, command: Sequence[Any], text: str) -> InputError:
    """The InputError for an error reply to ``command``, named as Redis named it."""
    if text.startswith(("NOAUTH", "WRONGPASS")):
        return _auth_error(url, text)
    if text.startswith("LOADING"):
        return NodeLoading(f"Redis at {url.address} is loading its data (LOADING): wait for "
                           "it")
    if "cluster support disabled" in text:
        return InputError(f"{url.address} is a Redis server without cluster mode, not a "
                          "Redis Cluster node")
    return InputError(f"{url.address} answered {' '.join(map(str, command[:2]))} with an "
                      f"error: {text}")


def _checked(url: RedisURL, commands: Sequence[Sequence[Any]], replies: list[Any]
             ) -> list[Any]:
    """The replies to ``commands`` (the login's come first): any error reply raised."""
    import hiredis

    hello = len(replies) - len(commands)
    for reply in replies[:hello]:
        if isinstance(reply, hiredis.ReplyError):
            raise _auth_error(url, str(reply))
    out = replies[hello:]
    for command, reply in zip(commands, out, strict=True):
        if isinstance(reply, hiredis.ReplyError):
            raise _reply_error(url, command, str(reply))
    return out


def ask_all(url: RedisURL, commands: Sequence[Sequence[Any]], *,
            timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
    """The replies to ``commands``, sent after the login on one new connection to the URL's
    node; the whole exchange is bounded by ``timeout`` whatever the node does.

    Raises
    ------
    InputError
        NodeUnreachable when the node is not there, silent, too slow or not Redis; a
        missing or refused password, LOADING, or any other error reply, naming the node.
    """
    replies = exchange(url.host, url.port, [*_login(url), *commands], timeout=timeout)
    return _checked(url, commands, replies)


async def aask_all(url: RedisURL, commands: Sequence[Sequence[Any]], *,
                   timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
    """``ask_all`` on the running event loop (no thread)."""
    replies = await aexchange(url.host, url.port, [*_login(url), *commands], timeout=timeout)
    return _checked(url, commands, replies)


def ask(url: RedisURL, *command: Any, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """The reply to one command (see ``ask_all``)."""
    return ask_all(url, [command], timeout=timeout)[0]


def parse_info(text: str) -> dict[str, Any]:
    """INFO's ``key:value`` lines -> dict; the ``dbN`` and ``cmdstat_*`` lines' ``a=1,b=2``
    values -> dicts of numbers (as redis-py parses them)."""
    out: dict[str, Any] = {}
    for line in str(text).splitlines():
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        if key.startswith(("db", "cmdstat_")) and "=" in value:
            fields = {}
            for pair in value.split(","):
                name, _, number = pair.partition("=")
                try:
                    fields[name] = int(number)
                except ValueError:
                    with contextlib.suppress(ValueError):
                        fields[name] = float(number)
            out[key] = fields
        else:
            out[key] = value
    return out


class _Conn(asyncio.Protocol):
    """One pipelined connection; replies are parsed by hiredis (C) and paired in order."""

    def __init__(self) -> None:
        import hiredis

        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader()
        self.pending: collections.deque[asyncio.Future] = collections.deque()
        self.closed = False
        self.lost_kind = "connection error"

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def connection_lost(self, exc) -> None:  # type: ignore[override]
        self.closed = True
        while self.pending:
            fut = self.pending.popleft()
            if not fut.done():
                fut.set_exception(RespError(self.lost_kind))

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while self.pending:
            try:
                reply = self.reader.gets()
            except Exception:  # hiredis.ProtocolError: not RESP; drop the connection
                self.lost_kind = "not a Redis server (protocol error)"
                self.close()
                return
            if reply is False:
                break
            fut = self.pending.popleft()
            if not fut.done():
                fut.set_result(reply)

    def request(self, data: bytes) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        if self.closed:
            fut.set_exception(RespError(self.lost_kind))
            return fut
        self.pending.append(fut)
        self.transport.write(data)  # type: ignore[union-attr]
        return fut

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.closed = True


class RespCluster:
    """Commands to a Redis Cluster, routed by the live slot map.

    Parameters
    ----------
    host, port : any node of the cluster (the slot map is loaded from it).
    timeout : seconds a command may take in all (connecting, redirections, reply), and the
        slot-map fetch (connecting, CLUSTER INFO, CLUSTER SLOTS) in all.
    username, password : the login every new connection sends (AUTH) before anything else.
    """

    def __init__(self, host: str, port: int, *, timeout: float = 30.0,
                 username: str | None = None, password: str | None = None) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.username = username
        self.password = password
        self._login = RedisURL(host, port, username, password)
        self.slot_node: list[str] = []
        self._pools: dict[str, list[_Conn]] = {}
        self._opening: dict[str, asyncio.Future] = {}
        self.replicas: dict[str, tuple[str, ...]] = {}
        self._turn = 0
        self._slot_cache: dict[str, int] = {}
        self.redirects = 0
        self._refreshed_at = float("-inf")
        self._refreshing: asyncio.Future | None = None
        self._closed = False

    @classmethod
    def of(cls, url: RedisURL, *, timeout: float = 30.0) -> RespCluster:
        """The client for ``url`` (its node, its login, and where its password came from,
        so a refused login names the URL or ``REDISCLI_AUTH``)."""
        client = cls(url.host, url.port, timeout=timeout, username=url.username,
                     password=url.password)
        client._login = url
        return client

    def _url(self, address: str | None = None) -> RedisURL:
        return self._login.at(address) if address else self._login

    def refresh(self, address: str | None = None, *, timeout: float | None = None) -> None:
        """Load CLUSTER SLOTS from ``address`` (default: the node given at construction),
        synchronously, within ``timeout`` (default: the client's) in all.

        Raises
        ------
        InputError
            The node is unreachable, silent, too slow, not Redis, wants a password, or the
            cluster is not ok (see ``hotshard.cluster.local.topology``).
        """
        from hotshard.cluster.local import topology

        url = self._url(address)
        self._use(url, topology(url, timeout=timeout or self.timeout))

    async def load(self, address: str | None = None, *, timeout: float | None = None) -> None:
        """``refresh`` on the running event loop: no thread, so nothing is left running
        when it is cancelled or the loop stops."""
        from hotshard.cluster.local import atopology

        url = self._url(address)
        self._use(url, await atopology(url, timeout=timeout or self.timeout))

    def _use(self, url: RedisURL, rows: list) -> None:
        import numpy as np

        from hotshard.cluster.local import replicas_of, slot_map_of

        slot_node, nodes = slot_map_of(rows, f"the cluster at {url.address}")
        self.slot_node = [nodes[i] for i in np.asarray(slot_node).tolist()]
        self.replicas = replicas_of(rows)

    def _refresh_soon(self) -> None:
        """After a connection failure: reload the slot map in a task (at most once every
        REFRESH_EVERY_S) from the first of a few nodes that answers, so a failover is
        followed; each try is short, so a frozen node does not hold it for long."""
        loop = asyncio.get_running_loop()
        if self._closed or self._refreshing is not None or \
                loop.time() - self._refreshed_at < REFRESH_EVERY_S:
            return
        self._refreshed_at = loop.time()
        candidates = list(dict.fromkeys([f"{self.host}:{self.port}", *self.slot_node]))[:3]

        async def reload() -> None:
            for address in candidates:
                with contextlib.suppress(HotshardError):
                    await self.load(address, timeout=min(self.timeout, 1.0))
                    return

        self._refreshing = asyncio.ensure_future(reload())
        self._refreshing.add_done_callback(self._refreshed)

    def _refreshed(self, fut: asyncio.Future) -> None:
        self._refreshing = None  # a failed reload is tried again after the next failure
        _retrieved(fut)

    def slot(self, key: str) -> int:
        slot = self._slot_cache.get(key)
        if slot is None:
            from hotshard.shards.partitioners import make_partitioner

            part = getattr(self, "_part", None)
            if part is None:
                part = self._part = make_partitioner("redis-cluster", 1)
            slot = int(part.slots([key])[0])
            if len(self._slot_cache) > 1 << 20:
                self._slot_cache.clear()
            self._slot_cache[key] = slot
        return slot

    def node_of(self, key: str) -> str:
        return self.slot_node[self.slot(key)]

    async def _conn(self, node: str, key: str, deadline: float) -> _Conn:
        """The connection for ``key`` on ``node``: always the same one for a key, so the
        commands on one key stay in order (a stream refuses an id below its top). Opening a
        node's connections is one attempt shared by every command waiting for it, so a dead
        node costs one refused connect, not one per waiting command."""
        pool = self._pools.get(node)
        if pool:
            conn = pool[hash(key) % len(pool)]
            if not conn.closed:
                return conn
        opening = self._opening.get(node)
        if opening is None:
            opening = self._opening[node] = asyncio.ensure_future(self._open(node, deadline))
            opening.add_done_callback(lambda f, node=node: self._opened(node, f))
        try:
            pool = await asyncio.wait_for(asyncio.shield(opening),
                                          deadline - asyncio.get_running_loop().time())
        except TimeoutError:
            raise RespError("connect timeout", node) from None
        return pool[hash(key) % len(pool)]

    def _opened(self, node: str, fut: asyncio.Future) -> None:
        self._opening.pop(node, None)
        if not fut.cancelled() and fut.exception() is not None:
            self._refresh_soon()  # a node that cannot be reached: has its slot moved?

    async def _open(self, node: str, deadline: float) -> list[_Conn]:
        """Open the node's missing connections (logged in, READONLY on a replica)."""
        pool = [c for c in self._pools.get(node, []) if not c.closed]
        opened = await asyncio.gather(*(self._open_one(node, deadline) for _ in
                                        range(CONNECTIONS_PER_NODE - len(pool))),
                                      return_exceptions=True)
        pool += [c for c in opened if isinstance(c, _Conn)]
        if not pool:
            error = next(e for e in opened if isinstance(e, BaseException))
            raise error
        self._pools[node] = pool
        return pool

    async def _open_one(self, node: str, deadline: float) -> _Conn:
        import hiredis

        loop = asyncio.get_running_loop()
        host, _, port = node.rpartition(":")
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(_Conn, host, int(port)),
                                             deadline - loop.time())
        except TimeoutError:
            raise RespError("connect timeout", node) from None
        except ConnectionRefusedError:
            raise RespError("connection refused", node) from None
        except OSError:
            raise RespError("connection error", node) from None
        hello = []
        if self.password is not None:
            hello.append(("AUTH", self.username, self.password) if self.username
                         else ("AUTH", self.password))
        if node not in self.slot_node:  # a replica: it serves reads after READONLY
            hello.append(("READONLY",))
        try:
            replies = await asyncio.wait_for(
                asyncio.gather(*(conn.request(encode_command(c)) for c in hello)),
                deadline - loop.time())
        except TimeoutError:
            conn.close()
            raise RespError("timeout", node) from None
        except RespError as e:
            raise RespError(e.kind, node) from None
        for reply in replies:
            if isinstance(reply, hiredis.ReplyError):
                conn.close()
                raise RespError(error_kind(str(reply)), node)
        return conn

    async def execute(self, key: str, data: bytes) -> str | None:
        """Send ``data`` (an encoded command on ``key``); the error reply, or None."""
        _, error, _ = await self.send(key, data)
        return error

    async def call(self, key: str, data: bytes, *, replica: bool = False
                   ) -> tuple[str | None, Any]:
        """(error reply or None, the decoded reply) of ``data``, a command on ``key``; with
        ``replica``, a read served in turn by the key's master and its replicas."""
        _, error, reply = await self.send(key, data, replica=replica)
        return error, reply

    async def send(self, key: str, data: bytes, *, replica: bool = False
                   ) -> tuple[str, str | None, Any]:
        """(node that answered, error reply or None, decoded reply) of ``data``, a command on
        ``key``, following redirections; the whole exchange is bounded by ``timeout``.

        Raises
        ------
        RespError
            No answer: ``connection refused``, ``connection error``, ``connect timeout``,
            ``timeout``, a failed login (``redis NOAUTH``, ``redis WRONGPASS``); its ``node``
            is the node the command was sent to.
        """
        import hiredis

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        node = self.node_of(key)
        if replica and self.replicas.get(node):
            choices = (node, *self.replicas[node])
            self._turn += 1
            node = choices[self._turn % len(choices)]
        asking = False
        for _ in range(MAX_REDIRECTS):
            conn = await self._conn(node, key, deadline)
            if asking:  # its +OK is not awaited; a lost connection fails the command itself
                conn.request(encode_command(("ASKING",))).add_done_callback(_retrieved)
            try:
                reply = await asyncio.wait_for(conn.request(data), deadline - loop.time())
            except TimeoutError:
                raise RespError("timeout", node) from None
            except RespError as e:
                if e.kind == "connection error":
                    self._refresh_soon()
                raise RespError(e.kind, node) from None
            if not isinstance(reply, hiredis.ReplyError):
                return node, None, reply
            error = str(reply)
            if error.startswith("MOVED "):
                _, slot, address = error.split()
                self.redirects += 1
                self.slot_node[int(slot)] = address
                node, asking = address, False
                continue
            if error.startswith("ASK "):
                _, _, address = error.split()
                self.redirects += 1
                node, asking = address, True
                continue
            return node, error, None
        return node, TOO_MANY_REDIRECTS, None

    async def aclose(self) -> None:
        self._closed = True
        if self._refreshing is not None:
            self._refreshing.cancel()
        for opening in list(self._opening.values()):
            opening.cancel()
        for pool in self._pools.values():
            for conn in pool:
                conn.close()
        self._pools.clear()

    def describe(self) -> dict[str, Any]:
        return {"nodes": sorted(set(self.slot_node)), "redirects": self.redirects}
