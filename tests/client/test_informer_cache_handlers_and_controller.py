"""The informer's indexes (namespace, spec.nodeName, custom), handler replay for late handlers,
resync from the cache (never a relist), and the Controller runner's queue contract — against a
real apiserver app on loopback, in virtual time."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from client.cache import object_key, split_key
from client.controller import Controller
from client.informer import Informer
from client.ratelimit import ItemExponentialRateLimiter
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.apiserver.app import make_app
from services.apiserver.context import ServerOptions
from tests.client.ledger import PODS, Ledger, pod, sentinel

pytestmark = [pytest.mark.looptime, pytest.mark.timeout(60)]
ServerFactory = Callable[..., Awaitable[TestServer]]


@pytest.fixture
async def client(aiohttp_server: ServerFactory) -> Any:
    server = await aiohttp_server(make_app(ServerOptions(store_url="memory://")))
    async with ApiClient(server=str(server.make_url("")).rstrip("/")) as c:
        yield c


def on_node(
    name: str, node: str, *, namespace: str = "default", app: str = "web"
) -> dict[str, Any]:
    body = pod(name, namespace)
    body["spec"]["nodeName"] = node
    body["metadata"]["labels"]["app"] = app
    return body


async def test_indexes_answer_by_namespace_node_and_custom_function(client: ApiClient) -> None:
    assert PODS is not None
    await client.create(PODS, on_node("a", "node1"))
    await client.create(PODS, on_node("b", "node2", app="db"))
    await client.create(PODS, on_node("c", "node1", namespace="kube-system", app="db"))
    informer = Informer(
        client, PODS, indexers={"app": lambda o: [o["metadata"].get("labels", {}).get("app", "")]}
    )
    ledger = Ledger(informer)
    task = informer.start()
    try:
        await informer.wait_synced()
        assert informer.has_synced
        names = lambda objs: sorted(o["metadata"]["name"] for o in objs)  # noqa: E731
        assert names(informer.by_index("nodeName", "node1")) == ["a", "c"]
        assert names(informer.by_index("namespace", "kube-system")) == ["c"]
        assert names(informer.by_index("app", "db")) == ["b", "c"]
        # an index follows updates and deletes
        await client.delete(PODS, "a", namespace="default", grace_period_seconds=0)
        await client.create(PODS, on_node("d", "node1"))
        await sentinel(client, ledger, "s")
        assert names(informer.by_index("nodeName", "node1")) == ["c", "d"]
        assert informer.get("kube-system/c") is not None and informer.get("default/a") is None
        assert split_key("kube-system/c") == ("kube-system", "c") and split_key("node1") == (
            None,
            "node1",
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_late_handler_gets_adds_for_the_cache_and_resync_replays_without_relisting(
    client: ApiClient,
) -> None:
    assert PODS is not None
    for i in range(3):
        await client.create(PODS, pod(f"p{i}"))
    informer = Informer(client, PODS, resync_period=30.0)
    task = informer.start()
    try:
        await informer.wait_synced()
        seen: Counter[str] = Counter()
        resynced = asyncio.Event()

        def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:
            seen["update"] += 1
            if old is new and seen["update"] == 6:
                resynced.set()

        informer.add_handler(on_add=lambda o: seen.update(["add"]), on_update=on_update)
        assert seen["add"] == 3, "a handler added after sync is told about every cached object"
        await resynced.wait()  # two resync periods: 2 x 3 replays from the cache
        assert informer.reflector.lists == 1, "resync never relists"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_on_change_hears_adds_updates_and_deletes_with_the_latest_object(
    client: ApiClient,
) -> None:
    assert PODS is not None
    informer = Informer(client, PODS)
    with pytest.raises(TypeError):
        informer.add_handler(on_change=print, on_add=print)
    changes: list[tuple[str, str]] = []
    heard_four = asyncio.Event()

    def on_change(obj: dict[str, Any]) -> None:
        changes.append((obj["metadata"]["name"], obj["metadata"]["labels"]["app"]))
        if len(changes) == 4:
            heard_four.set()

    informer.add_handler(on_change=on_change)
    task = informer.start()
    try:
        await informer.wait_synced()
        created = await client.create(PODS, on_node("a", "node1"))
        created["metadata"]["labels"]["app"] = "db"
        updated = await client.update(PODS, created)
        updated["metadata"]["labels"]["app"] = "gone"
        await client.update(PODS, updated)
        await client.delete(PODS, "a", namespace="default", grace_period_seconds=0)
        await heard_four.wait()  # add, update, update, delete
        assert changes == [("a", "web"), ("a", "db"), ("a", "gone"), ("a", "gone")]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_controller_reconciles_each_key_once_at_a_time_retries_and_drains(
    client: ApiClient,
) -> None:
    assert PODS is not None
    informer = Informer(client, PODS)
    queue: WorkQueue[str] = WorkQueue(
        name="pods", rate_limiter=ItemExponentialRateLimiter(base=1.0, cap=4.0)
    )
    informer.add_handler(
        on_add=lambda o: queue.add(object_key(o)),
        on_update=lambda old, new: queue.add(object_key(new)),
        on_delete=lambda o: queue.add(object_key(o)),
    )
    active: set[str] = set()
    overlaps: list[str] = []
    attempts: Counter[str] = Counter()
    converged = asyncio.Event()

    async def reconcile(key: str) -> float | None:
        if key in active:
            overlaps.append(key)
        active.add(key)
        try:
            attempts[key] += 1
            await asyncio.sleep(0.5)  # a slow write, in virtual time
            if key == "default/flaky" and attempts[key] < 3:
                raise RuntimeError("apiserver said no")
            if key == "default/later" and attempts[key] == 1:
                return 10.0  # "check again in 10 s"
            if attempts["default/flaky"] >= 3 and attempts["default/later"] >= 2:
                converged.set()
            return None
        finally:
            active.discard(key)

    controller = Controller(
        name="test", queue=queue, reconcile=reconcile, workers=4, wait_for=[informer]
    )
    tasks = [informer.start(), asyncio.create_task(controller.run(), name="controller")]
    try:
        for name in ("a", "b", "flaky", "later"):
            await client.create(PODS, pod(name))
        await converged.wait()
        assert attempts["default/a"] == attempts["default/b"] == 1
        assert attempts["default/later"] == 2
        assert attempts["default/flaky"] == 3
        assert queue.num_requeues("default/flaky") == 0, "success forgets the failures"
        assert overlaps == []
    finally:
        tasks[1].cancel()
        await asyncio.gather(tasks[1], return_exceptions=True)
        assert queue.shutting_down and not queue.processing
        tasks[0].cancel()
        await asyncio.gather(tasks[0], return_exceptions=True)
