"""An informer's ``transform`` (client-go's ``SetTransform``) shapes every object before the cache
holds it or a handler sees it: with ``strip_managed_fields`` — what the controller-manager and the
scheduler use, as Kubernetes' do — listed and watched objects are cached without
``metadata.managedFields``, while the server keeps them; and an update written from a cached
copy keeps every other manager's entry as it was, adding the writer's own. Against a real
apiserver app on loopback, in virtual time."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from client.informer import Informer, strip_managed_fields
from client.kubeconfig import ClientConfig
from client.rest import ApiClient
from services.apiserver.app import make_app
from services.apiserver.context import ServerOptions
from tests.client.ledger import PODS, pod

pytestmark = [pytest.mark.looptime, pytest.mark.timeout(60)]
ServerFactory = Callable[..., Awaitable[TestServer]]
Obj = dict[str, Any]


@pytest.fixture
async def url(aiohttp_server: ServerFactory) -> str:
    server = await aiohttp_server(make_app(ServerOptions(store_url="memory://")))
    return str(server.make_url("")).rstrip("/")


@pytest.fixture
async def creator(url: str) -> AsyncIterator[ApiClient]:
    """A client whose writes are recorded under the manager ``creator`` (its User-Agent)."""
    async with ApiClient(ClientConfig(server=url).with_options(user_agent="creator")) as c:
        yield c


@pytest.fixture
async def updater(url: str) -> AsyncIterator[ApiClient]:
    async with ApiClient(ClientConfig(server=url).with_options(user_agent="updater")) as c:
        yield c


def managers(obj: Obj) -> dict[str, Obj]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields") or []}


async def test_cached_and_handled_objects_have_no_managed_fields(creator: ApiClient) -> None:
    assert PODS is not None
    await creator.create(PODS, pod("listed"))
    informer = Informer(creator, PODS, name="trimmed pods", transform=strip_managed_fields)
    handled: list[Obj] = []
    all_three = asyncio.Event()  # the list's add, the watch's ADDED and its MODIFIED

    def saw(obj: Obj) -> None:
        handled.append(obj)
        if len(handled) == 3:
            all_three.set()

    informer.add_handler(on_add=saw, on_update=lambda _old, new: saw(new))
    task = informer.start()
    try:
        await informer.wait_synced()
        await creator.create(PODS, pod("watched"))
        await creator.patch(
            PODS, "listed", {"metadata": {"labels": {"gen": "1"}}}, namespace="default"
        )
        await asyncio.wait_for(all_three.wait(), timeout=30)
    finally:
        task.cancel()
    names = sorted(o["metadata"]["name"] for o in informer.list())
    assert names == ["listed", "watched"]
    seen = [(o["metadata"]["name"], o["metadata"]["labels"]["gen"]) for o in handled]
    assert seen == [("listed", "0"), ("watched", "0"), ("listed", "1")]  # list, ADDED, MODIFIED
    assert all("managedFields" not in o["metadata"] for o in [*informer.list(), *handled])
    stored = await creator.get(PODS, "listed", namespace="default")
    assert set(managers(stored)) == {"creator"}  # trimmed in the cache only


async def test_an_update_from_a_trimmed_copy_keeps_the_other_managers_entries(
    creator: ApiClient, updater: ApiClient
) -> None:
    assert PODS is not None
    created = await creator.create(PODS, pod("web"))
    informer = Informer(updater, PODS, name="trimmed pods", transform=strip_managed_fields)
    task = informer.start()
    try:
        await informer.wait_synced()
        cached = informer.get("default/web")
        assert cached is not None and "managedFields" not in cached["metadata"]
        body = copy.deepcopy(cached)  # what a controller writes back: its cached copy, changed
        body["metadata"]["labels"]["tier"] = "front"
        written = await updater.update(PODS, body, namespace="default")
    finally:
        task.cancel()
    stored = await updater.get(PODS, "web", namespace="default")
    assert stored["metadata"]["managedFields"] == written["metadata"]["managedFields"]
    after = managers(stored)
    assert set(after) == {"creator", "updater"}
    assert after["creator"] == managers(created)["creator"]  # untouched, to its timestamp
    assert after["updater"]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:tier": {}}}}
