"""A small pipelined Redis Cluster client (RESP2 over asyncio protocols): the driver's and
the service's way to a cluster.

Why our own: a general client spends hundreds of microseconds per command on routing,
retries and response decoding, and an open-loop driver at thousands of commands a second
cannot afford it. This one keeps the live slot map (CLUSTER SLOTS), sends each command to its
slot's master over a few pipelined connections per node (replies come back in order, so a
FIFO of futures pairs them; hiredis parses them in C), and follows
redirections as a cluster client must: ``MOVED`` updates the slot map and resends, ``ASK``
resends once to the importing node after ``ASKING``. A redirection is not an error.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from hotshard.errors import HotshardError

__all__ = ["RespCluster", "RespError", "encode_command"]


class RespError(HotshardError, ConnectionError):
    """A command failed below Redis (refused, reset, timed out); ``kind`` names it."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind

CONNECTIONS_PER_NODE = 4
MAX_REDIRECTS = 5


def encode_command(args: tuple[str, ...] | list[str]) -> bytes:
    """RESP array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        raw = a.encode() if isinstance(a, str) else a
        parts.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(parts)


class _Conn(asyncio.Protocol):
    """One pipelined connection; replies are parsed by hiredis (C) and paired in order."""

    def __init__(self) -> None:
        import hiredis

        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader()
        self._reply_error = hiredis.ReplyError
        self.pending: collections.deque[asyncio.Future] = collections.deque()
        self.closed = False

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def connection_lost(self, exc) -> None:  # type: ignore[override]
        self.closed = True
        while self.pending:
            fut = self.pending.popleft()
            if not fut.done():
                fut.set_exception(RespError("connection error"))

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while self.pending:
            try:
                reply = self.reader.gets()
            except Exception:  # hiredis.ProtocolError: not RESP; drop the connection
                self.transport.close()  # type: ignore[union-attr]
                return
            if reply is False:
                break
            fut = self.pending.popleft()
            if not fut.done():
                fut.set_result(reply)

    def request(self, data: bytes) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        if self.closed:
            fut.set_exception(RespError("connection error"))
            return fut
        self.pending.append(fut)
        self.transport.write(data)  # type: ignore[union-attr]
        return fut


class RespCluster:
    """Commands to a Redis Cluster, routed by the live slot map."""

    def __init__(self, host: str, port: int, *, timeout: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.slot_node: list[str] = []
        self._pools: dict[str, list[_Conn]] = {}
        self.replicas: dict[str, tuple[str, ...]] = {}
        self._turn = 0
        self._locks: dict[str, asyncio.Lock] = {}
        self._slot_cache: dict[str, int] = {}
        self.redirects = 0

    def refresh(self) -> None:
        """Load CLUSTER SLOTS (synchronously: at start, and after a MOVED)."""
        import numpy as np

        from hotshard.cluster.local import live_slot_map, replica_map

        url = f"redis://{self.host}:{self.port}"
        slot_node, nodes = live_slot_map(url)
        self.slot_node = [nodes[i] for i in np.asarray(slot_node).tolist()]
        self.replicas = replica_map(url)

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

    async def _conn(self, node: str, key: str) -> _Conn:
        """The connection for ``key`` on ``node``: always the same one for a key, so the
        commands on one key stay in order (a stream refuses an id below its top)."""
        pool = self._pools.get(node)
        if pool and len(pool) >= CONNECTIONS_PER_NODE:
            conn = pool[hash(key) % len(pool)]
            if not conn.closed:
                return conn
        lock = self._locks.setdefault(node, asyncio.Lock())
        async with lock:  # one caller opens the node's connections; the others wait for them
            pool = [c for c in self._pools.get(node, []) if not c.closed]
            host, _, port = node.rpartition(":")
            while len(pool) < CONNECTIONS_PER_NODE:
                try:
                    _, conn = await asyncio.wait_for(
                        asyncio.get_running_loop().create_connection(_Conn, host, int(port)),
                        self.timeout)
                except (OSError, TimeoutError):
                    raise RespError("connection error") from None
                if node not in self.slot_node:  # a replica: it serves reads after READONLY
                    conn.request(encode_command(("READONLY",)))
                pool.append(conn)
            self._pools[node] = pool
        return pool[hash(key) % len(pool)]

    async def execute(self, key: str, data: bytes) -> str | None:
        """Send ``data`` (an encoded command on ``key``); the error reply, or None."""
        error, _ = await self.call(key, data)
        return error

    async def call(self, key: str, data: bytes, *, replica: bool = False
                   ) -> tuple[str | None, Any]:
        """(error reply or None, the decoded reply) of ``data``, a command on ``key``; with
        ``replica``, a read served in turn by the key's master and its replicas."""
        import hiredis

        node = self.node_of(key)
        if replica and self.replicas.get(node):
            choices = (node, *self.replicas[node])
            self._turn += 1
            node = choices[self._turn % len(choices)]
        asking = False
        for _ in range(MAX_REDIRECTS):
            conn = await self._conn(node, key)
            if asking:
                conn.request(encode_command(("ASKING",)))
            try:
                reply = await asyncio.wait_for(conn.request(data), self.timeout)
            except TimeoutError:
                raise RespError("timeout") from None
            if not isinstance(reply, hiredis.ReplyError):
                return None, reply
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
            return error, None
        return "too many redirections", None

    async def aclose(self) -> None:
        for pool in self._pools.values():
            for conn in pool:
                if conn.transport is not None:
                    conn.transport.close()
        self._pools.clear()

    def describe(self) -> dict[str, Any]:
        return {"nodes": sorted(set(self.slot_node)), "redirects": self.redirects}
