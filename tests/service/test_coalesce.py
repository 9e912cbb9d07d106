"""Coalescer: identical in-flight reads share one backend call, its result or its exception,
and cancelling one reader leaves the call running for the others.

Each test drives its own event loop with ``asyncio.run``; the backend is held in flight by an
``asyncio.Event`` the test releases, and ``asyncio.sleep(0)`` only yields to the loop (no time
passes), so nothing depends on timing.
"""

from __future__ import annotations

import asyncio
import gc

import pytest

from hotshard.service.coalesce import Coalescer


class Backend:
    """A backend read that waits for ``gate`` and counts its calls."""

    def __init__(self, result: object = "page", error: BaseException | None = None) -> None:
        self.gate = asyncio.Event()
        self.calls = 0
        self.result = result
        self.error = error

    async def read(self) -> object:
        self.calls += 1
        await self.gate.wait()
        if self.error is not None:
            raise self.error
        return self.result


async def _yield(times: int = 5) -> None:
    """Let every ready task run up to its next await (no time passes)."""
    for _ in range(times):
        await asyncio.sleep(0)


def test_ten_identical_reads_make_one_call():
    async def main():
        coalescer, backend = Coalescer(), Backend()
        tasks = [asyncio.create_task(coalescer.run("general", backend.read)) for _ in range(10)]
        await _yield()
        assert coalescer.in_flight == 1
        backend.gate.set()
        return coalescer, backend, await asyncio.gather(*tasks)

    coalescer, backend, results = asyncio.run(main())
    assert backend.calls == 1 and coalescer.calls == 1
    assert coalescer.coalesced == 9
    assert coalescer.in_flight == 0
    assert [r for r, _ in results] == ["page"] * 10
    assert sorted(shared for _, shared in results) == [False] + [True] * 9


def test_different_keys_make_separate_calls():
    async def main():
        coalescer = Coalescer()
        a, b = Backend("a"), Backend("b")
        tasks = [asyncio.create_task(coalescer.run("a", a.read)),
                 asyncio.create_task(coalescer.run("b", b.read))]
        await _yield()
        assert coalescer.in_flight == 2
        a.gate.set()
        b.gate.set()
        return coalescer, await asyncio.gather(*tasks)

    coalescer, results = asyncio.run(main())
    assert results == [("a", False), ("b", False)]
    assert (coalescer.calls, coalescer.coalesced) == (2, 0)


def test_exception_is_shared_by_every_reader():
    error = RuntimeError("shard down")

    async def main():
        coalescer, backend = Coalescer(), Backend(error=error)
        tasks = [asyncio.create_task(coalescer.run("k", backend.read)) for _ in range(5)]
        await _yield()
        backend.gate.set()
        return coalescer, backend, await asyncio.gather(*tasks, return_exceptions=True)

    coalescer, backend, outcomes = asyncio.run(main())
    assert backend.calls == 1
    assert all(outcome is error for outcome in outcomes)
    assert coalescer.coalesced == 4
    assert coalescer.in_flight == 0


def test_cancelled_waiter_does_not_cancel_the_others():
    async def main():
        coalescer, backend = Coalescer(), Backend()
        leader = asyncio.create_task(coalescer.run("k", backend.read))
        quitter = asyncio.create_task(coalescer.run("k", backend.read))
        stayer = asyncio.create_task(coalescer.run("k", backend.read))
        await _yield()
        quitter.cancel()
        await _yield()
        backend.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await quitter
        return coalescer, backend, await leader, await stayer

    coalescer, backend, lead, stay = asyncio.run(main())
    assert lead == ("page", False)
    assert stay == ("page", True)
    assert backend.calls == 1
    assert coalescer.coalesced == 1  # the cancelled reader got nothing


def test_cancelled_leader_still_completes_the_call_for_others():
    async def main():
        coalescer, backend = Coalescer(), Backend()
        leader = asyncio.create_task(coalescer.run("k", backend.read))
        joiners = [asyncio.create_task(coalescer.run("k", backend.read)) for _ in range(3)]
        await _yield()
        leader.cancel()
        await _yield()
        assert coalescer.in_flight == 1  # the call itself was not cancelled
        backend.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await leader
        return coalescer, backend, await asyncio.gather(*joiners)

    coalescer, backend, results = asyncio.run(main())
    assert results == [("page", True)] * 3
    assert backend.calls == 1
    assert coalescer.in_flight == 0


def test_read_after_completion_calls_again():
    async def main():
        coalescer, backend = Coalescer(), Backend()
        backend.gate.set()
        first = await coalescer.run("k", backend.read)
        backend.result = "newer page"
        second = await coalescer.run("k", backend.read)
        return coalescer, backend, first, second

    coalescer, backend, first, second = asyncio.run(main())
    assert first == ("page", False)
    assert second == ("newer page", False)  # no staleness: nothing kept after completion
    assert (backend.calls, coalescer.calls, coalescer.coalesced) == (2, 2, 0)


def test_read_in_the_gap_before_cleanup_does_not_join_a_finished_call():
    async def main():
        coalescer, backend = Coalescer(), Backend()
        backend.gate.set()
        leader = asyncio.create_task(coalescer.run("k", backend.read))
        # Run until the backend task is done but its done-callback has not yet run.
        task = None
        while task is None or not task.done():
            await asyncio.sleep(0)
            task = coalescer._tasks.get("k", task)
        assert "k" in coalescer._tasks  # the gap this test is about
        backend.result = "newer page"
        late = await coalescer.run("k", backend.read)
        return coalescer, await leader, late

    coalescer, lead, late = asyncio.run(main())
    assert lead == ("page", False)
    assert late == ("newer page", False)
    assert coalescer.calls == 2 and coalescer.in_flight == 0


def test_failure_nobody_awaits_is_not_logged_as_lost():
    errors = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: errors.append(ctx))
        coalescer, backend = Coalescer(), Backend(error=RuntimeError("boom"))
        leader = asyncio.create_task(coalescer.run("k", backend.read))
        await _yield()
        leader.cancel()
        await _yield()
        backend.gate.set()
        await _yield()
        assert coalescer.in_flight == 0
        del leader
        gc.collect()

    asyncio.run(main())
    assert errors == []


def test_to_dict():
    async def main():
        coalescer, backend = Coalescer(), Backend()
        backend.gate.set()
        await coalescer.run("k", backend.read)
        return coalescer.to_dict()

    assert asyncio.run(main()) == {"calls": 1, "coalesced": 0, "in_flight": 0}
