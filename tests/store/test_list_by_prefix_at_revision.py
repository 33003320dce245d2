"""List by prefix: key order, prefix boundaries, older revisions, paging — on every backend."""

from __future__ import annotations

import pytest

from store.base import Compacted, Store


async def _keys(store: Store, prefix: str, **kwargs: object) -> list[str]:
    result = await store.list(prefix, **kwargs)  # type: ignore[arg-type]
    return [kv.key for kv in result.items]


async def test_list_returns_only_keys_under_the_prefix_in_key_order(store: Store) -> None:
    for key in [
        "/registry/core/pods/ns/b",
        "/registry/core/pods/ns/a",
        "/registry/core/pods/other/c",
        "/registry/core/podsecurity/x",
        "/registry/core/pods0",
        "/registry/core/nodes/n1",
    ]:
        await store.create(key, b"v")
    assert await _keys(store, "/registry/core/pods/") == [
        "/registry/core/pods/ns/a",
        "/registry/core/pods/ns/b",
        "/registry/core/pods/other/c",
    ]
    assert await _keys(store, "/registry/core/pods/ns/") == [
        "/registry/core/pods/ns/a",
        "/registry/core/pods/ns/b",
    ]
    assert await _keys(store, "/registry/core/services/") == []
    assert len(await _keys(store, "")) == 6


async def test_list_reports_the_revision_it_was_read_at(store: Store, origin: int) -> None:
    assert (await store.list("/registry/core/pods/")).revision == origin
    await store.create("/registry/core/pods/ns/a", b"v")
    await store.create("/registry/core/nodes/n1", b"v")
    result = await store.list("/registry/core/pods/")
    assert result.revision == origin + 2
    assert [kv.mod_revision for kv in result.items] == [origin + 1]


async def test_list_at_an_older_revision_reads_the_history(store: Store, origin: int) -> None:
    o = origin
    await store.create("/registry/core/pods/ns/a", b"a1")  # 1
    await store.create("/registry/core/pods/ns/b", b"b1")  # 2
    await store.update("/registry/core/pods/ns/a", b"a2", expected_revision=o + 1)  # 3
    await store.delete("/registry/core/pods/ns/b")  # 4
    await store.create("/registry/core/pods/ns/c", b"c1")  # 5

    def view(result: object) -> list[tuple[str, bytes, int]]:
        items = result.items  # type: ignore[attr-defined]
        return [(kv.key, kv.value, kv.mod_revision - o) for kv in items]

    at2 = await store.list("/registry/core/pods/", revision=o + 2)
    assert at2.revision == o + 2
    assert view(at2) == [
        ("/registry/core/pods/ns/a", b"a1", 1),
        ("/registry/core/pods/ns/b", b"b1", 2),
    ]
    at3 = await store.list("/registry/core/pods/", revision=o + 3)
    assert view(at3) == [
        ("/registry/core/pods/ns/a", b"a2", 3),
        ("/registry/core/pods/ns/b", b"b1", 2),
    ]
    at4 = await store.list("/registry/core/pods/", revision=o + 4)
    assert view(at4) == [("/registry/core/pods/ns/a", b"a2", 3)]
    now = await store.list("/registry/core/pods/")
    assert view(now) == [
        ("/registry/core/pods/ns/a", b"a2", 3),
        ("/registry/core/pods/ns/c", b"c1", 5),
    ]


async def test_list_at_a_future_revision_is_served_at_the_current_one(
    store: Store, origin: int
) -> None:
    await store.create("/registry/core/pods/ns/a", b"v")
    result = await store.list("/registry/core/pods/", revision=origin + 99)
    assert result.revision == origin + 1
    assert [kv.key for kv in result.items] == ["/registry/core/pods/ns/a"]


async def test_limit_and_start_after_page_through_a_consistent_revision(store: Store) -> None:
    for i in range(7):
        await store.create(f"/registry/core/pods/ns/p{i}", b"v")
    await store.delete("/registry/core/pods/ns/p3")
    first = await store.list("/registry/core/pods/", limit=3)
    assert [kv.key[-2:] for kv in first.items] == ["p0", "p1", "p2"]
    assert first.more
    # a write between pages must not show up in a list pinned to the first page's revision
    await store.create("/registry/core/pods/ns/p25", b"late")
    pages = [first]
    while pages[-1].more:
        pages.append(
            await store.list(
                "/registry/core/pods/",
                revision=first.revision,
                start_after=pages[-1].items[-1].key,
                limit=3,
            )
        )
    keys = [kv.key[-2:] for page in pages for kv in page.items]
    assert keys == ["p0", "p1", "p2", "p4", "p5", "p6"]
    assert [page.revision for page in pages] == [first.revision] * len(pages)
    assert not pages[-1].more
    exact = await store.list("/registry/core/pods/", limit=6, revision=first.revision)
    assert len(exact.items) == 6 and not exact.more


async def test_start_after_before_the_prefix_is_ignored(store: Store) -> None:
    await store.create("/registry/core/pods/ns/a", b"v")
    assert await _keys(store, "/registry/core/pods/", start_after="/registry/core/nodes/zz") == [
        "/registry/core/pods/ns/a"
    ]


async def test_list_below_the_compacted_revision_fails(store: Store, origin: int) -> None:
    for i in range(4):
        await store.create(f"/registry/core/pods/ns/p{i}", b"v")
    await store.compact(origin + 3)
    with pytest.raises(Compacted) as caught:
        await store.list("/registry/core/pods/", revision=origin + 2)
    assert (caught.value.requested, caught.value.compacted) == (origin + 2, origin + 3)
    assert len((await store.list("/registry/core/pods/", revision=origin + 3)).items) == 3
