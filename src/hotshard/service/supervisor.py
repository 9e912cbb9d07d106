"""Start, watch and restart the shard worker processes; talk to them.

Each shard is one primary worker (reads and writes its SQLite file) plus, when the read-replica
mitigation is on, R replica workers that open the same file read-only. A worker that exits
unexpectedly (a crash, ``kill -9``) is restarted after a short back-off; until it is back, calls
to it raise ``ShardUnavailable`` (the gateway's 503 with Retry-After) while every other shard
keeps serving.

The workers' sockets live in a private directory ``<tmp>/hotshard-<gateway pid>-<random>``
(0700). ``stop`` removes it; when the gateway is killed outright (``kill -9``), the workers see
their stdin close, exit and remove it themselves, and a later start sweeps any such directory
whose gateway pid is no longer running (a worker killed at the same moment can leave one).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hotshard.errors import (
    HotshardError,
    IdempotencyConflict,
    InputError,
    ShardError,
    ShardTimeout,
    ShardUnavailable,
)
from hotshard.service.protocol import HEADER, ProtocolError, decode, encode, frame_length
from hotshard.service.worker import RUNTIME_PREFIX

__all__ = ["ShardClient", "ShardError", "ShardTimeout", "ShardUnavailable", "Supervisor",
           "WorkerInfo", "db_path", "sweep_stale_runtime_dirs"]

READY_TIMEOUT_S = 30.0
RESTART_BACKOFF_S = (0.05, 0.2, 0.5, 1.0, 2.0)
CALL_TIMEOUT_S = 60.0


def db_path(data_dir: Path, shard: int) -> Path:
    """Where shard ``shard`` keeps its database."""
    return Path(data_dir) / f"shard-{shard:03d}.sqlite3"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    try:  # a zombie is dead for our purposes: it can hold no socket
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def sweep_stale_runtime_dirs(tmp: str | None = None) -> list[str]:
    """Remove the socket directories of gateways that are gone; the paths removed.

    Only directories named ``hotshard-<pid>-<random>``, owned by this user, whose pid is not a
    running process, are removed: another user's or a live service's are never touched.
    """
    tmp = tmp or tempfile.gettempdir()
    removed = []
    try:
        entries = list(os.scandir(tmp))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not name.startswith(RUNTIME_PREFIX):
            continue
        pid_text = name[len(RUNTIME_PREFIX):].split("-", 1)[0]
        if not pid_text.isdigit() or "-" not in name[len(RUNTIME_PREFIX):]:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or \
                    entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        if not _pid_alive(int(pid_text)):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


class ShardClient:
    """One multiplexed connection to a worker: many calls in flight, replies paired by id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 name: str, shard: int | None = None) -> None:
        self.name = name
        self.shard = shard
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._closed: str | None = None
        self._task = asyncio.create_task(self._read_replies())

    @classmethod
    async def connect(cls, path: str, name: str, shard: int | None = None) -> ShardClient:
        reader, writer = await asyncio.open_unix_connection(path, limit=1 << 24)
        return cls(reader, writer, name, shard)

    @property
    def in_flight(self) -> int:
        """Calls sent and not yet answered: the shard's queue as the gateway sees it."""
        return len(self._pending)

    async def call(self, op: str, args: dict[str, Any], *,
                   timeout: float = CALL_TIMEOUT_S) -> tuple[Any, float]:
        """The result of ``op`` and the seconds the shard spent on it (excluding the hop).

        ``timeout`` bounds the whole call, the wait to send included (a frozen worker stops
        reading its socket: the requests queued to it then wait here, not for ever).

        Raises
        ------
        ShardUnavailable
            The worker is down or its connection broke.
        ShardTimeout
            No answer within ``timeout`` seconds.
        ShardError
            The worker failed the request.
        """
        if self._closed is not None:
            raise ShardUnavailable(f"{self.name} is down ({self._closed})", shard=self.shard)
        request_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(encode({"id": request_id, "op": op, "args": args}))
                if self._writer.transport.get_write_buffer_size() > (1 << 20):
                    await self._writer.drain()
                reply = await future
        except TimeoutError:  # before OSError: TimeoutError is one
            raise ShardTimeout(f"{self.name} did not answer within {timeout:g} s",
                               shard=self.shard) from None
        except ShardUnavailable as e:   # its connection broke with the request handed over
            raise ShardUnavailable(str(e), retry_after=e.retry_after, shard=self.shard,
                                   outcome_unknown=True) from None
        except (ConnectionError, OSError) as e:
            raise ShardUnavailable(f"{self.name} is down ({e})", shard=self.shard,
                                   outcome_unknown=True) from e
        finally:
            self._pending.pop(request_id, None)
        if "err" in reply:
            err = reply["err"]
            if err.get("kind") == "conflict":
                raise IdempotencyConflict(err.get("message", "idempotency key reused"))
            if err.get("kind") == "input":
                raise InputError(err.get("message", "bad request"))
            raise ShardError(f"{self.name}: {err.get('message', 'internal error')}",
                             shard=self.shard)
        return reply.get("ok"), reply.get("us", 0) / 1e6

    async def _read_replies(self) -> None:
        reason = "connection closed"
        try:
            while True:
                header = await self._reader.readexactly(HEADER.size)
                message = decode(await self._reader.readexactly(frame_length(header)))
                future = self._pending.get(message["id"])
                if future is not None and not future.done():
                    future.set_result(message)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            reason = f"connection lost: {type(e).__name__}"
        except ProtocolError as e:
            reason = f"protocol error: {e}"
        finally:
            self._fail_pending(reason)

    def _fail_pending(self, reason: str) -> None:
        self._closed = reason
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ShardUnavailable(f"{self.name} is down ({reason})",
                                                      shard=self.shard))
                # marked as seen: a caller that still awaits it gets the error all the same,
                # but one that was cancelled meanwhile (a load stopped by its first failure)
                # must not leave asyncio to print "exception was never retrieved" with the
                # exception's class after the command's one-line error
                future.exception()

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
        self._fail_pending("closed")


@dataclass
class _Worker:
    shard: int
    replica: int  # 0 = the primary; 1..R = read replicas
    socket: str
    process: asyncio.subprocess.Process | None = None
    client: ShardClient | None = None
    restarts: int = 0
    up_since: float | None = None
    retired: bool = False
    monitor: asyncio.Task | None = None

    @property
    def name(self) -> str:
        return f"shard {self.shard}" + (f" replica {self.replica}" if self.replica else "")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def up(self) -> bool:
        return self.client is not None and self.client._closed is None


@dataclass(frozen=True)
class WorkerInfo:
    """What /stats shows of one worker process."""

    shard: int
    replica: int
    pid: int | None
    up: bool
    restarts: int
    in_flight: int


class Supervisor:
    """The shard worker processes of one service: start them, restart them, route calls.

    Parameters
    ----------
    data_dir : directory holding one SQLite file per shard.
    shards : number of shards (one primary worker each).
    replicas : read nodes per shard, the primary included (1: no replica worker), as
        ``hotshard.mitigations`` counts them.
    cost_ms : CPU milliseconds each read burns in its worker (``--cost-ms``).
    max_body_bytes : largest message body a worker accepts.
    """

    def __init__(self, data_dir: str | Path, shards: int, *, replicas: int = 1,
                 cost_ms: float = 0.0, max_body_bytes: int = 4096) -> None:
        if shards < 1 or shards > 1024:
            raise InputError(f"shards must be in 1..1024 (ids carry the shard in 10 bits), "
                             f"got {shards}")
        if replicas < 1:
            raise InputError(f"replicas must be >= 1 (the primary included), got {replicas}")
        if cost_ms < 0:
            raise InputError(f"cost_ms must be >= 0, got {cost_ms}")
        self.data_dir = Path(data_dir)
        self.shards = shards
        self.cost_ms = cost_ms
        self.max_body_bytes = max_body_bytes
        self._target_replicas = replicas
        sweep_stale_runtime_dirs()
        self._runtime = tempfile.mkdtemp(prefix=f"{RUNTIME_PREFIX}{os.getpid()}-")
        self._workers: dict[tuple[int, int], _Worker] = {}
        self._round_robin = [itertools.count() for _ in range(shards)]
        self._stopping = False

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every primary, then every replica; return when all answer."""
        await asyncio.gather(*(self._add(shard, 0) for shard in range(self.shards)))
        await self.set_replicas(self._target_replicas)

    async def stop(self) -> None:
        """Stop every worker (SIGTERM, then SIGKILL after 5 s) and remove the sockets.

        Runs to the end even when the calling task is cancelled meanwhile, then re-raises the
        cancellation: uvicorn re-raises the Ctrl-C that stopped it, and asyncio turns that
        into a cancellation of the task that is stopping the workers; a stop cut short there
        would leave them to the event loop's close, which SIGKILLs them before they close
        their databases.
        """
        self._stopping = True
        retiring = asyncio.gather(*(self._retire(w) for w in list(self._workers.values())))
        cancelled = False
        try:
            while not retiring.done():
                try:
                    await asyncio.shield(retiring)
                except asyncio.CancelledError:
                    cancelled = True
            retiring.result()
        finally:
            shutil.rmtree(self._runtime, ignore_errors=True)
        if cancelled:
            raise asyncio.CancelledError

    @property
    def replicas(self) -> int:
        return self._target_replicas

    async def set_replicas(self, replicas: int) -> None:
        """Serve each shard's reads from ``replicas`` workers, the primary included: start the
        missing replica workers (1 .. replicas - 1), stop the extra."""
        if replicas < 1:
            raise InputError(f"replicas must be >= 1 (the primary included), got {replicas}")
        self._target_replicas = replicas
        extra = [w for (s, r), w in self._workers.items() if r >= replicas]
        await asyncio.gather(*(self._retire(w) for w in extra))
        missing = [(s, r) for s in range(self.shards) for r in range(1, replicas)
                   if (s, r) not in self._workers]
        await asyncio.gather(*(self._add(s, r) for s, r in missing))

    async def _add(self, shard: int, replica: int) -> None:
        sock = os.path.join(self._runtime, f"s{shard}r{replica}.sock")
        worker = _Worker(shard, replica, sock)
        self._workers[(shard, replica)] = worker
        await self._spawn(worker)
        worker.monitor = asyncio.create_task(self._watch(worker))

    async def _retire(self, worker: _Worker) -> None:
        worker.retired = True
        self._workers.pop((worker.shard, worker.replica), None)
        if worker.monitor is not None:
            worker.monitor.cancel()
        if worker.client is not None:
            await worker.client.close()
        proc = worker.process
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 5.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        with contextlib.suppress(OSError):  # a worker killed before it could remove it
            os.unlink(worker.socket)

    async def _spawn(self, worker: _Worker) -> None:
        argv = [sys.executable, "-m", "hotshard.service.worker", "--socket", worker.socket,
                "--db", str(db_path(self.data_dir, worker.shard)), "--node", str(worker.shard),
                "--cost-ms", repr(self.cost_ms), "--max-body-bytes", str(self.max_body_bytes)]
        if worker.replica:
            argv.append("--read-only")
        log = os.open(self.data_dir / f"shard-{worker.shard:03d}.log",
                      os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=log)
        finally:
            os.close(log)
        worker.process = proc
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), READY_TIMEOUT_S)
        except TimeoutError:
            line = b""
        text = line.decode(errors="replace").strip()
        if not text.startswith("ready"):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            detail = text[len("error "):] if text.startswith("error ") else \
                f"no answer within {READY_TIMEOUT_S:g} s; see {self.data_dir}/shard-*.log"
            raise HotshardError(f"{worker.name} did not start: {detail}")
        worker.client = await ShardClient.connect(worker.socket, worker.name, worker.shard)
        worker.up_since = time.monotonic()

    async def _watch(self, worker: _Worker) -> None:
        """Restart the worker whenever it exits while the service runs."""
        attempt = 0
        while not worker.retired and not self._stopping:
            await worker.process.wait()
            if worker.retired or self._stopping:
                return
            if worker.client is not None:
                await worker.client.close()
            worker.client = None
            worker.restarts += 1
            alive_for = time.monotonic() - (worker.up_since or time.monotonic())
            attempt = 0 if alive_for > 10 else attempt + 1
            await asyncio.sleep(RESTART_BACKOFF_S[min(attempt, len(RESTART_BACKOFF_S) - 1)])
            while not worker.retired and not self._stopping:
                try:
                    await self._spawn(worker)
                    break
                except (HotshardError, OSError):
                    attempt += 1
                    await asyncio.sleep(RESTART_BACKOFF_S[-1])

    # -- routing ------------------------------------------------------------------------------

    def primary(self, shard: int) -> ShardClient:
        """The client of a shard's primary; ShardUnavailable while it is down."""
        worker = self._workers.get((shard, 0))
        if worker is None or not worker.up:
            raise ShardUnavailable(f"shard {shard} is restarting", retry_after=1.0,
                                   shard=shard)
        return worker.client  # type: ignore[return-value]

    def reader(self, shard: int, *, use_replicas: bool) -> ShardClient:
        """Who serves a read of ``shard``: with replicas, the next live one of primary and
        replicas in turn (round robin), else the primary."""
        if use_replicas and self._target_replicas > 1:
            live = [w for (s, _), w in sorted(self._workers.items()) if s == shard and w.up]
            if live:
                return live[next(self._round_robin[shard]) % len(live)].client  # type: ignore
        return self.primary(shard)

    def workers(self) -> list[WorkerInfo]:
        """Every worker, primaries first, with its pid and restart count."""
        return [WorkerInfo(w.shard, w.replica, w.pid, w.up, w.restarts,
                           w.client.in_flight if w.client is not None else 0)
                for _, w in sorted(self._workers.items())]
