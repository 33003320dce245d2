"""Create, get, update, delete and their compare-and-swap errors, on every backend."""

from __future__ import annotations

import pytest

from store.base import (
    KeyExists,
    KeyNotFound,
    KeyValue,
    RevisionMismatch,
    Store,
    StoreClosed,
)


async def test_every_backend_satisfies_the_store_protocol(store: Store) -> None:
    assert isinstance(store, Store)


async def test_create_then_get_returns_the_value_at_its_revision(store: Store, origin: int) -> None:
    created = await store.create("/registry/core/pods/default/a", b"one")
    assert created == KeyValue("/registry/core/pods/default/a", b"one", origin + 1, origin + 1)
    assert await store.get("/registry/core/pods/default/a") == created
    assert await store.get("/registry/core/pods/default/missing") is None
    assert await store.current_revision() == origin + 1


async def test_an_empty_memory_or_sqlite_store_starts_at_revision_zero(
    backend: str, store: Store
) -> None:
    """Only the embedded backends count from 0; etcd's revisions are its own, shared by every
    prefix on the member."""
    if backend == "etcd":
        pytest.skip("an etcd store starts at the member's revision")
    assert await store.current_revision() == 0


async def test_create_of_a_live_key_fails_with_key_exists(store: Store, origin: int) -> None:
    await store.create("/registry/core/pods/default/a", b"one")
    with pytest.raises(KeyExists) as caught:
        await store.create("/registry/core/pods/default/a", b"two")
    assert caught.value.key == "/registry/core/pods/default/a"
    assert (await store.get("/registry/core/pods/default/a")) == KeyValue(
        "/registry/core/pods/default/a", b"one", origin + 1, origin + 1
    )


async def test_update_with_the_read_revision_replaces_the_value(store: Store, origin: int) -> None:
    created = await store.create("/registry/core/pods/default/a", b"one")
    updated = await store.update(
        "/registry/core/pods/default/a", b"two", expected_revision=created.mod_revision
    )
    assert updated == KeyValue("/registry/core/pods/default/a", b"two", origin + 1, origin + 2)
    assert await store.get("/registry/core/pods/default/a") == updated


async def test_update_with_a_stale_revision_fails_carrying_the_current_value(store: Store) -> None:
    created = await store.create("/registry/core/pods/default/a", b"one")
    current = await store.update(
        "/registry/core/pods/default/a", b"two", expected_revision=created.mod_revision
    )
    with pytest.raises(RevisionMismatch) as caught:
        await store.update(
            "/registry/core/pods/default/a", b"three", expected_revision=created.mod_revision
        )
    assert caught.value.expected == created.mod_revision
    assert caught.value.current == current
    assert await store.get("/registry/core/pods/default/a") == current


async def test_update_or_delete_of_a_missing_key_fails_with_key_not_found(
    store: Store, origin: int
) -> None:
    with pytest.raises(KeyNotFound):
        await store.update("/registry/core/pods/default/a", b"x", expected_revision=origin + 1)
    with pytest.raises(KeyNotFound):
        await store.delete("/registry/core/pods/default/a")


async def test_delete_returns_the_last_value_stamped_with_the_deletion_revision(
    store: Store, origin: int
) -> None:
    await store.create("/registry/core/pods/default/a", b"one")
    await store.update("/registry/core/pods/default/a", b"two", expected_revision=origin + 1)
    deleted = await store.delete("/registry/core/pods/default/a", expected_revision=origin + 2)
    assert deleted == KeyValue("/registry/core/pods/default/a", b"two", origin + 1, origin + 3)
    assert await store.get("/registry/core/pods/default/a") is None
    with pytest.raises(KeyNotFound):
        await store.update("/registry/core/pods/default/a", b"x", expected_revision=origin + 3)
    with pytest.raises(KeyNotFound):
        await store.delete("/registry/core/pods/default/a")


async def test_delete_with_a_stale_revision_fails_and_keeps_the_key(store: Store) -> None:
    created = await store.create("/registry/core/pods/default/a", b"one")
    current = await store.update(
        "/registry/core/pods/default/a", b"two", expected_revision=created.mod_revision
    )
    with pytest.raises(RevisionMismatch) as caught:
        await store.delete("/registry/core/pods/default/a", expected_revision=created.mod_revision)
    assert caught.value.current == current
    assert await store.get("/registry/core/pods/default/a") == current


async def test_a_deleted_key_can_be_created_again_as_a_new_incarnation(
    store: Store, origin: int
) -> None:
    await store.create("/registry/core/pods/default/a", b"one")
    await store.delete("/registry/core/pods/default/a")
    again = await store.create("/registry/core/pods/default/a", b"again")
    assert again == KeyValue("/registry/core/pods/default/a", b"again", origin + 3, origin + 3)


async def test_every_write_takes_the_next_revision_and_failures_take_none(
    store: Store, origin: int
) -> None:
    revisions = []
    for i in range(5):
        revisions.append((await store.create(f"/registry/core/pods/ns/p{i}", b"v")).mod_revision)
        with pytest.raises(KeyExists):
            await store.create(f"/registry/core/pods/ns/p{i}", b"v")
    revisions.append(
        (
            await store.update("/registry/core/pods/ns/p0", b"w", expected_revision=revisions[0])
        ).mod_revision
    )
    with pytest.raises(RevisionMismatch):
        await store.update("/registry/core/pods/ns/p0", b"w", expected_revision=revisions[0])
    revisions.append((await store.delete("/registry/core/pods/ns/p1")).mod_revision)
    assert revisions == list(range(origin + 1, origin + 8))
    assert await store.current_revision() == origin + 7


async def test_values_are_opaque_bytes(store: Store) -> None:
    value = bytes(range(256)) * 3
    await store.create("/registry/core/configmaps/ns/binary", value)
    stored = await store.get("/registry/core/configmaps/ns/binary")
    assert stored is not None and stored.value == value


async def test_after_close_operations_fail_and_watches_end_with_store_closed(
    store: Store, origin: int
) -> None:
    await store.create("/registry/core/pods/ns/a", b"v")
    watch = store.watch("/registry/core/pods/", after_revision=origin)
    assert (await anext(watch)).revision == origin + 1
    await store.close()
    with pytest.raises(StoreClosed):
        await anext(watch)
    with pytest.raises(StoreClosed):
        await store.create("/registry/core/pods/ns/b", b"v")
    with pytest.raises(StoreClosed):
        await store.get("/registry/core/pods/ns/a")
