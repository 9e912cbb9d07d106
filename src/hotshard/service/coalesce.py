"""Coalescing of identical in-flight reads at the gateway (asyncio).

When a channel is hot, many clients ask for the same page at nearly the same moment. Without
coalescing, each of those reads queues on the one shard that owns the channel; with it, the
first read goes to the shard and every identical read that arrives while it is in flight waits
for that same answer. Unlike a cache, this adds no staleness: an entry lives only while its call
is running, so a read that starts after the call completed makes a new call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

__all__ = ["Coalescer"]

T = TypeVar("T")


class Coalescer:
    """Share one backend call among the identical reads that overlap it.

    Counters
    --------
    calls
        Backend calls made (one per leader).
    coalesced
        Reads that received a shared outcome instead of calling: the leader's result or the
        leader's exception. A joiner cancelled before the outcome arrived is not counted.
    in_flight
        Keys whose call is running now.

    Notes
    -----
    The backend call runs as its own task and every reader awaits it through
    ``asyncio.shield``, so cancelling any reader (a client that disconnects, a request
    timeout), the leader included, leaves the call running for the others. A call whose readers
    have all gone still completes; its outcome is then discarded (its exception marked
    retrieved, so asyncio does not log it as lost).

    One instance belongs to one event loop; it is not thread-safe.
    """

    def __init__(self) -> None:
        self._tasks: dict[Hashable, asyncio.Future[Any]] = {}
        self.calls = 0
        self.coalesced = 0

    @property
    def in_flight(self) -> int:
        """Keys whose backend call is running now."""
        return len(self._tasks)

    async def run(self, key: Hashable, call: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """The result of ``call()`` for ``key``, shared with identical reads in flight.

        Parameters
        ----------
        key : hashable
            What makes two reads identical (e.g. channel, limit and cursor of a page).
        call : callable
            Makes the backend call when this read leads; not called when it joins.

        Returns
        -------
        (result, coalesced)
            ``coalesced`` is True when this read joined another's call instead of calling.

        Raises
        ------
        Exception
            Whatever the backend call raised; every reader sharing the call gets the same
            exception object.
        """
        task = self._tasks.get(key)
        if task is not None and not task.done():
            # A task already done is not in flight (its done-callback has yet to run): joining
            # it would serve an answer from before this read started, so call again instead.
            try:
                result = await asyncio.shield(task)
            except Exception:  # the shared failure (a cancelled joiner is not counted)
                self.coalesced += 1
                raise
            self.coalesced += 1
            return result, True
        self.calls += 1
        task = asyncio.ensure_future(call())
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(task), False

    def to_dict(self) -> dict[str, int]:
        """The counters, as /stats shows them."""
        return {"calls": self.calls, "coalesced": self.coalesced, "in_flight": self.in_flight}

    def _finished(self, key: Hashable, task: asyncio.Future[Any]) -> None:
        """Forget ``key``'s call (unless a newer one replaced it); mark its exception seen."""
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled():
            task.exception()
