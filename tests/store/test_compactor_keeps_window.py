"""The background compactor keeps the last N revisions, every interval, on every backend
(virtual time: the intervals pass without waiting)."""

from __future__ import annotations

import asyncio

import pytest

from store import keep_window
from store.base import Store
from store.compactor import compact_to_window
from store.memory import MemoryStore


async def test_compact_to_window_keeps_the_last_revisions(store: Store, origin: int) -> None:
    await store.compact(origin)  # an etcd member may hold older, uncompacted history
    assert await compact_to_window(store, revisions=5) is None
    for i in range(12):
        await store.create(f"/registry/core/pods/ns/p{i}", b"v")
    assert await compact_to_window(store, revisions=5) == origin + 7
    assert await store.compacted_revision() == origin + 7
    assert await compact_to_window(store, revisions=5) is None


@pytest.mark.looptime
async def test_keep_window_compacts_every_interval() -> None:
    """The loop is what is timed here, so the store is the thread-free memory backend
    (SQLite's thread hand-offs would let virtual time run ahead while the loop waits)."""
    store = MemoryStore()
    task = asyncio.create_task(keep_window(store, revisions=10, interval=60), name="test-compactor")
    for i in range(25):
        await store.create(f"/registry/core/pods/ns/p{i}", b"v")
    await asyncio.sleep(59)  # virtual seconds
    assert await store.compacted_revision() == 0
    await asyncio.sleep(2)
    assert await store.compacted_revision() == 15
    for i in range(25, 30):
        await store.create(f"/registry/core/pods/ns/p{i}", b"v")
    await asyncio.sleep(58)
    assert await store.compacted_revision() == 15
    await asyncio.sleep(2)
    assert await store.compacted_revision() == 20
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await store.close()


async def test_keep_window_rejects_nonsense_settings(store: Store) -> None:
    with pytest.raises(ValueError):
        await keep_window(store, revisions=0)
    with pytest.raises(ValueError):
        await keep_window(store, interval=0)
