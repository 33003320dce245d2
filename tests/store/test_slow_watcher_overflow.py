"""A watcher that stops reading is cut off with WatchOverflow once its buffer fills; writers
never wait for it, other watchers go on, and re-watching from its last revision recovers."""

from __future__ import annotations

import asyncio

import pytest

from store.base import Event, Store, WatchOverflow

BUFFER = 8


async def test_slow_watcher_is_ended_alone_and_can_resume(open_backend) -> None:  # type: ignore[no-untyped-def]
    store: Store = open_backend(watch_buffer=BUFFER)
    first = await store.create("/registry/core/pods/ns/k0", b"v")
    slow = store.watch("/registry/core/pods/", after_revision=first.mod_revision - 1)
    assert (await anext(slow)).revision == first.mod_revision  # subscribed; now it stops reading

    fast_seen: asyncio.Queue[Event] = asyncio.Queue()

    async def fast_watch() -> None:
        async for event in store.watch("/registry/core/pods/", after_revision=first.mod_revision):
            fast_seen.put_nowait(event)

    fast = asyncio.create_task(fast_watch(), name="test-fast-watcher")
    writes = BUFFER * 3
    async with asyncio.timeout(30):
        for i in range(1, writes + 1):
            kv = await store.create(f"/registry/core/pods/ns/k{i}", b"v")
            assert (await fast_seen.get()).revision == kv.mod_revision  # fast keeps up

        with pytest.raises(WatchOverflow) as caught:
            await anext(slow)
        assert caught.value.last_revision == first.mod_revision
        assert not fast.done()

        resumed = store.watch("/registry/core/pods/", after_revision=caught.value.last_revision)
        replay = [(await anext(resumed)).revision for _ in range(writes)]
        assert replay == list(range(first.mod_revision + 1, first.mod_revision + writes + 1))
        await resumed.aclose()  # type: ignore[attr-defined]
    fast.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fast
