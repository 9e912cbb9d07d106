"""Run the service: check the data directory and port, start the workers, load, serve HTTP.

Everything that can be wrong with a user's request (a data directory laid out for another shard
count, a port in use, a file that cannot be loaded) is found before a worker starts, and raised
as one ``HotshardError``; the listening socket is bound here, so ``port=0`` picks a free port
and the caller learns which.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from hotshard.errors import HotshardError, InputError
from hotshard.service.mitigations import Mitigations
from hotshard.service.router import DEFAULT_PARTITIONER, Router

__all__ = ["LAYOUT_RECORD", "ServeConfig", "open_data_dir", "running_service", "serve"]

LAYOUT_RECORD = "hotshard-serve.json"
LOCK_FILE = ".hotshard-serve.lock"


@dataclass(frozen=True)
class ServeConfig:
    """What ``hotshard serve`` runs."""

    data_dir: Path
    shards: int | None = 4
    partitioner: str = DEFAULT_PARTITIONER
    layout: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 8080
    cost_ms: float = 0.0
    max_body_bytes: int = 4096
    mitigations: Mitigations = field(default_factory=Mitigations)
    load: str | None = None
    store: str | None = None  # None: SQLite shard processes; redis-cluster://HOST:PORT


@dataclass
class DataDir:
    """An opened data directory: its router, and the lock that keeps it ours."""

    path: Path
    router: Router
    lock: IO[str]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.lock.close()


def open_data_dir(config: ServeConfig) -> DataDir:
    """Create or reopen ``data_dir``, refusing one laid out for other shards or partitioner
    (its messages would be looked for on the wrong shards) or used by a running service."""
    path = Path(config.data_dir)
    if path.exists() and not path.is_dir():
        raise InputError(f"data directory {path} is a file: give a directory")
    if not path.parent.is_dir():
        raise InputError(f"data directory's parent {path.parent} does not exist")
    try:
        path.mkdir(exist_ok=True)
        lock = open(path / LOCK_FILE, "w")  # noqa: SIM115 (held for the service's life)
    except OSError as e:
        raise InputError(f"cannot write in data directory {path}: {e.strerror}") from e
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise InputError(f"another hotshard serve is using {path}: stop it or give another "
                         "--data directory") from None
    try:
        if config.store:
            if config.partitioner != "redis-cluster":
                raise InputError("a Redis Cluster store places channels by its own slot map: "
                                 "give no other --partitioner with --store")
            from hotshard.cluster.local import live_slot_map

            slot_node, _ = live_slot_map(config.store)
            router = Router("redis-cluster", None, slot_node=slot_node)
        else:
            router = Router(config.partitioner, config.shards, **config.layout)
        for warm in ("0", "warm-up"):  # compile the hash kernels now, not on a first request
            router.shard_of(warm)
        record = path / LAYOUT_RECORD
        wanted = {"format": "hotshard.serve/1", "partitioner": router.name,
                  "shards": router.shards}
        if record.exists():
            try:
                saved = json.loads(record.read_text())
                had = {k: saved[k] for k in ("partitioner", "shards")}
            except (OSError, ValueError, KeyError, TypeError):
                raise InputError(f"{record} is damaged: restore it or use a new data "
                                 "directory") from None
            if had != {k: wanted[k] for k in had}:
                raise InputError(f"{path} holds {had['shards']} shards placed by "
                                 f"{had['partitioner']}: serve it with --shards "
                                 f"{had['shards']} --partitioner {had['partitioner']}, or give "
                                 "a new --data directory")
        else:
            record.write_text(json.dumps(wanted) + "\n")
    except BaseException:
        lock.close()
        raise
    return DataDir(path, router, lock)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise InputError(f"cannot resolve host {host!r}: {e.strerror}") from None
    family, kind, proto, _, address = infos[0]
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are
    # TCP, and without it a response written in two parts waits ~40 ms for a delayed ACK
    sock = socket.socket(family, kind, proto or socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise InputError(f"port {port} on {host} is in use: pick another --port "
                             "(0 picks a free one)") from None
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def running_service(config: ServeConfig, data: DataDir, *,
                          on_progress: Callable[[int, int], None] | None = None,
                          on_loaded: Callable[[Any], None] | None = None,
                          load_rows: int | None = None) -> AsyncIterator[Any]:
    """The ``ChatService`` with its workers started (and the load done); stops them after.

    ``load_rows`` is the load file's row count when already known (``check_loadable``)."""
    from hotshard.service.chat import ChatService
    from hotshard.service.split import SplitRegistry
    from hotshard.service.supervisor import Supervisor

    if config.store:
        from hotshard.service.redis_store import RedisBackend

        supervisor: Any = RedisBackend(config.store)
    else:
        supervisor = Supervisor(data.path, data.router.shards,
                                replicas=config.mitigations.replicas, cost_ms=config.cost_ms,
                                max_body_bytes=config.max_body_bytes)
    try:
        await supervisor.start()
        if config.store and config.mitigations.replicas:
            await supervisor.set_replicas(config.mitigations.replicas)
        chat = ChatService(supervisor, data.router, SplitRegistry(data.path, data.router),
                           mitigations=config.mitigations,
                           max_body_bytes=config.max_body_bytes)
        if config.load:
            from hotshard.service.load import load_messages

            result = await load_messages(chat, config.load, progress=on_progress,
                                         total=load_rows)
            if on_loaded is not None:
                on_loaded(result)
        yield chat
    finally:
        await supervisor.stop()


def serve(config: ServeConfig, *, on_listening: Callable[[str], None] | None = None,
          on_progress: Callable[[int, int], None] | None = None,
          on_loaded: Callable[[Any], None] | None = None) -> None:
    """Run until interrupted (SIGINT/SIGTERM stop it gracefully)."""
    import uvicorn

    from hotshard.service.gateway import create_app

    rows = None
    if config.load:
        from hotshard.service.load import check_loadable

        rows = check_loadable(config.load)  # a wrong file fails before anything starts
    data = open_data_dir(config)
    sock = bind(config.host, config.port)
    try:
        async def main() -> None:
            async with running_service(config, data, on_progress=on_progress,
                                       on_loaded=on_loaded, load_rows=rows) as chat:
                app = create_app(chat, max_body_bytes=config.max_body_bytes)
                server = uvicorn.Server(uvicorn.Config(
                    app, log_level="warning", access_log=False, lifespan="on",
                    timeout_graceful_shutdown=5))
                host, port = sock.getsockname()[:2]
                if on_listening is not None:
                    shown = f"[{host}]" if ":" in host else host
                    on_listening(f"http://{shown}:{port}")
                await server.serve(sockets=[sock])
                if not server.started:
                    raise HotshardError("the HTTP server did not start (see the log above)")

        asyncio.run(main())
    finally:
        sock.close()
        data.close()
