"""A fake HTTP peer for tests of readers that must not trust it (a hostile Prometheus, a drive
target that redirects or trickles): one ``ThreadingHTTPServer`` on 127.0.0.1, on a port the
OS picks, whose every GET and POST is answered by the test's own function."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def fake_http(answer: Callable[[http.server.BaseHTTPRequestHandler], None]) -> Iterator[str]:
    """Serve ``answer(request)`` for every GET and POST; yields ``http://127.0.0.1:PORT``
    and shuts the server down on the way out. A client that hangs up mid-answer (the reader
    under test giving up, as it should) is not an error of the fake."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                answer(self)

        do_GET = do_POST = _any  # noqa: N815 - http.server's names

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def reply(request: http.server.BaseHTTPRequestHandler, status: int = 200, body: bytes = b"{}",
          headers: tuple[tuple[str, str], ...] = ()) -> None:
    """A whole answer with its Content-Length, after reading the request's body."""
    length = int(request.headers.get("Content-Length") or 0)
    if length:
        request.rfile.read(length)
    request.send_response(status)
    for name, value in headers:
        request.send_header(name, value)
    request.send_header("Content-Length", str(len(body)))
    request.end_headers()
    request.wfile.write(body)
