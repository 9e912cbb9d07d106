"""Sending native Redis commands to a Redis Cluster (``redis-cluster://HOST:PORT``).

By default a channel's history is the stream ``chat:{<channel>}``: the channel inside a hash
tag, so its slot is the channel's own slot, exactly what ``hotshard shard`` computes for it.
Reads are ``XREVRANGE chat:{<channel>} + - COUNT 50``, writes ``XADD`` (capped with
``MAXLEN ~ 1000`` so a long run does not fill memory). ``--read`` / ``--write`` templates run
any command on any key name: words separated by spaces, ``{key}`` replaced by the key and
``{body}`` by a payload of the profile's size. The client (``cluster.resp``) follows
MOVED/ASK redirections itself (a resharding is not an error) and knows which node serves a
key from its slot map: that is the per-node breakdown. A failure is never a status code: it
is a ``TransportError`` named after Redis's own error code (``redis CLUSTERDOWN``) or the
missing answer (``connection refused``, ``timeout``), counted in the row of the node the
command was sent to. The URL may carry the cluster's password
(``redis-cluster://:PASSWORD@HOST:PORT``, as ``hotshard cluster up`` prints it); when it
gives none, the password is taken from the environment variable ``REDISCLI_AUTH``, which
keeps it off the command line. Loading the slot map (connecting, CLUSTER INFO, CLUSTER
SLOTS) is bounded by ``timeout`` in all, on the event loop: no thread is left to hang the
interpreter's exit.
"""

from __future__ import annotations

from typing import Any

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
        from hotshard.cluster.resp import parse_url

        self.address = parse_url(url)  # the password from the URL, or from REDISCLI_AUTH
        self.url = self.address.redacted()  # what messages and results show: no password
        self.host, self.port = self.address.host, self.address.port
        self.read = _command(read or DEFAULT_READ, "read")
        self.write = _command(write or DEFAULT_WRITE, "write")
        self.timeout = timeout
        self._client: Any = None

    async def _connect(self) -> Any:
        if self._client is None:
            from hotshard.cluster.client import RespCluster

            client = RespCluster.of(self.address, timeout=self.timeout)
            await client.load()  # on the loop, bounded by timeout in all
            self._client = client
        return self._client

    async def check(self) -> None:
        """Load the slot map, or InputError saying why the cluster is unusable: unreachable,
        silent, too slow or not a Redis server within ``timeout`` (in all), a missing or
        wrong password, not a cluster, not cluster_state:ok."""
        await self._connect()

    def warm(self, keys: list[str]) -> None:
        """Compute a few slots now: the first call compiles the CRC16 kernel."""
        if self._client is not None:
            for key in keys:
                self._client.slot(self.build(True, key, 1, 0)[0])

    def build(self, is_read: bool, key: str, body_size: int, n: int) -> tuple[str, bytes]:
        from hotshard.cluster.resp import encode_command

        words = self.read if is_read else self.write
        body = "m" * max(1, body_size)
        args = [w.replace("{key}", key).replace("{body}", body) for w in words]
        store_key = next(a for a, w in zip(args, words, strict=True) if "{key}" in w)
        return store_key, encode_command(args)

    async def send(self, command: tuple[str, bytes]) -> tuple[int, str, float]:
        """(200, node that answered, loop time the command was written) of one command.

        Raises
        ------
        TransportError
            Any failure, its ``shard`` the node the command was sent to: an error reply as
            ``redis`` and Redis's error code (``redis CLUSTERDOWN``, ``redis LOADING``,
            ``redis ERR``, ``redis too many redirections (MOVED storm)``), or no answer
            (``connection refused``, ``connection error``, ``connect timeout``, ``timeout``).
        """
        import asyncio

        from hotshard.cluster.resp import RespError, error_kind
        from hotshard.drive.transport import TransportError

        client = await self._connect()
        key, data = command
        node = client.node_of(key)
        written = asyncio.get_running_loop().time()
        try:
            node, error, _ = await client.send(key, data)
        except RespError as e:
            raise TransportError(e.kind, shard=e.node or node) from None
        if error is not None:
            raise TransportError(error_kind(error), shard=node)
        return 200, node, written

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def node_stats(url: str, *, timeout: float = 2.0) -> dict | None:
    """Per-node CPU seconds and commands, in the shape of the reference service's /stats;
    the masters that serve slots, numbered as ``predict --slots-from`` numbers them (an
    unreachable one keeps its number, without figures). None when no node answers."""
    from hotshard.cluster.local import status

    try:
        masters = status(url, timeout=timeout).masters
    except Exception:
        return None
    return {"shards": [{"id": i, "node": n.address, "cpu_seconds": n.cpu_seconds,
                        "commands": n.commands, "replicas": []}
                       for i, n in enumerate(masters)]}
