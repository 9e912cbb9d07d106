"""One bounded HTTP GET for answers from servers hotshard does not control (Prometheus, a load
target's ``/stats``): a deadline on the whole exchange, a cap on the answer's size, no
redirects followed, and JSON parsed with its nesting bounded.

A socket timeout bounds each read, not the answer: a server sending a byte every half second
keeps ``urlopen`` reading for ever under any timeout. Here a timer shuts the socket down at the
deadline, whatever phase the exchange is in (connecting, the status line, the headers, the
body), so the call returns within ``timeout`` plus scheduling. An answer larger than
``max_bytes`` is refused as it arrives, never held whole. A redirect is an answer, not a hop:
the caller is told where it pointed (a Prometheus redirecting to another host would otherwise
be read silently while the document names the first).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from hotshard.errors import FetchError

__all__ = ["DEFAULT_MAX_BYTES", "MAX_JSON_DEPTH", "Answer", "FetchError", "fetch",
           "json_depth_ok", "loads_bounded"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_JSON_DEPTH = 64
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    location: str | None = None   # a redirect's target, not followed


def fetch(url: str, *, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES,
          headers: dict[str, str] | None = None) -> Answer:
    """GET ``url`` within ``timeout`` seconds in all, reading at most ``max_bytes``.

    Raises
    ------
    FetchError
        Unreachable, past the deadline, an answer over ``max_bytes``, or not HTTP. A redirect
        is returned (``Answer.location``), never followed.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError(f"not an http(s) URL: {url!r}", "protocol")
    deadline = time.monotonic() + timeout
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        port = parts.port
    except ValueError:
        raise FetchError(f"not a port in {url!r}", "protocol") from None
    conn = kind(parts.hostname, port, timeout=timeout)
    expired = threading.Event()

    def cut() -> None:   # the deadline: whatever the exchange is doing, it ends now
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout, cut)
    timer.daemon = True
    timer.start()
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    try:
        try:
            conn.request("GET", path, headers=headers or {})
            response = conn.getresponse()
            status = response.status
            if 300 <= status < 400:
                return Answer(status, b"", response.getheader("Location") or "")
            length = response.getheader("Content-Length")
            if length is not None and length.strip().isdigit() and int(length) > max_bytes:
                raise FetchError(f"{_host(parts)} answered {int(length):,} bytes, more than "
                                 f"the {max_bytes:,} read", "size")
            chunks: list[bytes] = []   # joined once whole: no growing buffer's copies
            held = 0
            while True:
                if time.monotonic() > deadline:
                    raise FetchError(f"{_host(parts)} did not finish answering within "
                                     f"{timeout:g} s", "deadline")
                chunk = response.read1(_CHUNK) if hasattr(response, "read1") else \
                    response.read(_CHUNK)
                if not chunk:
                    break
                held += len(chunk)
                if held > max_bytes:
                    chunks.clear()
                    raise FetchError(f"{_host(parts)} answered more than the {max_bytes:,} "
                                     "bytes read", "size")
                chunks.append(chunk)
            body = b"".join(chunks)
            chunks.clear()
            if expired.is_set():
                raise FetchError(f"{_host(parts)} did not finish answering within "
                                 f"{timeout:g} s", "deadline")
            return Answer(status, body)
        except FetchError:
            raise
        except (http.client.HTTPException, ValueError) as e:
            if expired.is_set():
                raise FetchError(f"{_host(parts)} did not finish answering within "
                                 f"{timeout:g} s", "deadline") from None
            raise FetchError(f"{_host(parts)} did not answer in HTTP ({type(e).__name__})",
                             "protocol") from None
        except OSError as e:
            if expired.is_set() or isinstance(e, TimeoutError):
                raise FetchError(f"{_host(parts)} did not answer within {timeout:g} s",
                                 "deadline") from None
            reason = (e.strerror or str(e) or type(e).__name__).lower()
            raise FetchError(f"cannot reach {_host(parts)}: {reason}", "unreachable",
                             reason) from None
    finally:
        timer.cancel()
        conn.close()


def _host(parts: urllib.parse.SplitResult) -> str:
    return parts.netloc.rpartition("@")[2]


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def json_depth_ok(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``text``'s brackets nest at most ``limit`` deep (outside strings): checked
    before parsing, so a document nested thousands deep is refused, not a RecursionError."""
    import numpy as np

    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    codes = np.frombuffer(_STRING.sub(b'""', data), dtype=np.uint8)
    step = ((codes == 0x5B) | (codes == 0x7B)).astype(np.int32) \
        - ((codes == 0x5D) | (codes == 0x7D)).astype(np.int32)
    return not step.size or int(np.cumsum(step).max()) <= limit


def loads_bounded(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` of a foreign document, its nesting bounded (ValueError beyond)."""
    if not _shallow(text, limit):
        raise ValueError(f"nested deeper than {limit} levels")
    return json.loads(text)


def _shallow(text: str | bytes, limit: int) -> bool:
    # cheap upper bound first: fewer brackets than the limit cannot nest past it
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= limit:
        return True
    return json_depth_ok(data, limit)
