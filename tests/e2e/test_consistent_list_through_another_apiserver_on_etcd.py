"""Two apiservers on one etcd: a consistent LIST (no resourceVersion) through B holds every
object written through A before the LIST began — and once etcd's progress notifications have
told B's watch cache it is current, B serves such a LIST from that cache, although the latest
writes were to another resource, without reading the store; and a quiet watch's bookmarks carry
the revision etcd vouched for."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from api.registry import REGISTRY, ResourceType
from client.rest import ApiClient
from kubelite import commands
from kubelite.testing import ComponentProcess, etcd
from kubelite.testing.metrics import metric
from kubelite.testing.waiting import apoll_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not etcd.available(), reason="no etcd binary: apt-get install etcd-server"),
]


def _core(kind: str) -> ResourceType:
    rt = REGISTRY.by_kind("", kind)
    assert rt is not None
    return rt


CONFIG_MAPS, SECRETS = _core("ConfigMap"), _core("Secret")


@pytest.fixture
def member(tmp_path: Path) -> Iterator[etcd.EtcdMember]:
    """Progress notifications every 0.2 s (etcd's default, 10 min, would leave the cache
    unproven for that long when its resource is quiet)."""
    started = etcd.EtcdMember(tmp_path / "etcd", progress_notify_interval=0.2)
    started.start()
    yield started
    started.stop()


@pytest.fixture
async def pair(
    member: etcd.EtcdMember, tmp_path: Path
) -> AsyncIterator[tuple[ComponentProcess, ComponentProcess]]:
    servers = []
    for name in ("a", "b"):
        argv = commands.apiserver(
            store=f"etcd://{member.endpoint}",
            state_dir=tmp_path / name,
            bind_address="127.0.0.1",
            port=0,
            secure_port=-1,
        ).python()
        (tmp_path / name).mkdir()
        servers.append(ComponentProcess(argv, name="apiserver", log_path=tmp_path / f"{name}.log"))
    a, b = servers
    await asyncio.gather(a.astart(), b.astart())
    yield a, b
    await asyncio.gather(a.astop(), b.astop())


def _names(listed: dict) -> set[str]:  # type: ignore[type-arg]
    return {item["metadata"]["name"] for item in listed["items"]}


async def test_a_consistent_list_through_b_holds_every_write_through_a(
    pair: tuple[ComponentProcess, ComponentProcess],
) -> None:
    a, b = pair
    async with ApiClient(server=a.url) as on_a, ApiClient(server=b.url) as on_b:
        written: set[str] = set()
        for i in range(20):
            name = f"cm-{i:02d}"
            await on_a.create(CONFIG_MAPS, {"metadata": {"name": name}}, namespace="default")
            written.add(name)
            # and a write elsewhere, so that B's ConfigMap cache is not current by its own events
            secret = {"metadata": {"name": f"s-{i:02d}"}, "stringData": {"k": "v"}}
            await on_a.create(SECRETS, secret, namespace="default")
            listed = await on_b.list(CONFIG_MAPS, namespace="default")
            assert written <= _names(listed), f"B's list missed {written - _names(listed)}"


async def test_b_serves_a_consistent_list_from_its_cache_once_etcd_vouches_for_it(
    pair: tuple[ComponentProcess, ComponentProcess],
) -> None:
    a, b = pair

    def store_lists() -> float:
        return metric(
            b.url, "etcd_request_duration_seconds_count", operation="list", type="configmaps"
        )

    async with ApiClient(server=a.url) as on_a, ApiClient(server=b.url) as on_b:
        await on_a.create(CONFIG_MAPS, {"metadata": {"name": "cm"}}, namespace="default")
        secret = {"metadata": {"name": "later"}, "stringData": {"k": "v"}}
        await on_a.create(SECRETS, secret, namespace="default")

        async def served_from_cache() -> bool:
            before = await asyncio.to_thread(store_lists)
            listed = await on_b.list(CONFIG_MAPS, namespace="default")
            assert "cm" in _names(listed)
            return await asyncio.to_thread(store_lists) == before

        await apoll_until(served_from_cache, what="a consistent list through B from its cache")


async def test_a_bookmark_through_b_carries_the_revision_etcd_vouched_for(
    pair: tuple[ComponentProcess, ComponentProcess],
) -> None:
    """A quiet ConfigMap watch on B gets bookmarks at or past a Secret written through A since:
    a client resuming from one skips history it has no use for."""
    a, b = pair
    async with ApiClient(server=a.url) as on_a, ApiClient(server=b.url) as on_b:
        start = (await on_b.list(CONFIG_MAPS, namespace="default"))["metadata"]["resourceVersion"]
        secret = {"metadata": {"name": "elsewhere"}, "stringData": {"k": "v"}}
        written = await on_a.create(SECRETS, secret, namespace="default")
        later = int(written["metadata"]["resourceVersion"])
    query = {"watch": "1", "allowWatchBookmarks": "true", "resourceVersion": start}
    url = f"{b.url}/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as http, http.get(url, params=query) as resp:
        async with asyncio.timeout(60):
            async for line in resp.content:
                event = json.loads(line)
                assert event["type"] == "BOOKMARK", event  # nothing else happens to ConfigMaps
                if int(event["object"]["metadata"]["resourceVersion"]) >= later:
                    break
