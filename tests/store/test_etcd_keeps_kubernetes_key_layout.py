"""In etcd, kubelite's objects sit where kube-apiserver puts them (``/registry/pods/<ns>/<name>``,
``/registry/services/specs/...``, ``/registry/minions/...``; custom resources under their group),
read straight from etcd; keys an earlier kubelite wrote at ``/registry/<group>/<resource>/`` are
moved there when a store opens; keys outside the layout that would collide are refused."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from kubelite.testing import etcd
from store import open_store
from store.base import Store
from store.etcd import EtcdStore

pytestmark = pytest.mark.parametrize("backend", ["etcd"])

WRITTEN_AT = {
    "/registry/core/pods/ns/p": "/registry/pods/ns/p",
    "/registry/core/services/ns/s": "/registry/services/specs/ns/s",
    "/registry/core/endpoints/ns/s": "/registry/services/endpoints/ns/s",
    "/registry/core/nodes/n1": "/registry/minions/n1",
    "/registry/core/replicationcontrollers/ns/rc": "/registry/controllers/ns/rc",
    "/registry/apps/deployments/ns/d": "/registry/deployments/ns/d",
    "/registry/coordination.k8s.io/leases/ns/l": "/registry/leases/ns/l",
    "/registry/apiextensions.k8s.io/customresourcedefinitions/w.example.com": (
        "/registry/apiextensions.k8s.io/customresourcedefinitions/w.example.com"
    ),
    "/registry/example.com/widgets/ns/w": "/registry/example.com/widgets/ns/w",
}


async def _etcd(member: etcd.EtcdMember, path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://{member.endpoint}{path}", json=body) as resp,
    ):
        answer: dict[str, Any] = await resp.json(content_type=None)
        return answer


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def _etcd_keys(member: etcd.EtcdMember, prefix: str) -> list[str]:
    """Every key under ``prefix`` as etcd holds it (without the prefix)."""
    answer = await _etcd(
        member,
        "/v3/kv/range",
        {"key": _b64(prefix + "/"), "range_end": _b64(prefix + "0"), "keys_only": True},
    )
    return [base64.b64decode(kv["key"]).decode()[len(prefix) :] for kv in answer.get("kvs", [])]


async def test_objects_sit_under_kubernetes_names_in_etcd(
    store: Store, etcd_member: etcd.EtcdMember
) -> None:
    assert isinstance(store, EtcdStore)
    for key in WRITTEN_AT:
        await store.create(key, key.encode())
    assert sorted(await _etcd_keys(etcd_member, store.prefix)) == sorted(WRITTEN_AT.values())
    # services and endpoints share /registry/services/ in etcd, yet each lists alone
    services = await store.list("/registry/core/services/")
    assert [kv.key for kv in services.items] == ["/registry/core/services/ns/s"]
    endpoints = await store.list("/registry/core/endpoints/ns/")
    assert [(kv.key, kv.value) for kv in endpoints.items] == [
        ("/registry/core/endpoints/ns/s", b"/registry/core/endpoints/ns/s")
    ]
    everything = await store.list("")
    assert sorted(kv.key for kv in everything.items) == sorted(WRITTEN_AT)


async def test_keys_of_the_former_layout_move_when_a_store_opens(
    backend_url: Callable[..., str], etcd_member: etcd.EtcdMember
) -> None:
    first = open_store(backend_url())
    assert isinstance(first, EtcdStore)
    prefix = first.prefix
    await first.close()
    former = prefix + "/registry/core/pods/ns/old"
    await _etcd(etcd_member, "/v3/kv/put", {"key": _b64(former), "value": _b64("kept")})

    store = open_store(backend_url())
    try:
        kv = await store.get("/registry/core/pods/ns/old")
        assert kv is not None and kv.value == b"kept"
        assert await _etcd_keys(etcd_member, prefix) == ["/registry/pods/ns/old"]
    finally:
        await store.close()


async def test_a_key_that_would_read_back_under_another_name_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="layout"):
        await store.create("/registry/pods/ns/p", b"v")
