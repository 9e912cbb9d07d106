"""Sending native Redis commands to a Redis Cluster (``redis-cluster://HOST:PORT``).

By default a channel's history is the stream ``chat:{<channel>}``: the channel inside a hash
tag, so its slot is the channel's own slot, exactly what ``hotshard shard`` computes for it.
Reads are ``XREVRANGE chat:{<channel>} + - COUNT 50``, writes ``XADD`` (capped with
``MAXLEN ~ 1000`` so a long run does not fill memory). ``--read`` / ``--write`` templates run
any command on any key name: words separated by spaces, ``{key}`` replaced by the key and
``{body}`` by a payload of the profile's size. redis-py's asyncio cluster client follows
MOVED/ASK redirections itself (a resharding is not an error) and tells which node serves a key
from its slot map: that is the per-node breakdown.
"""

from __future__ import annotations

from typing import Any

from hotshard.drive.transport import TransportError
from hotshard.errors import InputError

__all__ = ["DEFAULT_READ", "DEFAULT_WRITE", "RedisClusterTarget", "node_stats"]

DEFAULT_READ = "XREVRANGE chat:{{key}} + - COUNT 50"
DEFAULT_WRITE = "XADD chat:{{key}} MAXLEN ~ 1000 * user u body {body}"


def _command(template: str, what: str) -> list[str]:
    words = str(template).split()
    if len(words) < 2 or not any("{key}" in w for w in words):
        raise InputError(f"{what} template must be a Redis command with {{key}} in its key, "
                         f"e.g. {DEFAULT_READ!r}; got {template!r}")
    return words


class RedisClusterTarget:
    """Commands to one cluster, through a cluster-aware asyncio client."""

    def __init__(self, url: str, *, read: str | None = None, write: str | None = None,
                 timeout: float = 30.0) -> None:
        from hotshard.cluster.local import _parse_address

        self.url = url
        self.host, self.port = _parse_address(url)
        self.read = _command(read or DEFAULT_READ, "read")
        self.write = _command(write or DEFAULT_WRITE, "write")
        self.timeout = timeout
        self._client: Any = None

    async def _connect(self) -> Any:
        if self._client is None:
            from redis.asyncio.cluster import RedisCluster

            self._client = RedisCluster(host=self.host, port=self.port,
                                        socket_timeout=self.timeout, max_connections=512,
                                        socket_connect_timeout=5)
            await self._client.initialize()
        return self._client

    async def check(self) -> None:
        """Connect and load the slot map, or InputError saying why the cluster is unusable."""
        import redis

        try:
            client = await self._connect()
            info = await client.cluster_info(target_nodes=client.get_random_node())
        except (redis.exceptions.RedisError, OSError) as e:
            raise InputError(f"cannot use the Redis Cluster at {self.url}: {e}") from None
        state = info.get("cluster_state") if isinstance(info, dict) else None
        if state not in ("ok", b"ok"):
            raise InputError(f"the cluster at {self.url} is not ok (cluster_state: {state})")

    def build(self, is_read: bool, key: str, body_size: int, n: int) -> tuple[str, ...]:
        words = self.read if is_read else self.write
        body = "m" * max(1, body_size)
        return tuple(w.replace("{key}", key).replace("{body}", body) for w in words)

    def node_of(self, command: tuple[str, ...]) -> str | None:
        """The address of the node the client's slot map sends this command's key to."""
        key = next((w for w, t in zip(command, self.read if command[0] == self.read[0]
                                      else self.write, strict=False) if "{key}" in t), None)
        if key is None or self._client is None:
            return None
        node = self._client.get_node_from_key(key)
        return f"{node.host}:{node.port}" if node is not None else None

    async def send(self, command: tuple[str, ...]) -> tuple[int, str | None]:
        import redis

        client = await self._connect()
        node = self.node_of(command)
        try:
            await client.execute_command(*command)
        except redis.exceptions.TimeoutError:
            raise TransportError("timeout") from None
        except redis.exceptions.ConnectionError:
            raise TransportError("connection error") from None
        except redis.exceptions.ResponseError as e:
            return 500, node if str(e) else node  # a command error: counted as an error
        return 200, node

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def node_stats(url: str) -> dict | None:
    """Per-node CPU seconds and commands, in the shape of the reference service's /stats."""
    from hotshard.cluster.local import status

    try:
        nodes = status(url)
    except Exception:
        return None
    return {"shards": [{"id": i, "node": n.address, "cpu_seconds": n.cpu_seconds,
                        "commands": n.commands, "replicas": []}
                       for i, n in enumerate(nodes)]}
