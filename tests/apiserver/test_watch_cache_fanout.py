"""The watch cache: one store watch fans out to many watchers; slow ones are cut off alone;
node-indexed watchers only see their node's pods; every event is serialised once."""

from __future__ import annotations

import asyncio
import json
import tracemalloc

import pytest

from api.registry import REGISTRY
from services.apiserver.predicate import Predicate
from services.apiserver.storage import ObjectStorage, encode
from services.apiserver.watchcache import CacheEvent, CompactObject, WatchCache, WatcherClosed
from store.memory import MemoryStore
from tests import factories
from tests.factories import Obj, container

PODS = REGISTRY.get("", "v1", "pods")
assert PODS is not None


def pod(name: str, node: str = "") -> Obj:
    placed = {"nodeName": node} if node else {}
    return factories.pod(name, container("c", "x"), namespace="default", **placed)


async def started_cache(store: MemoryStore, **kw: int) -> tuple[WatchCache, asyncio.Task[None]]:
    cache = WatchCache(store, PODS, **kw)
    task = asyncio.create_task(cache.run(), name="test-watch-cache")
    await cache.ready.wait()
    return cache, task


async def test_slow_watcher_is_closed_without_slowing_the_others() -> None:
    store = MemoryStore()
    cache, task = await started_cache(store, queue_size=3)
    storage = ObjectStorage(store, PODS)
    everything = Predicate.parse(PODS, namespace=None)
    slow = cache.watch_from(everything, after=cache.revision)
    fast = cache.watch_from(everything, after=cache.revision)
    assert slow is not None and fast is not None
    seen = []
    for i in range(6):
        created = await storage.create(pod(f"p{i}"))
        await cache.wait_until(int(created["metadata"]["resourceVersion"]))
        seen += [d.event.obj["metadata"]["name"] for d in await fast.next_batch(max_wait=1)]
    assert seen == [f"p{i}" for i in range(6)]
    assert slow.closed
    batch = await slow.next_batch(max_wait=0)  # what it had queued before it was cut off
    assert [d.event.obj["metadata"]["name"] for d in batch] == ["p0", "p1", "p2"]
    with pytest.raises(WatcherClosed, match="fell behind"):
        await slow.next_batch(max_wait=0)
    assert cache.watcher_count == 1
    cache.stop()
    task.cancel()


async def test_node_indexed_watchers_see_only_their_node_and_share_frames() -> None:
    store = MemoryStore()
    cache, task = await started_cache(store)
    storage = ObjectStorage(store, PODS)
    watchers = {}
    for n in range(50):
        pred = Predicate.parse(PODS, namespace=None, field_selector=f"spec.nodeName=node{n}")
        assert pred.index == ("spec.nodeName", f"node{n}")
        watchers[n] = cache.watch_from(pred, after=cache.revision)
    offered = 0
    original = type(watchers[0]).offer

    def counting_offer(self, event):  # type: ignore[no-untyped-def]
        nonlocal offered
        offered += 1
        return original(self, event)

    type(watchers[0]).offer = counting_offer  # type: ignore[method-assign]
    try:
        created = await storage.create(pod("a", node="node7"))
        await cache.wait_until(int(created["metadata"]["resourceVersion"]))
    finally:
        type(watchers[0]).offer = original  # type: ignore[method-assign]
    assert offered == 1  # only node7's watcher was even asked
    [delivery] = await watchers[7].next_batch(max_wait=1)
    assert delivery.type == "ADDED"
    assert await watchers[8].next_batch(max_wait=0) == []
    # the frame is built once per event and shared by every watcher that sends it
    other = cache.watch_from(Predicate.parse(PODS, namespace=None), after=0)
    assert other is not None
    [shared] = await other.next_batch(max_wait=0)
    assert shared.frame() is delivery.frame()
    cache.stop()
    task.cancel()


def test_a_version_served_by_conversion_is_serialised_once_per_event() -> None:
    v1 = REGISTRY.get("autoscaling", "v1", "horizontalpodautoscalers")
    v2 = REGISTRY.get("autoscaling", "v2", "horizontalpodautoscalers")
    assert v1 is not None and v1.conversion is not None and v2 is not None
    hpa = factories.horizontal_pod_autoscaler("web", target="web")
    hpa["metadata"]["resourceVersion"] = "5"
    event = CacheEvent(
        type="ADDED",
        key="/registry/autoscaling/horizontalpodautoscalers/x",
        current=CompactObject(v2, hpa),
        previous=None,
        revision=5,
    )
    frame, chunk = event.served(v1, "ADDED", from_prev=False)
    assert json.loads(frame)["object"]["apiVersion"] == "autoscaling/v1"
    assert chunk.endswith(frame + b"\r\n")
    # every later watcher of v1 gets the same bytes: converted and dumped once, not per watcher
    assert event.served(v1, "ADDED", from_prev=False)[0] is frame
    # the stored version's own frames are the shared ones
    assert event.served(v2, "ADDED", from_prev=False)[0] is event.frame("ADDED")


async def test_stopping_the_cache_ends_every_watch() -> None:
    store = MemoryStore()
    cache, task = await started_cache(store)
    watcher = cache.watch_from(Predicate.parse(PODS, namespace="default"), after=cache.revision)
    assert watcher is not None
    waiting = asyncio.create_task(watcher.next_batch(max_wait=60))
    await asyncio.sleep(0)
    cache.stop()
    with pytest.raises(WatcherClosed):
        await waiting
    task.cancel()


def test_a_cached_object_holds_its_json_without_the_encoders_slack() -> None:
    """orjson hands back its output in the buffer it grew (4 KiB for a 1 KiB pod); the cache
    keeps a copy of the JSON's own size, as the store's encoded values are kept."""
    obj = pod("web-0", node="node-1")
    obj["metadata"]["annotations"] = {"note": "x" * 1500}  # a pod's usual size, 1-2 KiB
    size = len(json.dumps(obj, separators=(",", ":")))
    tracemalloc.start()
    try:
        kept = [CompactObject(PODS, obj).json for _ in range(200)]
        stored = [encode(obj) for _ in range(200)]
        cached_bytes, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept[0]) == size
    assert cached_bytes / (len(kept) + len(stored)) < 1.25 * size
