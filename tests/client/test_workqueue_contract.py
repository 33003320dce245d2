"""The work queue's contract: de-duplication, one worker per key, dirty-while-processing,
delays and rate limits on the loop clock (virtual time), and a shutdown that drains."""

from __future__ import annotations

import asyncio
import random

import pytest

from client.ratelimit import ItemExponentialRateLimiter
from client.workqueue import ShutDown, WorkQueue


async def test_a_key_added_twice_is_handed_out_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.add("a")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert len(q) == 0


async def test_a_key_dirtied_while_processing_is_requeued_after_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")  # a change arrives while a worker holds the key
    assert len(q) == 0, "the key must not be handed to a second worker"
    q.done(key)
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_done_without_a_new_add_does_not_requeue() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.done(await q.get())
    assert len(q) == 0 and not q.processing


@pytest.mark.looptime
async def test_add_after_becomes_ready_at_the_delay_and_the_earlier_time_wins() -> None:
    loop = asyncio.get_running_loop()
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", 10)
    q.add_after("a", 5)  # earlier wins
    q.add_after("a", 7)  # later is ignored
    assert len(q) == 0 and q.waiting == 1
    t0 = loop.time()
    assert await q.get() == "a"
    assert loop.time() - t0 == pytest.approx(5)
    assert q.waiting == 0


@pytest.mark.looptime
async def test_rate_limited_adds_back_off_per_key_and_forget_resets() -> None:
    loop = asyncio.get_running_loop()
    q: WorkQueue[str] = WorkQueue(rate_limiter=ItemExponentialRateLimiter(base=1.0, cap=8.0))
    waits = []
    for _ in range(5):
        t0 = loop.time()
        q.add_rate_limited("a")
        q.done(await q.get())
        waits.append(loop.time() - t0)
    assert waits == pytest.approx([1, 2, 4, 8, 8])
    assert q.num_requeues("a") == 5
    q.forget("a")
    assert q.num_requeues("a") == 0
    t0 = loop.time()
    q.add_rate_limited("a")
    await q.get()
    assert loop.time() - t0 == pytest.approx(1)


async def test_shutdown_wakes_idle_getters_with_shutdown() -> None:
    q: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(q.get(), name=f"getter-{i}") for i in range(3)]
    await asyncio.sleep(0)  # let them park
    q.shut_down()
    for g in getters:
        with pytest.raises(ShutDown):
            await g


async def test_shutdown_hands_out_what_is_queued_then_stops_and_drain_waits_for_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    held = await q.get()
    q.shut_down()
    drained = asyncio.create_task(q.shutdown(drain=True), name="drain")
    q.add("c")  # refused after shutdown
    assert await q.get() == "b"
    q.done("b")
    with pytest.raises(ShutDown):
        await q.get()
    await asyncio.sleep(0)
    assert not drained.done(), "drain must wait for the key still processing"
    q.done(held)
    await drained


async def test_a_cancelled_getter_does_not_swallow_a_wakeup() -> None:
    q: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(q.get(), name="first")
    second = asyncio.create_task(q.get(), name="second")
    await asyncio.sleep(0)
    q.add("a")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it runs
    assert await second == "a"


@pytest.mark.looptime
async def test_concurrent_workers_never_share_a_key_and_lose_no_update() -> None:
    """8 workers, 20 keys, 2000 adds interleaved with processing of random (virtual) length."""
    rng = random.Random(4)
    q: WorkQueue[str] = WorkQueue(name="invariants")
    keys = [f"k{i}" for i in range(20)]
    active: set[str] = set()
    violations: list[str] = []
    seq = 0
    last_add: dict[str, int] = {}
    last_start: dict[str, int] = {}
    processed = 0

    async def worker() -> None:
        nonlocal seq, processed
        while True:
            try:
                key = await q.get()
            except ShutDown:
                return
            if key in active:
                violations.append(key)
            active.add(key)
            seq += 1
            last_start[key] = seq
            await asyncio.sleep(rng.uniform(0, 0.01))
            active.discard(key)
            processed += 1
            q.done(key)

    async def producer() -> None:
        nonlocal seq
        for _ in range(2000):
            key = rng.choice(keys)
            seq += 1
            last_add[key] = seq
            q.add(key)
            if rng.random() < 0.3:
                await asyncio.sleep(rng.uniform(0, 0.002))

    workers = [asyncio.create_task(worker(), name=f"worker-{i}") for i in range(8)]
    await producer()
    # Shutting down refuses new keys but hands out every queued and dirtied one: a clean drain.
    await q.shutdown(drain=True)
    await asyncio.gather(*workers)
    assert violations == []
    for key, added in last_add.items():
        assert last_start[key] > added, f"update of {key} at {added} never processed"
    assert processed < 2000, "de-duplication should have folded some adds"
