"""A shard worker: one process owning one shard's store, serving the gateway over a Unix socket.

One process per shard, so each shard's CPU is its own and can be read from /proc. Requests are
served one at a time in arrival order (a shard is one core, as a Redis node or a busy
single-partition leader is), so a hot shard queues exactly as a real one does: the gateway
sees the queue as its calls in flight.

Run by the supervisor as ``python -m hotshard.service.worker --socket S --db F --node I``; it
prints ``ready <pid>`` once it listens and exits when its stdin closes (its supervisor died), so
no worker outlives the service.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import threading
import time
from typing import Any

from hotshard.errors import HotshardError
from hotshard.service.protocol import CONTROL_OPS, DATA_OPS, encode, read_frame_blocking
from hotshard.service.store import SQLiteStore

__all__ = ["ShardWorker", "burn_cpu", "main"]


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
                                     now_ms=args.get("now_ms"))
        if op == "append_many":
            ids = self.store.append_many(args.get("rows") or [])
            return {"count": len(ids), "last_id": ids[-1] if ids else None}
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
    except HotshardError as e:
        reply = {"id": message["id"], "err": {"kind": "input", "message": str(e)}}
    except Exception as e:  # a bug or a storage failure: the gateway answers 500/503
        reply = {"id": message["id"],
                 "err": {"kind": "internal", "message": f"{type(e).__name__}: {e}"}}
    reply["us"] = int((time.perf_counter() - started) * 1e6)
    return reply


def _exit_when_parent_goes() -> None:
    try:
        while sys.stdin.buffer.read(1 << 16):
            pass
    except OSError:
        pass
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hotshard.service.worker")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--node", type=int, default=0)
    parser.add_argument("--read-only", action="store_true")
    parser.add_argument("--cost-ms", type=float, default=0.0)
    parser.add_argument("--max-body-bytes", type=int, default=4096)
    args = parser.parse_args(argv)
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
    threading.Thread(target=_exit_when_parent_goes, daemon=True).start()
    print(f"ready {os.getpid()}", flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve_connection, args=(conn, worker, serial, info),
                         daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
