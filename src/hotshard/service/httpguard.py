"""The gateway's HTTP/1.1 connections, with a deadline on every request head and body.

uvicorn's h11 protocol closes an idle keep-alive connection after ``timeout_keep_alive``, but a
client that connects and sends nothing, or half a request line, or headers one byte every few
seconds (slowloris), is kept open for ever: enough of them exhaust the process's file
descriptors and every real client is refused. ``GuardedH11Protocol`` gives each request head
``HEADER_TIMEOUT_S`` from the moment the connection opens (or from the first byte of a later
request on a kept-alive connection) to arrive complete; a connection that misses it is closed.

The body has ``BODY_TIMEOUT_S`` from the moment the head is in: the gateway reads every body
whole before a route sees it (``gateway._BodyLimit``, which also limits its size), and answers
408 and closes the connection when it is not complete by then (a ``Content-Length: 100``
followed by 1 byte is otherwise kept open for ever, and so is the rest of a body a route never
reads). It is read there, not here, so the 408 is an ordinary response (JSON, ``X-Shard``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["BODY_TIMEOUT_S", "HEADER_TIMEOUT_S", "GuardedH11Protocol"]

# Long enough for any real client on a slow link (a request head is one packet), short enough
# that a slowloris client holds a connection for seconds, not for ever. Read at each connection,
# so a test can set it small.
HEADER_TIMEOUT_S = 10.0
# The same for a whole request body once its head is in: the gateway's bodies are a few KB
# (at most 4 x --max-body + 4 KB), a few packets on any link. Read at each request.
BODY_TIMEOUT_S = 10.0


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head is not complete within
    ``HEADER_TIMEOUT_S`` (see the module's docstring)."""

    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm()  # still waiting for (the rest of) a request head
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is None:  # a deadline, not an idle timer: bytes do not extend it
            self._head_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()
