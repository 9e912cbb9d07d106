"""A shard worker: one process owning one shard's store, serving the gateway over a Unix socket.

One process per shard, so each shard's CPU is its own and can be read from /proc. Requests are
served one at a time in arrival order (a shard is one core, as a Redis node or a busy
single-partition leader is), so a hot shard queues exactly as a real one does: the gateway
sees the queue as its calls in flight.

Run by the supervisor as ``python -m hotshard.service.worker --socket S --db F --node I``; it
prints ``ready <pid>`` once it listens and exits when its stdin closes (its supervisor died, even
by ``kill -9``), so no worker outlives the service. On the way out (that, or SIGTERM) it closes
its database (an unfinished staged load is rolled back), removes its socket and, if it was the
last one there, the supervisor's socket directory, so a killed gateway leaves nothing in /tmp.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from hotshard.errors import HotshardError, IdempotencyConflict
from hotshard.service.protocol import CONTROL_OPS, DATA_OPS, encode, read_frame_blocking
from hotshard.service.store import SQLiteStore

__all__ = ["RUNTIME_PREFIX", "ShardWorker", "burn_cpu", "main"]

# The supervisor's socket directories are ``<tmp>/hotshard-<its pid>-<random>``: the pid lets a
# later start sweep the directory of a gateway that was killed before anyone could clean up.
RUNTIME_PREFIX = "hotshard-"


def burn_cpu(ms: float) -> None:
    """Spend ``ms`` of this thread's CPU time (the ``--cost-ms`` knob: a heavier query).

    Measured on the thread's CPU clock, not the wall clock, so a shard that is descheduled
    still does the full work when it runs: the cost is CPU, as a real query's is.
    """
    if ms <= 0:
        return
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for i in range(200):
            x ^= i * 2654435761
    return None


class ShardWorker:
    """Executes data ops against one store, in order, one at a time."""

    def __init__(self, store: SQLiteStore, *, cost_ms: float = 0.0) -> None:
        self.store = store
        self.cost_ms = float(cost_ms)

    def execute(self, op: str, args: dict[str, Any]) -> Any:
        """The result of one data op; raises HotshardError for a bad request."""
        if op == "append":
            return self.store.append(args.get("channel"), args.get("user"), args.get("body"),
                                     now_ms=args.get("now_ms"),
                                     idempotency_key=args.get("idempotency_key"))
        if op == "append_many":
            ids = self.store.append_many(args.get("rows") or [])
            return {"count": len(ids), "last_id": ids[-1] if ids else None}
        if op == "load_begin":
            return self.store.begin_load()
        if op == "load_rows":
            return {"count": self.store.load_rows(args.get("rows") or [])}
        if op == "load_commit":
            return self.store.commit_load()
        if op == "load_abort":
            return self.store.abort_load()
        if op == "history":
            burn_cpu(self.cost_ms)
            rows = self.store.history(args.get("channel"), limit=args.get("limit", 50),
                                      before=args.get("before"))
            return [[m.id, m.user, m.body, m.ts_ms] for m in rows]
        raise HotshardError(f"unknown op {op!r}")


def _reply(conn: socket.socket, lock: threading.Lock, message: dict[str, Any]) -> None:
    data = encode(message)
    # OSError: the gateway went away; it fails its own pending calls
    with lock, contextlib.suppress(OSError):
        conn.sendall(data)


def _serve_connection(conn: socket.socket, worker: ShardWorker, serial: threading.Lock,
                      info: dict[str, Any]) -> None:
    """Read requests and answer them in order. Data ops run under the process-wide ``serial``
    lock (one at a time: a shard is one core); running them on the reading thread, not handing
    them to another, saves two thread wake-ups per request on the hop."""
    send_lock = threading.Lock()
    with conn:
        while True:
            try:
                message = read_frame_blocking(conn)
            except (OSError, ValueError):
                return
            if message is None:
                return
            op = message.get("op")
            if op in CONTROL_OPS:
                reply = {"id": message["id"], "ok": info, "us": 0}
            elif op in DATA_OPS:
                with serial:
                    reply = _execute(worker, message)
            else:
                reply = {"id": message["id"],
                         "err": {"kind": "internal", "message": f"unknown op {op!r}"}}
            _reply(conn, send_lock, reply)


def _execute(worker: ShardWorker, message: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        result = worker.execute(message["op"], message.get("args") or {})
        reply = {"id": message["id"], "ok": result}
    except HotshardError as e:   # the client's: its kind says which answer it gets
        kind = "conflict" if isinstance(e, IdempotencyConflict) else "input"
        reply = {"id": message["id"], "err": {"kind": kind, "message": str(e)}}
    except Exception as e:  # a bug or a storage failure: the gateway answers 500/503
        reply = {"id": message["id"],
                 "err": {"kind": "internal", "message": f"{type(e).__name__}: {e}"}}
    reply["us"] = int((time.perf_counter() - started) * 1e6)
    return reply


def _exit_when_parent_goes(cleanup: Callable[[], None]) -> None:
    try:
        while sys.stdin.buffer.read(1 << 16):
            pass
    except OSError:
        pass
    cleanup()
    os._exit(0)


def _cleanup_once(store: SQLiteStore, socket_path: str) -> Callable[[], None]:
    """The worker's last act (called once, from whichever exit path comes first): close the
    database if no call holds it for long, remove the socket and an emptied socket directory."""
    lock = threading.Lock()
    done: list[bool] = []

    def cleanup() -> None:
        with lock:  # a second caller waits for the first to finish before it exits
            if done:
                return
            done.append(True)
            with contextlib.suppress(OSError):
                os.unlink(socket_path)
            runtime = os.path.dirname(socket_path)
            if os.path.basename(runtime).startswith(RUNTIME_PREFIX):
                with contextlib.suppress(OSError):  # not empty: another worker removes it
                    os.rmdir(runtime)
            if store._lock.acquire(timeout=1.0):  # a long call in progress: exit, SQLite
                store._lock.release()             # rolls its transaction back
                with contextlib.suppress(Exception):
                    store.close()

    return cleanup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hotshard.service.worker")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--node", type=int, default=0)
    parser.add_argument("--read-only", action="store_true")
    parser.add_argument("--cost-ms", type=float, default=0.0)
    parser.add_argument("--max-body-bytes", type=int, default=4096)
    args = parser.parse_args(argv)
    os.umask(0o077)  # every file this process makes (database, WAL, socket) is its owner's
    try:
        store = SQLiteStore(args.db, node=args.node, read_only=args.read_only,
                            max_body_bytes=args.max_body_bytes)
    except HotshardError as e:
        print(f"error {e}", flush=True)
        return 2
    worker = ShardWorker(store, cost_ms=args.cost_ms)
    info = {"pid": os.getpid(), "node": args.node, "read_only": args.read_only}
    serial = threading.Lock()
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(args.socket)
    server.listen(64)
    cleanup = _cleanup_once(store, args.socket)

    def on_sigterm(signum: int, frame: Any) -> None:
        cleanup()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_sigterm)
    # Ctrl-C reaches the whole process group; the gateway handles it and stops its workers
    # in order (SIGTERM), so a worker does not die under requests still in flight
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_when_parent_goes, args=(cleanup,), daemon=True).start()
    print(f"ready {os.getpid()}", flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve_connection, args=(conn, worker, serial, info),
                         daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
