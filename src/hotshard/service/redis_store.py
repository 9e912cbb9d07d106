"""The service's shards on a Redis Cluster: a stream per channel instead of SQLite files.

``hotshard serve --store redis-cluster://:PASSWORD@HOST:PORT`` (the URL ``hotshard cluster up``
prints) keeps each channel's history in the stream ``chat:{<partition key>}`` (the key inside a
hash tag, so its slot is the key's own slot, as ``hotshard shard -p redis-cluster`` computes
it). A "shard" is a master node, numbered by address as ``predict --slots-from`` numbers them;
the time-bucket split's sub-partition keys (``CHANNEL#s``) hash to their own slots, probed onto
different nodes. Message ids are issued by the gateway (time-ordered, the node's number in the
low 10 bits, as the SQLite store does) and written as the stream entry id ``<ms>-<low 22
bits>``, so paging by ``before`` is an exclusive ``XREVRANGE``. Durability is Redis's: a write
is acknowledged once the node applied it; with ``appendfsync everysec`` a crash of the machine
(not of the process) can lose up to about a second of acknowledged writes. Read replicas are
the cluster's own replica nodes (``cluster up --replicas R``: R nodes per shard), read with
READONLY: Redis
replicates asynchronously, so a replica read can miss the last writes (typically under a
millisecond on loopback). The password is the URL's or, when it gives none, the environment
variable ``REDISCLI_AUTH``. Loading the slot map and the nodes' pids at start is bounded by
``hotshard.cluster.resp.DEFAULT_TIMEOUT`` (5 s) in all, whatever the nodes do.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from hotshard.errors import IdempotencyConflict, InputError
from hotshard.service.store import (
    IDEMPOTENCY_TTL_MS,
    NODE_BITS,
    SEQUENCE_BITS,
    check_idempotency_key,
    check_message,
    message_digest,
)
from hotshard.service.supervisor import ShardError, ShardUnavailable, WorkerInfo

__all__ = ["RedisBackend", "stream_key"]

_LOW = (1 << SEQUENCE_BITS) - 1


# a keyed append: the first outcome of an idempotency key, or the message stored with it
_APPEND_ONCE = """
local seen = redis.call('GET', KEYS[2])
if seen then return seen end
redis.call('XADD', KEYS[1], ARGV[7], 'user', ARGV[2], 'body', ARGV[3], 'ts', ARGV[4])
local outcome = ARGV[5] .. ':' .. ARGV[1]
redis.call('SET', KEYS[2], outcome, 'EX', ARGV[6])
return outcome
"""


def stream_key(partition_key: str) -> str:
    return f"chat:{{{partition_key}}}"


def _to_stream_id(message_id: int) -> str:
    return f"{message_id >> SEQUENCE_BITS}-{message_id & _LOW}"


def _from_stream_id(raw: bytes) -> int:
    ms, _, seq = raw.decode().partition("-")
    return (int(ms) << SEQUENCE_BITS) | int(seq)


class _NodeClient:
    """What ChatService calls on a shard (the ShardClient interface), on one master node."""

    def __init__(self, backend: RedisBackend, node: int, *,
                 replica_reads: bool = False) -> None:
        self.backend = backend
        self.node = node
        self.in_flight = 0
        self._last_id = 0
        self.replica_reads = replica_reads

    def _next_id(self, now_ms: int) -> int:
        nxt = max(now_ms << SEQUENCE_BITS, self._last_id + 1)
        nxt += (self.node - nxt) % (1 << NODE_BITS)
        self._last_id = nxt
        return nxt

    async def _command(self, key: str, *args: str) -> Any:
        from hotshard.cluster.resp import RespError, encode_command

        try:
            error, reply = await self.backend.client.call(key, encode_command(args),
                                                          replica=self.replica_reads)
        except RespError as e:   # it may have been sent: what it did is not known
            raise ShardUnavailable(f"node {self.node} is unreachable ({e.kind})",
                                   outcome_unknown=True) from None
        if error is not None:
            if error.startswith(("CLUSTERDOWN", "TRYAGAIN", "LOADING")):
                raise ShardUnavailable(f"node {self.node}: {error}")
            raise ShardError(f"node {self.node}: {error}")
        return reply

    async def _append(self, key: str, user: str, body: str, ts: int) -> int:
        message_id = self._next_id(ts)
        stream = stream_key(key)
        await self._command(stream, "XADD", stream, _to_stream_id(message_id), "user", user,
                            "body", body, "ts", str(ts))
        return message_id

    async def _append_once(self, key: str, user: str, body: str, ts: int,
                           idempotency_key: str) -> int:
        """``_append`` stored once per idempotency key: the message and the key (its digest
        and id, kept ``IDEMPOTENCY_TTL_MS``) in one script, in the stream's slot."""
        idem = check_idempotency_key(idempotency_key)
        digest = message_digest(key, user, body)
        message_id = self._next_id(ts)
        stream = stream_key(key)
        seen = await self._command(stream, "EVAL", _APPEND_ONCE, "2", stream,
                                   f"{stream}:idem:{idem}", str(message_id), user, body,
                                   str(ts), digest, str(IDEMPOTENCY_TTL_MS // 1000),
                                   _to_stream_id(message_id))
        text = seen.decode() if isinstance(seen, bytes) else str(seen)
        had_digest, _, had_id = text.partition(":")
        if had_digest != digest:
            raise IdempotencyConflict("this Idempotency-Key was used for another message: a "
                                      "retry must repeat its channel, user and body; a new "
                                      "message needs a new key")
        return int(had_id)

    async def call(self, op: str, args: dict[str, Any], *, timeout: float = 60.0
                   ) -> tuple[Any, float]:
        self.in_flight += 1
        try:
            if op == "append":
                check_message(args["user"], args["body"])
                now = args.get("now_ms") or int(time.time() * 1000)
                if args.get("idempotency_key") is not None:
                    result: Any = await self._append_once(
                        args["channel"], args["user"], args["body"], now,
                        args["idempotency_key"])
                else:
                    result = await self._append(args["channel"], args["user"], args["body"],
                                                now)
            elif op == "append_many":
                rows = args.get("rows") or []
                for i, (_, user, body, _) in enumerate(rows):
                    try:
                        check_message(user, body)
                    except InputError as e:
                        raise InputError(f"rows[{i}]: {e}") from None
                ids = await asyncio.gather(*(self._append(c, u, b, int(t))
                                             for c, u, b, t in rows))
                result = {"count": len(ids), "last_id": ids[-1] if ids else None}
            elif op == "history":
                stream = stream_key(args["channel"])
                before = args.get("before")
                top = f"({_to_stream_id(before)}" if before else "+"
                entries = await self._command(stream, "XREVRANGE", stream, top, "-", "COUNT",
                                              str(args.get("limit", 50)))
                result = []
                for raw_id, fields in entries or []:
                    values = {fields[i].decode(): fields[i + 1].decode()
                              for i in range(0, len(fields) - 1, 2)}
                    result.append([_from_stream_id(raw_id), values.get("user", ""),
                                   values.get("body", ""), int(values.get("ts", 0))])
            else:
                raise ShardError(f"unknown op {op!r}")
        finally:
            self.in_flight -= 1
        return result, 0.0  # the node's own time is not known apart from the round trip


class RedisBackend:
    """The Supervisor's interface over a Redis Cluster's masters."""

    def __init__(self, url: str) -> None:
        from hotshard.cluster.resp import parse_url

        self.address = parse_url(url)  # with the password of the URL or of REDISCLI_AUTH
        self.url = self.address.redacted()
        self.host, self.port = self.address.host, self.address.port
        self.client: Any = None
        self.nodes: list[str] = []
        self.pids: list[int | None] = []
        self._clients: list[_NodeClient] = []
        self.replicas = 1

    async def start(self) -> None:
        from hotshard.cluster.client import RespCluster
        from hotshard.cluster.resp import DEFAULT_TIMEOUT, aask_all, node_key, parse_info

        self.client = RespCluster.of(self.address)
        await self.client.load(timeout=DEFAULT_TIMEOUT)
        if not self.nodes:
            self.nodes = sorted(set(self.client.slot_node), key=node_key)

        async def pid(address: str) -> int | None:
            try:
                [info] = await aask_all(self.address.at(address), [("INFO", "server")],
                                        timeout=DEFAULT_TIMEOUT)
                return int(parse_info(info)["process_id"])
            except (InputError, KeyError, ValueError):
                return None

        self.pids = list(await asyncio.gather(*(pid(a) for a in self.nodes)))
        self._clients = [_NodeClient(self, i) for i in range(len(self.nodes))]
        self._readers = [_NodeClient(self, i, replica_reads=True)
                         for i in range(len(self.nodes))]

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.aclose()

    def available_replicas(self) -> int:
        """Replica nodes of the master with the fewest (what replica reads can use)."""
        counts = [len(self.client.replicas.get(n, ())) for n in self.nodes]
        return min(counts) if counts else 0

    async def set_replicas(self, replicas: int) -> None:
        """Reads of hot channels from ``replicas`` nodes per shard, the master and
        ``replicas - 1`` of its own replica nodes (READONLY): the cluster must have been
        started with them (`cluster up --replicas R`, which counts a shard's nodes the same
        way)."""
        have = self.available_replicas()
        if replicas - 1 > have:
            raise InputError(f"reading each shard from {replicas} nodes needs {replicas - 1} "
                             f"replica node(s) per master; this cluster has {have}: start it "
                             f"with `hotshard cluster up --replicas {replicas}`")
        self.replicas = replicas

    def primary(self, shard: int) -> _NodeClient:
        return self._clients[shard]

    def reader(self, shard: int, *, use_replicas: bool) -> _NodeClient:
        if use_replicas and self.replicas > 1:
            return self._readers[shard]
        return self._clients[shard]

    def workers(self) -> list[WorkerInfo]:
        return [WorkerInfo(i, 0, pid, True, 0, c.in_flight)
                for i, (pid, c) in enumerate(zip(self.pids, self._clients, strict=True))]
