"""The unauthenticated endpoints' turns on the event loop (``limits.Turns``), in process on a real
asyncio loop: a burst's steps run a few at a time, in order, with the loop's other work between any
two batches; a lone request waits for nothing queued; a full queue refuses at once; a caller that
went away does not stop the ones after it. (Through HTTP, under a real burst:
tests/test_jupyterhub_service_bounds.py.)"""

from __future__ import annotations

import asyncio
import itertools

import pytest

pytest.importorskip("jupyterhub")
from mcp_notebook.jupyterhub_service.limits import Turns

pytestmark = pytest.mark.timeout(60)


def test_a_burst_takes_turns_in_order_with_the_loops_other_work_between_them():
    events: list[tuple[str, int]] = []

    async def hostile(turns: Turns, i: int) -> None:
        assert await turns.take()
        events.append(("step", i))
        assert await turns.take()  # its answer takes a turn of its own
        events.append(("answer", i))

    async def reader(stop: asyncio.Event) -> None:
        for j in range(100_000):  # bounded; one entry per loop iteration it gets
            if stop.is_set():
                return
            events.append(("read", j))
            await asyncio.sleep(0)

    async def main() -> None:
        turns = Turns(share=0.5)
        stop = asyncio.Event()
        reading = asyncio.create_task(reader(stop))
        await asyncio.sleep(0)
        await asyncio.gather(*(hostile(turns, i) for i in range(100)))
        stop.set()
        await reading

    asyncio.run(main())
    kinds = [kind for kind, _ in events]
    assert kinds.count("step") == 100 and kinds.count("answer") == 100
    # the burst's steps run in batches of at most MAX_BATCH, the reader's iteration between any two
    runs = [len(list(group)) for read, group in itertools.groupby(kinds, key=lambda k: k == "read") if not read]
    assert max(runs) <= Turns.MAX_BATCH and len(runs) >= 200 / Turns.MAX_BATCH
    assert runs[0] == 1  # the first batch is one step: its size is learnt from the steps' length
    assert [i for kind, i in events if kind == "step"] == list(range(100))  # first come, first served


def test_a_lone_request_is_not_held_and_a_full_queue_refuses_at_once():
    async def main() -> tuple[bool, list[bool], bool]:
        turns = Turns(waiting=3)
        lone = await asyncio.wait_for(turns.take(), 5)
        waiting = [asyncio.create_task(turns.take()) for _ in range(3)]
        await asyncio.sleep(0)  # the three are queued (none has had its turn yet)
        refused = await asyncio.wait_for(turns.take(), 5)  # the fourth: refused, not queued
        return lone, list(await asyncio.gather(*waiting)), refused

    lone, waited, refused = asyncio.run(main())
    assert lone is True and waited == [True, True, True] and refused is False


def test_a_caller_that_went_away_does_not_stop_the_queue():
    async def main() -> list[int]:
        turns = Turns()
        served: list[int] = []

        async def one(i: int) -> None:
            await turns.take()
            served.append(i)

        tasks = [asyncio.create_task(one(i)) for i in range(5)]
        await asyncio.sleep(0)
        tasks[1].cancel()  # its connection closed while it waited
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)
        return served

    assert asyncio.run(main()) == [0, 2, 3, 4]
