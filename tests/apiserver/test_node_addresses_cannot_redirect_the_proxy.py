"""A Node's addresses and kubelet port are validated, and the logs/exec proxy dials only a kubelet.

The hostile address below once made ``pods/log`` fetch ``http://127.0.0.1:<trap>/any/path?x=1``
and return its body (the proxy pasted the string into a URL). Now it is refused on write (422
with a field cause), and a Node stored with it anyway — written straight into the store, as an
object from before validation would be — makes the proxy answer 503 without dialling anything.
A small aiohttp "trap" listens where the hostile URL points and must see no request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from api.registry import REGISTRY
from tests.apiserver.conftest import Api, MakeApi

Obj = dict[str, Any]
NODES = REGISTRY.by_kind("", "Node")
assert NODES is not None


class Trap:
    def __init__(self) -> None:
        self.hits: list[str] = []
        self.port = 0


@pytest.fixture
async def trap() -> AsyncIterator[Trap]:
    seen = Trap()

    async def anything(request: web.Request) -> web.Response:
        seen.hits.append(str(request.rel_url))
        return web.Response(text="secret from the trap\n")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", anything)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    seen.port = runner.addresses[0][1]
    try:
        yield seen
    finally:
        await runner.cleanup()


def hostile(trap: Trap) -> str:
    return f"::ffff:127.0.0.1]:{trap.port}/any/path?x=1#"


def node(name: str, *addresses: tuple[str, str], port: Any = 10250) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "addresses": [{"type": t, "address": a} for t, a in addresses],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        },
    }


async def test_a_hostile_internal_ip_is_refused_on_write(make_api: MakeApi, trap: Trap) -> None:
    api = await make_api()
    status, body = await api.post("/api/v1/nodes", node("evil", ("InternalIP", hostile(trap))))
    assert status == 422, body
    assert body["reason"] == "Invalid"
    (cause,) = body["details"]["causes"]
    assert cause["field"] == "status.addresses[0].address"
    assert cause["reason"] == "FieldValueInvalid"
    assert "must be a valid IP address" in cause["message"]

    # the status subresource (what kubelets write) is held to the same rule
    await api.ok("POST", "/api/v1/nodes", node("good", ("InternalIP", "127.0.0.1")))
    status, body = await api.patch(
        "/api/v1/nodes/good/status",
        {"status": {"addresses": [{"type": "InternalIP", "address": hostile(trap)}]}},
    )
    assert status == 422, body
    assert trap.hits == []


@pytest.mark.parametrize(
    ("address", "field_reason"),
    [
        (("InternalIP", "fe80::1%eth0"), "FieldValueInvalid"),  # a zone is not a plain IP
        (("InternalIP", "[::1]"), "FieldValueInvalid"),
        (("ExternalIP", "127.0.0.1:80"), "FieldValueInvalid"),
        (("Hostname", "node1:10250/x"), "FieldValueInvalid"),
        (("InternalDNS", "Node1.Example"), "FieldValueInvalid"),
        (("Hostname", ""), "FieldValueRequired"),
    ],
)
async def test_addresses_must_be_bare_ips_or_dns_names(
    make_api: MakeApi, address: tuple[str, str], field_reason: str
) -> None:
    api = await make_api()
    status, body = await api.post("/api/v1/nodes", node("n", address))
    assert status == 422, body
    assert [c["reason"] for c in body["details"]["causes"]] == [field_reason]


async def test_valid_addresses_and_ports_are_accepted(make_api: MakeApi) -> None:
    api = await make_api()
    await api.ok(
        "POST",
        "/api/v1/nodes",
        node(
            "fine",
            ("InternalIP", "127.0.0.1"),
            ("InternalIP", "::1"),
            ("Hostname", "node1"),
            ("InternalDNS", "node1.cluster.local"),
        ),
    )
    # Port 0 is what a Go client writes for "no kubelet endpoint" (the field has no omitempty)
    await api.ok("POST", "/api/v1/nodes", node("portless", ("Hostname", "x"), port=0))


@pytest.mark.parametrize("port", [-1, 65536])
async def test_the_kubelet_port_must_be_a_port(make_api: MakeApi, port: int) -> None:
    api = await make_api()
    status, body = await api.post(
        "/api/v1/nodes", node("n", ("InternalIP", "127.0.0.1"), port=port)
    )
    assert status == 422, body
    (cause,) = body["details"]["causes"]
    assert cause["field"] == "status.daemonEndpoints.kubeletEndpoint.Port"


async def test_duplicate_addresses_are_refused(make_api: MakeApi) -> None:
    api = await make_api()
    status, body = await api.post(
        "/api/v1/nodes", node("n", ("InternalIP", "127.0.0.1"), ("InternalIP", "127.0.0.1"))
    )
    assert status == 422, body
    assert [c["reason"] for c in body["details"]["causes"]] == ["FieldValueDuplicate"]


async def _store_node(api: Api, obj: Obj) -> None:
    """Write a Node past validation, as one stored by an older kubelite would be."""
    meta = obj["metadata"]
    meta.setdefault("uid", "0b1d6f52-0000-4000-8000-000000000001")
    meta.setdefault("creationTimestamp", "2024-01-01T00:00:00Z")
    await api.store.create(NODES.key(None, meta["name"]), json.dumps(obj).encode())


async def test_a_stored_hostile_node_does_not_make_the_proxy_fetch_anything(
    make_api: MakeApi, trap: Trap
) -> None:
    api = await make_api()
    await _store_node(api, node("evil", ("InternalIP", hostile(trap))))
    await api.create_pod("victim", nodeName="evil")

    status, body = await api.get("/api/v1/namespaces/default/pods/victim/log")
    assert status == 503, body
    assert body["kind"] == "Status" and body["reason"] == "ServiceUnavailable"
    assert "no preferred addresses found" in body["message"]
    assert "secret" not in json.dumps(body)

    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await api.client.ws_connect(
            "/api/v1/namespaces/default/pods/victim/exec?command=true&stdout=true",
            protocols=["v5.channel.k8s.io"],
        )
    assert refused.value.status == 503
    assert trap.hits == []


async def test_a_stored_node_with_a_bad_port_is_refused_at_proxy_time(make_api: MakeApi) -> None:
    api = await make_api()
    await _store_node(api, node("odd", ("InternalIP", "127.0.0.1"), port="10250/x?"))
    await api.create_pod("p", nodeName="odd")
    status, body = await api.get("/api/v1/namespaces/default/pods/p/log")
    assert status == 503, body
    assert "does not advertise a kubelet endpoint" in body["message"]
