"""Helpers of the cluster tests: a free port range, a logged-in admin client, fake peers.

A fake peer is what a driver can meet at the end of a redis:// URL that is not a healthy
Redis: ``http`` answers anything with an HTTP 400 (a web server), ``silent`` accepts and never
answers (a hung listener, or a frozen node), ``trickle`` sends ``+`` every 0.3 s from the
moment it accepts and never ends the line (a reply that never completes, which defeats a
timeout on each read), ``reply`` answers every command with one fixed
RESP reply (``-LOADING ...``; ``{port}`` in it is the peer's own port, so ``-MOVED 1
127.0.0.1:{port}`` redirects to itself forever), so the client's error naming is checked
without having to bring a real node into that state.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import socket
import threading
from collections.abc import Iterator

from hotshard.cluster import local

_COMMAND = re.compile(rb"(?:^|\r\n)\*\d+\r\n")
TRICKLE_EVERY_S = 0.3


def free_base(n: int) -> int:
    """A port P with P..P+n-1 and their cluster bus ports (+10000) free on 127.0.0.1."""
    rng = random.Random(os.getpid())
    for _ in range(200):
        base = rng.randrange(10000, 20000)  # bus ports +10000 stay below the ephemeral range
        ok = True
        for port in [*range(base, base + n), *range(base + 10000, base + 10000 + n)]:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port range")


def predicted_node_shares(profile: str, state: local.ClusterState) -> tuple[list[float], int]:
    """(each node's share of ``profile``'s requests in node order, the hottest node) by
    ``hotshard predict --slots-from`` on the live cluster (the CLI as a user runs it)."""
    from tests.conftest import run_cli

    url = str(local.RedisURL(state.host, state.ports[0], password=state.password,
                             scheme="redis"))
    predicted = run_cli("predict", profile, "-p", "redis-cluster", "--slots-from", url,
                        "--json")
    assert predicted.returncode == 0, predicted.stderr
    doc = json.loads(predicted.stdout)
    shares = [s["share"] for s in sorted(doc["shards"], key=lambda s: s["shard"])]
    return shares, doc["hottest"]["shard"]


def node_client(state: local.ClusterState, port: int, **kwargs):
    """A redis-py client to one node of ``state``, logged in with the cluster's password."""
    import redis

    return redis.Redis(host=state.host, port=port, password=state.password, **kwargs)


@contextlib.contextmanager
def fake_peer(kind: str, reply: bytes = b"") -> Iterator[int]:
    """A listener on a free 127.0.0.1 port behaving as ``kind`` (see above), in a thread;
    yields its port, closes it and every connection on the way out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    reply = reply.replace(b"{port}", str(listener.getsockname()[1]).encode())
    connections: list[socket.socket] = []

    closing = threading.Event()

    def serve(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if kind == "trickle":
                while not closing.wait(TRICKLE_EVERY_S):
                    conn.sendall(b"+")
                return
            while data := conn.recv(65536):
                if kind == "http":
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                                 b"Connection: close\r\n\r\n")
                elif kind == "reply":
                    conn.sendall(reply * len(_COMMAND.findall(data)))

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                connections.append(conn)
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        closing.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
