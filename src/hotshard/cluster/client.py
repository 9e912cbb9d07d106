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
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any

from hotshard.cluster.resp import (
    TOO_MANY_REDIRECTS,
    RedisURL,
    encode_command,
    error_kind,
)
from hotshard.cluster.topology import atopology, replicas_of, slot_map_of, topology
from hotshard.errors import HotshardError, RespError

__all__ = ["CONNECTIONS_PER_NODE", "MAX_REDIRECTS", "REFRESH_EVERY_S", "RespCluster"]

CONNECTIONS_PER_NODE = 4
MAX_REDIRECTS = 5
REFRESH_EVERY_S = 1.0


def _retrieved(fut: asyncio.Future) -> None:
    """Mark a reply nobody awaits as seen, so a lost connection logs no stray exception."""
    if not fut.cancelled():
        fut.exception()


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
        url = self._url(address)
        self._use(url, topology(url, timeout=timeout or self.timeout))

    async def load(self, address: str | None = None, *, timeout: float | None = None) -> None:
        """``refresh`` on the running event loop: no thread, so nothing is left running
        when it is cancelled or the loop stops."""
        url = self._url(address)
        self._use(url, await atopology(url, timeout=timeout or self.timeout))

    def _use(self, url: RedisURL, rows: list) -> None:
        import numpy as np

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
