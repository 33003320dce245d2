"""A guaranteed update takes its first guess of the current object from the watch cache (no
store read when the cache is current), and never answers from a guess the store has left: a
lost compare-and-swap, a refusal and a no-op are each decided again on the stored state.

The cache here is real and loaded, then frozen (its feed stopped) while the store moves on: the
state any lagging cache is in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from api.errors import Conflict, NotFound
from api.registry import REGISTRY
from services.apiserver.context import ApiContext, ServerOptions
from services.apiserver.storage import ObjectStorage, check_rv_precondition
from services.apiserver.watchcache import WatchCache
from store.base import KeyValue
from store.memory import MemoryStore
from tests.factories import Obj

CONFIGMAPS = REGISTRY.get("", "v1", "configmaps")
assert CONFIGMAPS is not None


class CountingStore(MemoryStore):
    """A memory store that counts its point reads."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    async def get(self, key: str) -> KeyValue | None:
        self.gets += 1
        return await super().get(key)


@dataclass
class Cluster:
    store: CountingStore
    storage: ObjectStorage
    cache: WatchCache
    feed: asyncio.Task[None]

    async def freeze(self) -> None:
        """Stop the cache's feed: from here on it keeps the state it had."""
        self.feed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.feed

    async def caught_up(self, rv: str) -> None:
        await self.cache.wait_until(int(rv))


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    store = CountingStore()
    ctx = ApiContext(store=store, registry=REGISTRY, options=ServerOptions())
    cache = ctx.caches[("", "configmaps")] = WatchCache(store, CONFIGMAPS)
    feed = asyncio.create_task(cache.run(), name="test-watch-cache")
    await cache.ready.wait()
    yield Cluster(store, ctx.storage(CONFIGMAPS), cache, feed)
    feed.cancel()
    await asyncio.gather(feed, return_exceptions=True)


def configmap(**data: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default"},
        "data": data,
    }


def setting(key: str, value: str):  # type: ignore[no-untyped-def]
    async def mutate(obj: Obj) -> Obj:
        obj["data"][key] = value
        return obj

    return mutate


async def test_a_current_cache_spares_the_store_read(cluster: Cluster) -> None:
    created = await cluster.storage.create(configmap(a="1"))
    await cluster.caught_up(created["metadata"]["resourceVersion"])
    reads = cluster.store.gets

    result = await cluster.storage.guaranteed_update("default", "cm", setting("b", "2"))

    assert cluster.store.gets == reads
    assert result.obj["data"] == {"a": "1", "b": "2"}
    assert (await cluster.storage.get("default", "cm"))["data"] == {"a": "1", "b": "2"}


async def test_a_stale_guess_loses_the_swap_and_the_update_is_made_on_the_stored_object(
    cluster: Cluster,
) -> None:
    created = await cluster.storage.create(configmap(a="1"))
    await cluster.caught_up(created["metadata"]["resourceVersion"])
    await cluster.freeze()
    await cluster.storage.guaranteed_update("default", "cm", setting("a", "2"))  # cache misses it
    seen: list[str] = []

    async def add_b(obj: Obj) -> Obj:
        seen.append(obj["data"]["a"])
        obj["data"]["b"] = "3"
        return obj

    result = await cluster.storage.guaranteed_update("default", "cm", add_b)

    assert seen == ["1", "2"]  # the guess, then the stored state
    assert result.obj["data"] == {"a": "2", "b": "3"}
    assert (await cluster.storage.get("default", "cm"))["data"] == {"a": "2", "b": "3"}


async def test_a_refused_guess_is_decided_again_on_the_stored_object(cluster: Cluster) -> None:
    created = await cluster.storage.create(configmap(a="1"))
    await cluster.caught_up(created["metadata"]["resourceVersion"])
    await cluster.freeze()
    moved = await cluster.storage.guaranteed_update("default", "cm", setting("a", "2"))
    latest = moved.obj["metadata"]["resourceVersion"]

    async def only_at_latest(obj: Obj) -> Obj:  # a client's resourceVersion precondition
        check_rv_precondition(cluster.storage, obj, latest)
        obj["data"]["a"] = "3"
        return obj

    result = await cluster.storage.guaranteed_update("default", "cm", only_at_latest)
    assert result.obj["data"] == {"a": "3"}

    with pytest.raises(Conflict):  # refused on the stored state too: the 409 stands
        await cluster.storage.guaranteed_update("default", "cm", only_at_latest)


async def test_no_change_to_a_stale_guess_answers_the_stored_object(cluster: Cluster) -> None:
    created = await cluster.storage.create(configmap(a="1"))
    await cluster.caught_up(created["metadata"]["resourceVersion"])
    await cluster.freeze()
    moved = await cluster.storage.guaranteed_update("default", "cm", setting("a", "2"))

    async def nothing(obj: Obj) -> None:
        return None

    async def same(obj: Obj) -> Obj:
        return obj

    for mutate in (nothing, same):
        result = await cluster.storage.guaranteed_update("default", "cm", mutate)
        assert not result.changed
        assert result.obj["data"] == {"a": "2"}
        assert result.obj["metadata"]["resourceVersion"] == moved.obj["metadata"]["resourceVersion"]


async def test_an_object_deleted_behind_the_cache_is_not_found(cluster: Cluster) -> None:
    created = await cluster.storage.create(configmap(a="1"))
    await cluster.caught_up(created["metadata"]["resourceVersion"])
    await cluster.freeze()
    await cluster.storage.delete(
        "default", "cm", expected_rv=int(created["metadata"]["resourceVersion"])
    )

    with pytest.raises(NotFound):
        await cluster.storage.guaranteed_update("default", "cm", setting("a", "2"))
