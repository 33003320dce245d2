"""A watcher running beside four writers sees every write exactly once, in revision order,
with the right type and previous value — on every backend."""

from __future__ import annotations

import asyncio

from store.base import Event, EventType, KeyValue, Store

WRITERS = 4
KEYS_PER_WRITER = 10


async def _writer(store: Store, n: int) -> list[tuple[EventType, KeyValue, KeyValue | None]]:
    """Create, update twice and delete each of its keys; return what each write did."""
    done: list[tuple[EventType, KeyValue, KeyValue | None]] = []
    for k in range(KEYS_PER_WRITER):
        key = f"/registry/core/pods/w{n}/k{k}"
        kv = await store.create(key, f"{n}/{k}/0".encode())
        done.append((EventType.ADDED, kv, None))
        for step in (1, 2):
            new = await store.update(
                key, f"{n}/{k}/{step}".encode(), expected_revision=kv.mod_revision
            )
            done.append((EventType.MODIFIED, new, kv))
            kv = new
            await asyncio.sleep(0)  # let the other writers interleave
        gone = await store.delete(key, expected_revision=kv.mod_revision)
        done.append((EventType.DELETED, gone, kv))
    return done


async def test_watcher_sees_every_write_once_and_in_order(store: Store) -> None:
    await store.create("/registry/core/nodes/n1", b"outside the prefix")
    start = await store.current_revision()
    total = WRITERS * KEYS_PER_WRITER * 4
    seen: list[Event] = []
    subscribed = asyncio.Event()

    async def watch() -> None:
        async for event in store.watch("/registry/core/pods/", after_revision=start):
            seen.append(event)
            if event.kv.key == "/registry/core/pods/sentinel":
                return

    async def write_all() -> list[tuple[EventType, KeyValue, KeyValue | None]]:
        await subscribed.wait()
        results = await asyncio.gather(*(_writer(store, n) for n in range(WRITERS)))
        await store.create("/registry/core/nodes/n2", b"outside the prefix")
        await store.create("/registry/core/pods/sentinel", b"last write")
        return [w for writes in results for w in writes]

    watcher = asyncio.create_task(watch(), name="test-watcher")
    subscribed.set()
    async with asyncio.timeout(60):
        writes = await write_all()
        await watcher

    assert seen.pop().kv.key == "/registry/core/pods/sentinel"
    assert len(seen) == total
    assert [e.revision for e in seen] == sorted({e.revision for e in seen})
    by_revision = {kv.mod_revision: (etype, kv, prev) for etype, kv, prev in writes}
    assert set(by_revision) == {e.revision for e in seen}
    for event in seen:
        etype, kv, prev = by_revision[event.revision]
        assert (event.type, event.kv, event.prev) == (etype, kv, prev)
