"""Run the service: check the load file, the port and the data directory, start the workers,
load, serve HTTP.

Everything that can be wrong with a user's request (a file that cannot be loaded, a port in
use, a data directory laid out for another shard count, or one that already holds messages
when a load was not asked to append) is found before a worker starts, and raised as one
``HotshardError``; the listening socket is bound here, so ``port=0`` picks a free port and the
caller learns which.

A start that fails before it serves leaves the data directory as it found it: a directory it
created is removed; in one that existed, the files it added (databases, logs, the layout
record, the lock) are removed, and a load is all-or-nothing (``hotshard.service.bulk_load``). A stop
(Ctrl-C, SIGTERM) during the load is such a failure, told apart: ``serve`` raises
``LoadInterrupted``, whose message says how far the load got, that nothing of it was kept and
how many messages the directory holds. What it creates is its owner's alone: the directory
0700, databases and files 0600 (chat history is user content).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from hotshard._atomic import why_not_a_directory
from hotshard._format import safe_text
from hotshard.errors import HotshardError, InputError
from hotshard.mitigations import Mitigations
from hotshard.service.admin import check_admin_token
from hotshard.service.chat import (
    DEFAULT_HOT_WINDOW_S,
    DEFAULT_SHARD_TIMEOUT_S,
    check_hot_window,
)
from hotshard.service.mitigations import for_service
from hotshard.service.router import DEFAULT_PARTITIONER, Router

__all__ = ["LAYOUT_FILE_OPTIONS", "LAYOUT_RECORD", "Listening", "LoadInterrupted", "ServeConfig",
           "open_data_dir", "placement", "running_service", "serve", "stored_messages"]

LAYOUT_RECORD = "hotshard-serve.json"
LOCK_FILE = ".hotshard-serve.lock"
# The files a start may add to a data directory (removed again if that start fails).
_OURS = re.compile(r"^(shard-\d{3}\.(sqlite3(-wal|-shm|-journal)?|log)|splits\.json(\..*)?|"
                   + re.escape(LAYOUT_RECORD) + "|" + re.escape(LOCK_FILE) + ")$")


# Layout options naming a file that says how many shards there are.
LAYOUT_FILE_OPTIONS = ("ring_file", "slots_map", "map_file", "chunks_file")


def placement(partitioner: str, shards: int | None, *, shards_given: bool = True,
              store: str | None = None, key_type: str | None = None,
              num_tokens: int | None = None, ring_seed: int | None = None,
              **files: str | None) -> tuple[str, int | None, dict[str, Any]]:
    """(partitioner, shard count, layout) of a service, as ``ServeConfig`` takes them.

    A Redis Cluster ``store`` places channels by its live slot map: partitioner
    ``redis-cluster``, the count from the cluster. A layout file (``LAYOUT_FILE_OPTIONS``) gives the
    count itself, so a default ``shards`` (``shards_given`` False) is dropped rather than
    checked against it; a count the user gave is checked against the file when the router is
    built. Cassandra's token options apply to cassandra only.
    """
    unknown = sorted(set(files) - {*LAYOUT_FILE_OPTIONS, "routing_shards"})
    if unknown:
        raise TypeError(f"not layout options: {', '.join(unknown)}")
    if store is not None:
        return "redis-cluster", None, ({"key_type": key_type} if key_type else {})
    layout: dict[str, Any] = {k: v for k, v in files.items() if v is not None}
    if partitioner == "cassandra":
        layout.update({k: v for k, v in (("num_tokens", num_tokens), ("ring_seed", ring_seed))
                       if v is not None})
    if any(k in layout for k in LAYOUT_FILE_OPTIONS) and not shards_given:
        shards = None
    if key_type:
        layout["key_type"] = key_type
    return partitioner, shards, layout


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
    append: bool = False  # load into a data directory that already holds messages
    skip_bad_rows: bool = False  # load a file's rows that have a channel, count the others
    admin_token: str | None = None  # None: a new random one (see Listening.admin_token)
    shard_timeout_s: float = DEFAULT_SHARD_TIMEOUT_S  # past it a channel request gets 504
    hot_window_s: float = DEFAULT_HOT_WINDOW_S  # the hot-key sketch's window

    def __post_init__(self) -> None:
        """Every rule of a start, before any worker starts (the CLI adds none of its own)."""
        for_service(self.mitigations)
        check_hot_window(self.hot_window_s)
        if self.store is not None and not str(self.store).startswith(
                ("redis-cluster://", "redis://")):
            raise InputError(f"the store must be a Redis Cluster, redis-cluster://HOST:PORT "
                             f"(${{store}}), got {safe_text(str(self.store), 80)}")
        if self.append and not self.load:
            raise InputError("${append} adds the rows of a ${load} file: give "
                             "${load} FILE too")
        if self.skip_bad_rows and not self.load:
            raise InputError("${skip_bad_rows} applies to a ${load} file: give "
                             "${load} FILE too")
        if self.admin_token is not None:
            check_admin_token(self.admin_token)


@dataclass(frozen=True)
class Listening:
    """What ``serve`` tells its caller once it accepts requests.

    Attributes
    ----------
    url : the service's URL (``http://HOST:PORT``; the port chosen when ``port`` was 0).
    admin_token : send as ``Authorization: Bearer TOKEN`` to the admin routes.
    generated : the token was generated at this start (so only this caller knows it).
    loopback : listening on loopback only; else the chat API and metrics are open to the
        network.
    """

    url: str
    admin_token: str
    generated: bool
    loopback: bool


class LoadInterrupted(KeyboardInterrupt):
    """A stop (Ctrl-C, or SIGTERM turned into an exception by the caller) arrived before the
    load finished; the load was undone as any failed load is. Its message says how far the
    load got and what the data directory holds now; ``interruption`` is the exception that
    stopped it (re-raise it to exit as that stop would)."""

    def __init__(self, message: str, interruption: BaseException) -> None:
        super().__init__(message)
        self.interruption = interruption

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass
class DataDir:
    """An opened data directory: its router, the lock that keeps it ours, and what was there
    before (to undo a start that fails)."""

    path: Path
    router: Router
    lock: IO[str]
    created: bool = False
    before: frozenset[str] = frozenset()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.lock.close()

    def discard(self) -> None:
        """Undo what this start made (called after the workers have stopped)."""
        _discard(self.path, self.created, self.before)


def _discard(path: Path, created: bool, before: frozenset[str]) -> None:
    """Remove the directory if this start created it, else the files it added."""
    if created:
        shutil.rmtree(path, ignore_errors=True)
        return
    with contextlib.suppress(OSError):
        for name in sorted(set(os.listdir(path)) - before):
            if _OURS.match(name):
                with contextlib.suppress(OSError):
                    (path / name).unlink()


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, created 0600 (only the owner reads the data directory)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def open_data_dir(config: ServeConfig) -> DataDir:
    """Create or reopen ``data_dir``, refusing one laid out for other shards or partitioner
    (its messages would be looked for on the wrong shards) or used by a running service."""
    path = Path(config.data_dir)
    if path.exists() and not path.is_dir():
        raise InputError(f"data directory {path} is a file: give a directory")
    if not path.parent.is_dir():  # missing, or a file in the way (named as such)
        raise InputError(f"cannot create data directory {path}: "
                         f"{why_not_a_directory(path.parent)}")
    created = False
    try:
        try:
            path.mkdir(mode=0o700)
            created = True
        except FileExistsError:
            pass
        before = frozenset(os.listdir(path))
        fd = os.open(path / LOCK_FILE, os.O_WRONLY | os.O_CREAT, 0o600)
        lock = os.fdopen(fd, "w")  # held for the service's life
    except OSError as e:
        if created:
            shutil.rmtree(path, ignore_errors=True)
        raise InputError(f"cannot write in data directory {path}: {e.strerror}") from e
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise InputError(f"another hotshard serve is using {path}: stop it or give another "
                         "${data_dir} directory") from None
    try:
        if config.store:
            if config.partitioner != "redis-cluster":
                raise InputError("a Redis Cluster store places channels by its own slot map: "
                                 "give no other ${partitioner} with ${store}")
            from hotshard.cluster.topology import live_slot_map

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
                                 f"{had['partitioner']}: serve it with ${{shards}} "
                                 f"{had['shards']} ${{partitioner}} {had['partitioner']}, or give "
                                 "a new ${data_dir} directory")
        else:
            _write_private(record, json.dumps(wanted) + "\n")
        if not config.store:   # each database records the layout too, and is checked on it
            from hotshard.service.layout import check_and_record_layout

            check_and_record_layout(path, router.name, router.shards)
    except BaseException:
        _discard(path, created, before)
        lock.close()
        raise
    return DataDir(path, router, lock, created, before)


def stored_messages(data_dir: str | Path, shards: int) -> int:
    """How many messages the shard databases in ``data_dir`` hold (0 when there are none).

    Raises
    ------
    InputError
        A shard's database cannot be read.
    """
    from hotshard.service.supervisor import db_path

    total = 0
    for shard in range(shards):
        path = db_path(Path(data_dir), shard)
        if not path.is_file():
            continue
        try:
            # read-write, though it only reads: a read-only connection cannot open a WAL
            # database whose -shm file a killed service left behind
            db = sqlite3.connect(path)
            try:
                total += db.execute("SELECT count(*) FROM messages").fetchone()[0]
            finally:
                db.close()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                continue  # created, never written
            raise InputError(f"cannot read {path}: {e}") from None
        except sqlite3.DatabaseError as e:
            raise InputError(f"cannot read {path}: {e}") from None
    return total


def _refuse_loading_over(data: DataDir, config: ServeConfig) -> int:
    """The messages the directory holds before a load (0 on a Redis Cluster store, which is
    not counted: it may hold anything); refused when there are some and the load was not
    asked to append, since a second load of the same file would duplicate every message."""
    if config.store:
        return 0
    held = stored_messages(data.path, data.router.shards)
    if held and not config.append:
        raise InputError(f"{data.path} already holds {held:,} messages: loading {config.load} "
                         "would add its rows to them (give ${append} to do that, or a new "
                         "${data_dir} directory)")
    return held


@dataclass
class _LoadProgress:
    """How far a start's load got: rows sent to the shards, of ``total``; ``done``: committed."""

    total: int
    held_before: int = 0
    sent: int = 0
    done: bool = False


def _interrupted_load(config: ServeConfig, data: DataDir, load: _LoadProgress) -> str:
    """What an interrupted load left (called once the workers have stopped and the start's
    files were discarded)."""
    head = (f"loading {config.load} was interrupted after {load.sent:,} of {load.total:,} "
            "rows")
    if config.store:
        return (f"{head}: the Redis Cluster keeps the rows written so far (it has no "
                "transaction)")
    if data.created:
        return f"{head}: nothing of it was kept ({data.path}, made by this start, was removed)"
    try:
        held = stored_messages(data.path, data.router.shards)
    except InputError:
        return f"{head}: its transaction was rolled back; {data.path} could not be counted"
    if held == load.held_before:
        return f"{head}: nothing of it was kept; {data.path} holds {held:,} messages, as before"
    return (f"{head}: {held - load.held_before:,} of its rows were kept (shards that had "
            f"committed when it stopped); {data.path} holds {held:,} messages")


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
            raise InputError(f"port {port} on {host} is in use: pick another ${{port}} "
                             "(0 picks a free one)") from None
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def running_service(config: ServeConfig, data: DataDir, *,
                          on_progress: Callable[[int, int], None] | None = None,
                          on_loaded: Callable[[Any], None] | None = None,
                          load_rows: int | None = None,
                          skipped_rows: int = 0) -> AsyncIterator[Any]:
    """The ``ChatService`` with its workers started (and the load done); stops them after.

    ``load_rows`` is the load file's row count when already known (``check_loadable``)."""
    from hotshard.detect.policy import SLICES
    from hotshard.detect.sketch import SlidingHotKeys
    from hotshard.service.chat import ChatService
    from hotshard.service.split import SplitRegistry
    from hotshard.service.supervisor import Supervisor

    if config.store:
        from hotshard.service.redis_store import RedisBackend

        supervisor: Any = RedisBackend(config.store)
    else:
        supervisor = Supervisor(data.path, data.router.shards,
                                replicas=config.mitigations.replicas,
                                cost_ms=config.cost_ms, max_body_bytes=config.max_body_bytes)
    try:
        await supervisor.start()
        if config.store and config.mitigations.replicas > 1:
            await supervisor.set_replicas(config.mitigations.replicas)
        chat = ChatService(supervisor, data.router, SplitRegistry(data.path, data.router),
                           mitigations=config.mitigations,
                           hotkeys=SlidingHotKeys(window_s=config.hot_window_s, slices=SLICES),
                           max_body_bytes=config.max_body_bytes,
                           shard_timeout_s=config.shard_timeout_s)
        if config.load:
            from hotshard.service.bulk_load import load_messages

            result = await load_messages(chat, config.load, progress=on_progress,
                                         total=load_rows)
            result = dataclasses.replace(result, skipped_rows=skipped_rows)
            if on_loaded is not None:
                on_loaded(result)
        yield chat
    finally:
        await supervisor.stop()


def serve(config: ServeConfig, *, on_listening: Callable[[Listening], None] | None = None,
          on_progress: Callable[[int, int], None] | None = None,
          on_loaded: Callable[[Any], None] | None = None) -> None:
    """Run until interrupted (SIGINT/SIGTERM stop it gracefully).

    ``on_listening`` receives the URL and the admin token (``Listening``) once requests are
    accepted; a library caller that did not set ``config.admin_token`` learns it there.

    Raises
    ------
    HotshardError
        The start failed (nothing it made is left).
    LoadInterrupted
        A stop arrived during ``config.load``: the load was undone; the message says so.
    """
    import uvicorn

    from hotshard.service.admin import (
        AdminGuard,
        check_admin_token,
        is_loopback,
        new_admin_token,
    )
    from hotshard.service.gateway import create_app
    from hotshard.service.httpguard import GuardedH11Protocol

    generated = config.admin_token is None
    token = new_admin_token() if generated else check_admin_token(config.admin_token)
    if config.append and not config.load:
        raise InputError("append applies to a load: give the file to load too")
    rows = None
    skipped = 0
    if config.skip_bad_rows and not config.load:
        raise InputError("skip_bad_rows applies to a load: give the file to load too")
    if config.load:
        from hotshard.service.bulk_load import check_loadable

        # a wrong file fails before anything starts
        rows = check_loadable(config.load, skip_bad_rows=config.skip_bad_rows)
        if config.skip_bad_rows:
            from hotshard.service.bulk_load import null_channels

            skipped = null_channels(config.load)
    sock = bind(config.host, config.port)  # a port in use fails before the data dir is made
    try:
        data = open_data_dir(config)
    except BaseException:
        sock.close()
        raise
    serving = False
    load = _LoadProgress(rows or 0)

    def progress(done: int, total: int) -> None:
        load.sent, load.total = done, total
        if on_progress is not None:
            on_progress(done, total)

    def loaded(result: Any) -> None:
        load.done = True  # committed: from here on the data is kept on any exit
        if on_loaded is not None:
            on_loaded(result)

    try:
        if config.load:
            load.held_before = _refuse_loading_over(data, config)
        host, port = sock.getsockname()[:2]
        guard = AdminGuard.for_bind(token, config.host, port)

        async def main() -> None:
            nonlocal serving
            async with running_service(config, data, on_progress=progress,
                                       on_loaded=loaded, load_rows=rows,
                                       skipped_rows=skipped) as chat:
                app = create_app(chat, max_body_bytes=config.max_body_bytes, admin=guard)
                server = uvicorn.Server(uvicorn.Config(
                    app, log_level="warning", access_log=False, lifespan="on",
                    timeout_graceful_shutdown=5, http=GuardedH11Protocol))
                serving = True  # from here on the data is the service's: kept on any exit
                if on_listening is not None:
                    shown = f"[{host}]" if ":" in host else host
                    on_listening(Listening(f"http://{shown}:{port}", token, generated,
                                           is_loopback(host)))
                await server.serve(sockets=[sock])
                if not server.started:
                    raise HotshardError("the HTTP server did not start (see the log above)")

        asyncio.run(main())
    except BaseException as e:
        if not serving and not load.done:
            data.discard()
            if config.load and not isinstance(e, Exception | SystemExit | GeneratorExit):
                raise LoadInterrupted(_interrupted_load(config, data, load), e) from e
        raise
    finally:
        sock.close()
        data.close()
