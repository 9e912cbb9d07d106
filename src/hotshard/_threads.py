"""Running long work in a thread so the main thread stays responsive.

A compiled loop (numba, DuckDB) holds its thread for minutes: run there, Ctrl-C and SIGTERM
would wait for it. Run in a daemon thread while the main thread waits in short joins, they are
handled at once, and the waiting thread can report progress meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["Background", "run_in_thread"]

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


def run_in_thread(work: Callable[[], T], tick: Callable[[float], None] | None = None,
                  every: float = 0.2) -> T:
    """``work()`` in a daemon thread; ``tick(elapsed seconds)`` every ``every`` s until done.

    Exceptions raised by ``work`` are raised again in the caller's thread.
    """
    return Background(work).wait(tick, every)
