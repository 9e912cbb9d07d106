"""Running long work in a thread so the main thread stays responsive.

A compiled loop (numba, DuckDB) holds its thread for minutes: run there, Ctrl-C and SIGTERM
would wait for it. Run in a daemon thread while the main thread waits in short joins, they are
handled at once, and the waiting thread can report progress meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["run_in_thread"]

T = TypeVar("T")


def run_in_thread(work: Callable[[], T], tick: Callable[[float], None] | None = None,
                  every: float = 0.2) -> T:
    """``work()`` in a daemon thread; ``tick(elapsed seconds)`` every ``every`` s until done.

    Exceptions raised by ``work`` are raised again in the caller's thread.
    """
    import time

    box: dict[str, object] = {}

    def target():
        try:
            box["value"] = work()
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    started = time.monotonic()
    thread.start()
    while thread.is_alive():
        thread.join(every)
        if tick is not None and thread.is_alive():
            tick(time.monotonic() - started)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
