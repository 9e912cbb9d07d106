"""Running long work in a thread so the main thread stays responsive.

A compiled loop (numba, DuckDB) holds its thread for minutes: run there, Ctrl-C and SIGTERM
would wait for it. Run in a daemon thread while the main thread waits in short joins, they are
handled at once, and the waiting thread can report progress meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["Background", "Pipe", "run_in_thread"]

T = TypeVar("T")


class Background:
    """``work()`` started at once in a daemon thread; ``wait`` for its value. For work that
    overlaps the caller's own (a compiled pass beside DuckDB's aggregations: two cores)."""

    def __init__(self, work: Callable[[], T]):
        import time

        self._box: dict[str, object] = {}
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self._started = time.monotonic()
        self._thread.start()

    def _run(self, work: Callable[[], T]) -> None:
        try:
            self._box["value"] = work()
        except BaseException as exc:  # re-raised in the waiting thread
            self._box["error"] = exc

    def done(self) -> bool:
        """Whether the work has ended (returned or raised)."""
        return not self._thread.is_alive()

    def join(self, timeout: float) -> None:
        """Wait at most ``timeout`` s for the work to end."""
        self._thread.join(timeout)

    def finish(self) -> None:
        """Wait for the thread to end, whatever it returns or raises (nothing is kept)."""
        while self._thread.is_alive():
            self._thread.join(0.2)

    def wait(self, tick: Callable[[float], None] | None = None, every: float = 0.2) -> T:
        """The work's value (or its exception, raised here); ``tick(elapsed seconds)`` every
        ``every`` s until it is done. The waiting is in short joins, so Ctrl-C and SIGTERM
        are handled at once."""
        import time

        while self._thread.is_alive():
            self._thread.join(every)
            if tick is not None and self._thread.is_alive():
                tick(time.monotonic() - self._started)
        if "error" in self._box:
            raise self._box["error"]  # type: ignore[misc]
        return self._box["value"]  # type: ignore[return-value]


class Pipe:
    """``consume(item)`` for each item ``put``, in order, on a thread of its own, so a
    producer (a DuckDB scan) and a consumer that releases the GIL (a compiled pass) use two
    cores. At most ``depth`` items wait; an error in ``consume`` is raised by the next
    ``put`` or by ``close``."""

    _END = object()

    def __init__(self, consume: Callable[[object], None], depth: int = 2):
        import queue

        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(consume,), daemon=True)
        self._thread.start()

    def _run(self, consume: Callable[[object], None]) -> None:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            if self._error is None:
                try:
                    consume(item)
                except BaseException as exc:  # raised again in the producer
                    self._error = exc

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def put(self, item: object) -> None:
        """Queue ``item`` (waiting while ``depth`` items wait)."""
        import queue

        self._raise()
        while True:
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                self._raise()

    def close(self) -> None:
        """Wait until every item is consumed; raise the consumer's error, if any."""
        self.stop()
        self._raise()

    def stop(self) -> None:
        """End the thread once the queued items are done (they are consumed, or skipped
        after an error); idempotent."""
        if self._thread.is_alive():
            self._queue.put(self._END)
            while self._thread.is_alive():
                self._thread.join(0.2)


def run_in_thread(work: Callable[[], T], tick: Callable[[float], None] | None = None,
                  every: float = 0.2) -> T:
    """``work()`` in a daemon thread; ``tick(elapsed seconds)`` every ``every`` s until done.

    Exceptions raised by ``work`` are raised again in the caller's thread.
    """
    return Background(work).wait(tick, every)
