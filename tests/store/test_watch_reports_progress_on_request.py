"""``request_progress()``: every watch opened with ``on_progress`` reports a revision at least
that of every write acknowledged before the request — though the latest writes were under
another prefix — and reports it in stream order, only after the events buffered ahead of it
were taken. A watch without ``on_progress`` never sees one. Memory and SQLite answer at once;
etcd's JSON gateway cannot ask and says so (its periodic notifications are
``test_etcd_watch_reports_progress.py``'s)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from store.base import Event, Store

ASKABLE = "memory and SQLite answer progress requests; etcd's gateway cannot ask"


def progress_log() -> tuple[list[int], asyncio.Event, Callable[[int], None]]:
    """The revisions reported, an event set at each report, and the callback that does both."""
    reported: list[int] = []
    arrived = asyncio.Event()

    def on_progress(revision: int) -> None:
        reported.append(revision)
        arrived.set()

    return reported, arrived, on_progress


async def next_event(watch: AsyncIterator[Event]) -> Event:
    async with asyncio.timeout(10):
        return await anext(watch)


async def test_progress_comes_behind_the_buffered_events_and_covers_writes_elsewhere(
    backend: str, store: Store
) -> None:
    if backend == "etcd":
        pytest.skip(ASKABLE)
    reported, arrived, on_progress = progress_log()
    watch = store.watch(
        "/a/", after_revision=await store.current_revision(), on_progress=on_progress
    )
    first = asyncio.create_task(next_event(watch), name="test-first-event")
    a1 = await store.create("/a/1", b"v")
    assert (await first).revision == a1.mod_revision  # the watch is live from here
    a2 = await store.create("/a/2", b"v")
    a3 = await store.create("/a/3", b"v")
    elsewhere = await store.create("/b/1", b"v")

    assert await store.request_progress() is True
    assert (await next_event(watch)).revision == a2.mod_revision
    assert (await next_event(watch)).revision == a3.mod_revision
    assert reported == []  # the marker is behind both events, not reported before them

    waiting = asyncio.create_task(next_event(watch), name="test-after-the-marker")
    try:
        async with asyncio.timeout(10):
            await arrived.wait()
    finally:
        waiting.cancel()
    assert reported == [elsewhere.mod_revision]


async def test_progress_covers_writes_made_while_nothing_watched(
    backend: str, store: Store
) -> None:
    if backend == "etcd":
        pytest.skip(ASKABLE)
    await store.create("/a/1", b"v")
    last = await store.create("/b/1", b"v")  # no watch open: published to nobody
    reported, arrived, on_progress = progress_log()
    watch = store.watch("/a/", after_revision=0, on_progress=on_progress)
    await next_event(watch)  # from history; the watch is subscribed before reading it

    assert await store.request_progress() is True
    waiting = asyncio.create_task(next_event(watch), name="test-after-the-marker")
    try:
        async with asyncio.timeout(10):
            await arrived.wait()
    finally:
        waiting.cancel()
    assert reported == [last.mod_revision]


async def test_a_watch_without_on_progress_sees_only_events(backend: str, store: Store) -> None:
    if backend == "etcd":
        pytest.skip(ASKABLE)
    reported, arrived, on_progress = progress_log()
    start = await store.current_revision()
    plain = store.watch("/a/", after_revision=start)
    told = store.watch("/a/", after_revision=start, on_progress=on_progress)
    firsts = [asyncio.create_task(next_event(w), name="test-first") for w in (plain, told)]
    a1 = await store.create("/a/1", b"v")
    assert [(await f).revision for f in firsts] == [a1.mod_revision] * 2

    assert await store.request_progress() is True
    a2 = await store.create("/a/2", b"v")
    assert (await next_event(plain)).revision == a2.mod_revision
    assert (await next_event(told)).revision == a2.mod_revision
    assert reported == [a1.mod_revision]  # the watch that asked heard it, in its place
    assert arrived.is_set()


async def test_etcd_cannot_ask_and_its_watch_goes_on(backend: str, store: Store) -> None:
    if backend != "etcd":
        pytest.skip("only etcd's gateway cannot ask")
    _, _, on_progress = progress_log()
    watch = store.watch(
        "/a/", after_revision=await store.current_revision(), on_progress=on_progress
    )
    first = asyncio.create_task(next_event(watch), name="test-first-event")
    a1 = await store.create("/a/1", b"v")
    assert (await first).revision == a1.mod_revision

    assert await store.request_progress() is False
    a2 = await store.create("/a/2", b"v")
    assert (await next_event(watch)).revision == a2.mod_revision
