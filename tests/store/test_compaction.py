"""Compaction keeps a window: reads at or after R work and return the same answers as before;
older ones fail with Compacted; live values are never dropped."""

from __future__ import annotations

import asyncio

import pytest

from store.base import Compacted, KeyValue, Store


async def _build_history(store: Store) -> None:
    await store.create("/registry/pods/ns/a", b"a1")  # 1
    await store.create("/registry/pods/ns/b", b"b1")  # 2
    await store.update("/registry/pods/ns/a", b"a2", expected_revision=1)  # 3
    await store.delete("/registry/pods/ns/b")  # 4
    await store.create("/registry/pods/ns/c", b"c1")  # 5
    await store.update("/registry/pods/ns/a", b"a3", expected_revision=3)  # 6
    await store.delete("/registry/pods/ns/c")  # 7
    await store.create("/registry/pods/ns/d", b"d1")  # 8


async def test_reads_at_or_after_the_compacted_revision_are_unchanged(store: Store) -> None:
    await _build_history(store)
    before = {rev: await store.list("/registry/pods/", revision=rev) for rev in range(1, 9)}
    events_before = [e async for e in _take(store.watch("/registry/pods/", after_revision=5), 3)]
    await store.compact(5)
    assert await store.compacted_revision() == 5
    for rev in range(5, 9):
        assert await store.list("/registry/pods/", revision=rev) == before[rev]
    assert [
        e async for e in _take(store.watch("/registry/pods/", after_revision=5), 3)
    ] == events_before
    assert await store.get("/registry/pods/ns/a") == KeyValue("/registry/pods/ns/a", b"a3", 1, 6)
    assert await store.current_revision() == 8


async def test_reads_before_the_compacted_revision_fail(store: Store) -> None:
    await _build_history(store)
    await store.compact(5)
    for rev in (1, 4):
        with pytest.raises(Compacted) as caught:
            await store.list("/registry/pods/", revision=rev)
        assert caught.value.compacted == 5
        with pytest.raises(Compacted):
            await anext(store.watch("/registry/pods/", after_revision=rev))


async def test_compacting_everything_keeps_live_values_and_new_writes_continue(
    store: Store,
) -> None:
    await _build_history(store)
    await store.compact(8)
    now = await store.list("/registry/pods/")
    assert [(kv.key, kv.value) for kv in now.items] == [
        ("/registry/pods/ns/a", b"a3"),
        ("/registry/pods/ns/d", b"d1"),
    ]
    # keys whose tombstones were compacted can be created again; revisions go on from 8
    again = await store.create("/registry/pods/ns/b", b"b2")
    assert again.mod_revision == 9
    await store.update("/registry/pods/ns/a", b"a4", expected_revision=6)
    assert [
        e.revision async for e in _take(store.watch("/registry/pods/", after_revision=8), 2)
    ] == [9, 10]


async def test_compaction_is_idempotent_and_refuses_the_future(store: Store) -> None:
    await _build_history(store)
    await store.compact(5)
    await store.compact(3)  # older than the window: nothing to do
    assert await store.compacted_revision() == 5
    with pytest.raises(ValueError):
        await store.compact(9)


async def test_compaction_in_batches_with_writers_running(store: Store) -> None:
    """Enough rows for several compaction batches, compacted while updates keep landing."""
    keys = 40
    for i in range(keys):
        await store.create(f"/registry/pods/ns/p{i:02}", b"0")
    for round_ in range(1, 31):
        await asyncio.gather(
            *(
                store.update(
                    f"/registry/pods/ns/p{i:02}",
                    str(round_).encode(),
                    expected_revision=(round_ - 1) * keys + i + 1,
                )
                for i in range(keys)
            )
        )
    target = await store.current_revision()
    snapshot = await store.list("/registry/pods/", revision=target)

    async def keep_writing() -> None:
        for i in range(keys):
            kv = await store.get(f"/registry/pods/ns/p{i:02}")
            assert kv is not None
            await store.update(kv.key, b"after", expected_revision=kv.mod_revision)

    await asyncio.gather(store.compact(target), keep_writing())
    assert await store.list("/registry/pods/", revision=target) == snapshot
    later = await store.list("/registry/pods/")
    assert [kv.value for kv in later.items] == [b"after"] * keys


async def _take(watch, count: int):  # type: ignore[no-untyped-def]
    async with asyncio.timeout(10):
        for _ in range(count):
            yield await anext(watch)
    await watch.aclose()
