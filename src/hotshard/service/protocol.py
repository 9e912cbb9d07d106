"""The gateway <-> shard wire format: length-prefixed JSON frames over a Unix socket.

Why not HTTP between gateway and shard: the hop must add well under a millisecond, and one
multiplexed stream per shard with a 4-byte length prefix costs one syscall pair per request.
Why JSON and not pickle: a shard must never execute what arrives on its socket.

A request is ``{"id": n, "op": name, "args": {...}}``; its reply carries the same ``id`` and
either ``"ok"`` (the result) with ``"us"`` (microseconds the shard spent serving it, so the
gateway can tell the hop from the work), or ``"err": {"kind": ..., "message": ...}``. Replies
may come back in any order; the id pairs them.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from hotshard.errors import ProtocolError

__all__ = ["CONTROL_OPS", "DATA_OPS", "MAX_FRAME_BYTES", "ProtocolError", "decode", "encode",
           "read_frame_blocking"]

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 64 << 20
# Served in arrival order by the shard's one worker thread: they are the shard's load.
# The load_* ops are a staged load: one transaction over many calls, committed at the end.
DATA_OPS = ("append", "append_many", "history", "load_begin", "load_rows", "load_commit",
            "load_abort")
# Answered at once by the connection's reader: a busy shard still says it is alive.
CONTROL_OPS = ("ping",)


def encode(message: dict[str, Any]) -> bytes:
    """One frame: 4-byte big-endian length, then the JSON text."""
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds {MAX_FRAME_BYTES}")
    return HEADER.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    """The message in a frame's body."""
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"frame is not JSON: {e}") from e
    if not isinstance(message, dict) or not isinstance(message.get("id"), int):
        raise ProtocolError("frame is not an object with an integer id")
    return message


def frame_length(header: bytes) -> int:
    """The body length a 4-byte header announces, checked against the limit."""
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {length} bytes exceeds {MAX_FRAME_BYTES}")
    return length


def _recv_exactly(sock: Any, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame_blocking(sock: Any) -> dict[str, Any] | None:
    """The next message from a blocking socket; None when the peer closed it."""
    header = _recv_exactly(sock, HEADER.size)
    if header is None:
        return None
    body = _recv_exactly(sock, frame_length(header))
    if body is None:
        return None
    return decode(body)
