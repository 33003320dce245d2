"""Compaction keeps a window: reads at or after R work and return the same answers as before;
older ones fail with Compacted; live values are never dropped.

Revisions are counted from ``origin``, the revision the store is at when the test starts (an
etcd member's history is shared by every test on it, and compacting it compacts for all: tests
run one at a time, and each compacts only history written after its own origin)."""

from __future__ import annotations

import asyncio

import pytest

from store.base import Compacted, KeyValue, Store


async def _build_history(store: Store, o: int) -> None:
    """Eight writes, at revisions ``o + 1`` to ``o + 8``."""
    await store.create("/registry/core/pods/ns/a", b"a1")  # 1
    await store.create("/registry/core/pods/ns/b", b"b1")  # 2
    await store.update("/registry/core/pods/ns/a", b"a2", expected_revision=o + 1)  # 3
    await store.delete("/registry/core/pods/ns/b")  # 4
    await store.create("/registry/core/pods/ns/c", b"c1")  # 5
    await store.update("/registry/core/pods/ns/a", b"a3", expected_revision=o + 3)  # 6
    await store.delete("/registry/core/pods/ns/c")  # 7
    await store.create("/registry/core/pods/ns/d", b"d1")  # 8


async def test_reads_at_or_after_the_compacted_revision_are_unchanged(
    store: Store, origin: int
) -> None:
    o = origin
    await _build_history(store, o)
    before = {
        rev: await store.list("/registry/core/pods/", revision=rev) for rev in range(o + 1, o + 9)
    }
    watch = store.watch("/registry/core/pods/", after_revision=o + 5)
    events_before = [e async for e in _take(watch, 3)]
    await store.compact(o + 5)
    assert await store.compacted_revision() == o + 5
    for rev in range(o + 5, o + 9):
        assert await store.list("/registry/core/pods/", revision=rev) == before[rev]
    assert [
        e async for e in _take(store.watch("/registry/core/pods/", after_revision=o + 5), 3)
    ] == events_before
    assert await store.get("/registry/core/pods/ns/a") == KeyValue(
        "/registry/core/pods/ns/a", b"a3", o + 1, o + 6
    )
    assert await store.current_revision() == o + 8


async def test_reads_before_the_compacted_revision_fail(store: Store, origin: int) -> None:
    await _build_history(store, origin)
    await store.compact(origin + 5)
    for rev in (origin + 1, origin + 4):
        with pytest.raises(Compacted) as caught:
            await store.list("/registry/core/pods/", revision=rev)
        assert caught.value.compacted == origin + 5
        with pytest.raises(Compacted):
            await anext(store.watch("/registry/core/pods/", after_revision=rev))


async def test_compacting_everything_keeps_live_values_and_new_writes_continue(
    store: Store, origin: int
) -> None:
    o = origin
    await _build_history(store, o)
    await store.compact(o + 8)
    now = await store.list("/registry/core/pods/")
    assert [(kv.key, kv.value) for kv in now.items] == [
        ("/registry/core/pods/ns/a", b"a3"),
        ("/registry/core/pods/ns/d", b"d1"),
    ]
    # keys whose tombstones were compacted can be created again; revisions go on from o + 8
    again = await store.create("/registry/core/pods/ns/b", b"b2")
    assert again.mod_revision == o + 9
    await store.update("/registry/core/pods/ns/a", b"a4", expected_revision=o + 6)
    assert [
        e.revision
        async for e in _take(store.watch("/registry/core/pods/", after_revision=o + 8), 2)
    ] == [o + 9, o + 10]


async def test_compaction_is_idempotent_and_refuses_the_future(store: Store, origin: int) -> None:
    await _build_history(store, origin)
    await store.compact(origin + 5)
    await store.compact(origin + 3)  # older than the window: nothing to do
    assert await store.compacted_revision() == origin + 5
    with pytest.raises(ValueError):
        await store.compact(origin + 9)


async def test_compaction_in_batches_with_writers_running(store: Store) -> None:
    """Enough rows for several compaction batches, compacted while updates keep landing."""
    keys = 40
    revisions = [
        (await store.create(f"/registry/core/pods/ns/p{i:02}", b"0")).mod_revision
        for i in range(keys)
    ]
    for round_ in range(1, 31):
        written = await asyncio.gather(
            *(
                store.update(
                    f"/registry/core/pods/ns/p{i:02}",
                    str(round_).encode(),
                    expected_revision=revisions[i],
                )
                for i in range(keys)
            )
        )
        revisions = [kv.mod_revision for kv in written]
    target = await store.current_revision()
    snapshot = await store.list("/registry/core/pods/", revision=target)

    async def keep_writing() -> None:
        for i in range(keys):
            kv = await store.get(f"/registry/core/pods/ns/p{i:02}")
            assert kv is not None
            await store.update(kv.key, b"after", expected_revision=kv.mod_revision)

    await asyncio.gather(store.compact(target), keep_writing())
    assert await store.list("/registry/core/pods/", revision=target) == snapshot
    later = await store.list("/registry/core/pods/")
    assert [kv.value for kv in later.items] == [b"after"] * keys


async def _take(watch, count: int):  # type: ignore[no-untyped-def]
    async with asyncio.timeout(10):
        for _ in range(count):
            yield await anext(watch)
    await watch.aclose()
