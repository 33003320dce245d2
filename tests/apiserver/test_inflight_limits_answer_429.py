"""``--max-requests-inflight`` / ``--max-mutating-requests-inflight``: requests over the limit get
kube-apiserver's 429, watches and other long-running requests are not counted, and the server
serves normally once the requests in flight have finished.

Requests are held in flight deterministically by a store whose Lease lists or creates wait on
an event the test sets (``GatedStore``); the test awaits the store's note that each held request
has reached it, so nothing here depends on timing.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from services.apiserver.inflight import is_long_running, is_mutating
from store import open_store
from store.base import KeyValue, ListResult, Store
from tests.apiserver.conftest import TOO_MANY, EventReader, MakeApi
from tests.factories import pod
from tests.forwarding_store import ForwardingStore

LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
LEASES_FROM_STORE = LEASES + "?limit=500"
"""A list the store answers: one with a limit is read from it, while a consistent list without
may be served from a watch cache that is current (``services.apiserver.listing``)."""
POOLS = {"enable_priority_and_fairness": False}
"""The two in-flight pools rather than priority and fairness, which exempts this port's admin."""
PODS = "/api/v1/namespaces/default/pods"


class GatedStore(ForwardingStore):
    """A real store whose Lease lists (and creates) wait for ``release`` once ``armed``."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.armed = False
        self.release = asyncio.Event()
        self.waiting = 0
        self._arrived = asyncio.Condition()

    async def held(self, n: int) -> None:
        """Wait until ``n`` requests are waiting at the gate."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: self.waiting >= n)

    async def _gate(self, key: str) -> None:
        if self.armed and "/leases/" in key:
            async with self._arrived:
                self.waiting += 1
                self._arrived.notify_all()
            await self.release.wait()

    async def list(
        self, prefix: str, *, revision: int = 0, start_after: str | None = None, limit: int = 0
    ) -> ListResult:
        await self._gate(prefix)
        return await super().list(prefix, revision=revision, start_after=start_after, limit=limit)

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> KeyValue:
        await self._gate(key)
        return await super().create(key, value, ttl=ttl)


def lease(name: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}}


async def test_lists_over_the_read_only_limit_get_429_and_watches_are_not_counted(
    make_api: MakeApi,
) -> None:
    store = GatedStore(open_store("memory://"))
    api = await make_api(
        store=store, max_requests_inflight=2, max_mutating_requests_inflight=1, **POOLS
    )
    client = api.client
    store.armed = True
    held = [asyncio.create_task(api.get(LEASES_FROM_STORE)) for _ in range(2)]
    await store.held(2)

    async with client.get(LEASES) as resp:
        assert resp.status == 429
        assert resp.headers["Retry-After"] == "1"
        assert resp.content_type == "application/json"
        assert json.loads(await resp.read()) == TOO_MANY

    # watches take no slot: three of them open and deliver while both slots are taken
    watches = [await client.get(PODS, params={"watch": "1"}) for _ in range(3)]
    assert [w.status for w in watches] == [200, 200, 200]
    # mutating requests draw on their own pool
    status, created = await api.post(PODS, pod("while-full"))
    assert status == 201, created
    for w in watches:
        [event] = await EventReader(w).take(1)
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "while-full")
        w.close()
    # probes are exempt too
    async with client.get("/readyz") as resp:
        assert resp.status == 200

    store.release.set()
    assert [status for status, _ in await asyncio.gather(*held)] == [200, 200]
    status, body = await api.get(LEASES)
    assert status == 200 and body["kind"] == "LeaseList"


async def test_writes_over_the_mutating_limit_get_429_and_reads_still_pass(
    make_api: MakeApi,
) -> None:
    store = GatedStore(open_store("memory://"))
    api = await make_api(
        store=store, max_requests_inflight=1, max_mutating_requests_inflight=1, **POOLS
    )
    store.armed = True
    held = asyncio.create_task(api.post(LEASES, lease("held")))
    await store.held(1)

    for method, path, body in [
        ("POST", PODS, pod("refused")),
        ("PUT", f"{PODS}/refused", pod("refused")),
        ("DELETE", f"{PODS}/refused", None),
    ]:
        status, out = await api.request(method, path, body)
        assert (status, out) == (429, TOO_MANY), method
    status, out = await api.request(
        "PATCH", f"{PODS}/x", {"metadata": {}}, content_type="application/merge-patch+json"
    )
    assert (status, out) == (429, TOO_MANY)
    status, _ = await api.get(PODS)
    assert status == 200

    store.release.set()
    status, out = await held
    assert status == 201, out
    status, out = await api.post(PODS, pod("after"))
    assert status == 201, out


async def test_zero_means_no_limit(make_api: MakeApi) -> None:
    store = GatedStore(open_store("memory://"))
    api = await make_api(
        store=store, max_requests_inflight=0, max_mutating_requests_inflight=0, **POOLS
    )
    store.armed = True
    held = [asyncio.create_task(api.get(LEASES_FROM_STORE)) for _ in range(5)]
    await store.held(5)  # all five reached the store: none was turned away
    store.release.set()
    assert [status for status, _ in await asyncio.gather(*held)] == [200] * 5


@pytest.mark.parametrize(
    ("method", "path", "long_running"),
    [
        ("GET", "/api/v1/namespaces/default/pods?watch=1", True),
        ("GET", "/api/v1/pods?watch=true", True),
        ("GET", "/api/v1/watch/namespaces/default/pods", True),
        ("GET", "/apis/apps/v1/namespaces/default/deployments?watch=True", True),
        ("GET", "/api/v1/namespaces/default/pods/p/log", True),
        ("GET", "/api/v1/namespaces/default/pods/p/log?follow=true", True),
        ("POST", "/api/v1/namespaces/default/pods/p/exec?command=sh", True),
        ("GET", "/api/v1/namespaces/default/pods/p/attach", True),
        ("POST", "/api/v1/namespaces/default/pods/p/portforward", True),
        ("GET", "/api/v1/namespaces/default/services/s/proxy/a/b", True),
        ("GET", "/api/v1/nodes/n/proxy/metrics", True),
        ("GET", "/readyz", True),
        ("GET", "/livez/ping", True),
        ("GET", "/api/v1/namespaces/default/pods", False),
        ("GET", "/api/v1/namespaces/default/pods?watch=0", False),
        ("GET", "/api/v1/namespaces/default/pods?watch=bogus", False),
        ("GET", "/api/v1/namespaces/default/pods/log", False),  # a pod named "log"
        ("GET", "/api/v1/namespaces/log", False),  # a namespace named "log"
        ("PUT", "/api/v1/namespaces/proxy/finalize", False),
        ("POST", "/api/v1/namespaces/default/pods/p/eviction", False),
        ("PUT", "/api/v1/namespaces/default/pods/p/status", False),
        ("GET", "/version", False),
        ("GET", "/openapi/v2", False),
    ],
)
def test_long_running_requests_are_recognised_as_kube_apiserver_does(
    method: str, path: str, long_running: bool
) -> None:
    request: web.Request = make_mocked_request(method, path)
    assert is_long_running(request) is long_running


def test_mutating_is_every_method_but_get_head_options() -> None:
    assert [m for m in ("GET", "HEAD", "OPTIONS") if is_mutating(m)] == []
    assert all(is_mutating(m) for m in ("POST", "PUT", "PATCH", "DELETE"))
