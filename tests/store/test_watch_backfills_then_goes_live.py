"""A watch from an old revision replays history, then continues live, with no gap and no
duplicate at the seam — even while writes land during the back-fill."""

from __future__ import annotations

import asyncio

from store.base import Event, EventType, Store
from store.watchhub import HISTORY_PAGE


async def test_watch_from_an_old_revision_backfills_then_goes_live(
    store: Store, origin: int
) -> None:
    history = HISTORY_PAGE * 2 + 17  # spans several history pages
    created = [(await store.create(f"/registry/core/pods/ns/p{i}", b"v")) for i in range(history)]
    await store.create("/registry/core/nodes/n1", b"elsewhere")
    after = origin + 5
    live = 300
    expected = [kv.mod_revision for kv in created if kv.mod_revision > after]
    seen: list[Event] = []

    async with asyncio.timeout(60):
        watch = store.watch("/registry/core/pods/", after_revision=after)
        seen.append(await anext(watch))
        # writes landing while the back-fill is still being read
        writes = [
            asyncio.create_task(
                store.update(
                    f"/registry/core/pods/ns/p{i}", b"w", expected_revision=created[i].mod_revision
                ),
                name=f"test-update-{i}",
            )
            for i in range(live)
        ]
        results = await asyncio.gather(*writes)
        expected += sorted(kv.mod_revision for kv in results)
        async for event in watch:
            seen.append(event)
            if len(seen) == len(expected):
                break
        # nothing else is pending: the next event is the next write, not a repeat
        sentinel = await store.create("/registry/core/pods/ns/sentinel", b"v")
        assert (await anext(watch)).revision == sentinel.mod_revision
        await watch.aclose()  # type: ignore[attr-defined]

    assert [e.revision for e in seen] == expected
    assert all(e.kv.key.startswith("/registry/core/pods/") for e in seen)
    backfilled = history - 5
    assert [e.type for e in seen[:backfilled]] == [EventType.ADDED] * backfilled
    assert {e.type for e in seen[backfilled:]} == {EventType.MODIFIED}


async def test_watch_from_the_current_revision_sees_only_new_writes(store: Store) -> None:
    await store.create("/registry/core/pods/ns/old", b"v")
    watch = store.watch("/registry/core/pods/", after_revision=await store.current_revision())
    next_event = asyncio.create_task(anext(watch), name="test-next-event")  # type: ignore[arg-type]
    created = await store.create("/registry/core/pods/ns/new", b"v")
    async with asyncio.timeout(10):
        event = await next_event
    assert (event.type, event.kv, event.prev) == (EventType.ADDED, created, None)
    await watch.aclose()  # type: ignore[attr-defined]


async def test_closing_a_watch_releases_it_and_leaves_others_running(
    store: Store, origin: int
) -> None:
    first = store.watch("/registry/core/pods/", after_revision=origin)
    second = store.watch("/registry/core/pods/", after_revision=origin)
    await store.create("/registry/core/pods/ns/a", b"v")
    assert (await anext(first)).revision == origin + 1
    assert (await anext(second)).revision == origin + 1
    await first.aclose()  # type: ignore[attr-defined]
    await store.create("/registry/core/pods/ns/b", b"v")
    async with asyncio.timeout(10):
        assert (await anext(second)).revision == origin + 2
    await second.aclose()  # type: ignore[attr-defined]
