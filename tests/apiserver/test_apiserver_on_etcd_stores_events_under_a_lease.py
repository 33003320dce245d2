"""A real apiserver on etcd gives every Event write a lease of ``--event-ttl`` (plus Kubernetes'
reuse window), as Kubernetes does, so etcd itself expires old Events; other kinds have none.
(The store's own test shows a key going away when its lease expires.)"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubelite.testing import ComponentProcess, etcd

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not etcd.available(), reason="no etcd binary: apt-get install etcd-server"),
]

PREFIX = "/kubelite-events"


@pytest.fixture
def member(tmp_path: Path) -> Iterator[etcd.EtcdMember]:
    started = etcd.EtcdMember(tmp_path / "etcd")
    started.start()
    yield started
    started.stop()


async def test_an_event_is_stored_under_a_lease_of_the_event_ttl(
    member: etcd.EtcdMember, apiserver_process
) -> None:  # type: ignore[no-untyped-def]
    url = f"etcd://{member.endpoint}?prefix={PREFIX}"
    server: ComponentProcess = await asyncio.to_thread(
        apiserver_process, store=url, args=["--event-ttl=2h"]
    )
    event = {
        "metadata": {"name": "pulled"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
        "reason": "Pulled",
        "message": "image pulled",
        "type": "Normal",
    }
    namespaced = f"{server.url}/api/v1/namespaces/default"
    async with aiohttp.ClientSession() as http:
        for resource, body in (("events", event), ("configmaps", {"metadata": {"name": "c"}})):
            async with http.post(f"{namespaced}/{resource}", json=body) as resp:
                assert resp.status == 201, await resp.text()

        async def etcd_call(path: str, body: dict[str, Any]) -> dict[str, Any]:
            async with http.post(f"http://{member.endpoint}{path}", json=body) as resp:
                answer: dict[str, Any] = await resp.json(content_type=None)
                return answer

        async def lease_of(key: str) -> str | None:  # key: as etcd holds it (Kubernetes' layout)
            etcd_key = base64.b64encode(f"{PREFIX}{key}".encode()).decode()
            (kv,) = (await etcd_call("/v3/kv/range", {"key": etcd_key}))["kvs"]
            lease: str | None = kv.get("lease")
            return lease

        lease = await lease_of("/registry/events/default/pulled")
        assert lease is not None
        granted = await etcd_call("/v3/lease/timetolive", {"ID": lease})
        assert int(granted["grantedTTL"]) == 2 * 3600 + 60
        assert await lease_of("/registry/configmaps/default/c") is None
