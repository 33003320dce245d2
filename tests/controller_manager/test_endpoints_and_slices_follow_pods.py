"""The endpoints, endpointslice and mirroring controllers, in a real controller-manager process,
keep a Service's Endpoints and EndpointSlices true to its pods.

No kubelet runs: the test creates pods bound to a node name and posts each pod's status as a
kubelet would (``pods/{name}/status``: phase, podIP, Ready), so readiness is the test's to
decide; a deleted pod bound to a node stays terminating because no kubelet confirms it. Every
expectation is awaited on a watch of the server's objects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import PODS, rt
from tests.factories import container, endpoints, pod, service

Obj = dict[str, Any]

SERVICES = rt("", "Service")
ENDPOINTS = rt("", "Endpoints")
SLICES = rt("discovery.k8s.io", "EndpointSlice")
WEB = {"app": "web"}
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--controllers=endpoint,endpointslice,endpointslice-mirroring,garbagecollector",)


def ip_of(i: int) -> str:
    return f"127.77.{i // 250}.{i % 250 + 1}"


async def make_pods(cluster: Cluster, count: int, *, ready: bool = True) -> None:
    """``count`` pods ``web-<i>`` with a container port named ``http`` (8080), Running."""
    web = container(ports=[{"name": "http", "containerPort": 8080}])

    async def one(i: int) -> None:
        body = pod(f"web-{i}", web, labels=WEB, nodeName="node-a")
        await cluster.client.create(PODS, body, namespace="default")
        await report(cluster, f"web-{i}", ip=ip_of(i), ready=ready)

    await asyncio.gather(*(one(i) for i in range(count)))


async def report(cluster: Cluster, name: str, *, ip: str, ready: bool) -> None:
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    status = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [condition]}
    await cluster.client.patch(
        PODS, name, {"status": status}, namespace="default", subresource="status"
    )


def slices_of(objects: list[Obj], svc: str) -> list[Obj]:
    return [
        s
        for s in objects
        if s["metadata"].get("labels", {}).get("kubernetes.io/service-name") == svc
    ]


def endpoints_by_ip(slices: list[Obj]) -> dict[str, Obj]:
    return {e["addresses"][0]: e for s in slices for e in s.get("endpoints") or []}


async def slices_become(
    cluster: Cluster, svc: str, check: Callable[[list[Obj]], bool], *, what: str
) -> list[Obj]:
    async with Watcher(cluster.client, SLICES, namespace="default") as watcher:
        await watcher.wait_until(lambda objs: check(slices_of(objs, svc)), what=what)
        return slices_of(watcher.objects(), svc)


async def endpoints_become(
    cluster: Cluster, name: str, check: Callable[[Obj], bool], *, what: str
) -> Obj:
    async with Watcher(cluster.client, ENDPOINTS, namespace="default") as watcher:
        await watcher.wait_until(
            lambda _o: (ep := watcher.get(f"default/{name}")) is not None and check(ep),
            what=what,
        )
        found = watcher.get(f"default/{name}")
        assert found is not None
        return found


def ready_ips(ep: Obj) -> set[str]:
    return {a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or []}


def not_ready_ips(ep: Obj) -> set[str]:
    return {a["ip"] for s in ep.get("subsets") or [] for a in s.get("notReadyAddresses") or []}


async def test_three_ready_pods_then_unready_then_terminating(cluster: Cluster) -> None:
    await make_pods(cluster, 3)
    ports = [{"name": "web", "port": 80, "targetPort": "http"}]
    await cluster.client.create(
        SERVICES, service("web", selector=WEB, ports=ports), namespace="default"
    )
    ips = {ip_of(i) for i in range(3)}

    ep = await endpoints_become(
        cluster, "web", lambda e: ready_ips(e) == ips, what="3 ready addresses"
    )
    assert ep["subsets"][0]["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    assert "endpoints.kubernetes.io/last-change-trigger-time" in ep["metadata"]["annotations"]
    assert ep["subsets"][0]["addresses"][0]["targetRef"]["kind"] == "Pod"

    slices = await slices_become(
        cluster,
        "web",
        lambda s: (
            len(s) == 1
            and {ip for ip, e in endpoints_by_ip(s).items() if e["conditions"]["ready"]} == ips
        ),
        what="one slice, 3 ready endpoints",
    )
    (es,) = slices
    assert es["metadata"]["name"].startswith("web-")
    assert es["metadata"]["labels"][MANAGED_BY] == "endpointslice-controller.k8s.io"
    assert es["metadata"]["ownerReferences"][0]["kind"] == "Service"
    assert es["addressType"] == "IPv4"
    assert es["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    assert all(e["nodeName"] == "node-a" for e in es["endpoints"])

    # web-0 turns unready: notReadyAddresses, ready=false serving=false
    await report(cluster, "web-0", ip=ip_of(0), ready=False)
    ep = await endpoints_become(
        cluster, "web", lambda e: not_ready_ips(e) == {ip_of(0)}, what="web-0 not ready"
    )
    assert ready_ips(ep) == ips - {ip_of(0)}
    await slices_become(
        cluster,
        "web",
        lambda s: (
            endpoints_by_ip(s)[ip_of(0)]["conditions"]
            == {"ready": False, "serving": False, "terminating": False}
        ),
        what="web-0 ready=false in its slice",
    )

    # web-1 is deleted; with no kubelet to confirm, it stays terminating
    await cluster.client.delete(PODS, "web-1", namespace="default")
    await slices_become(
        cluster,
        "web",
        lambda s: (
            endpoints_by_ip(s)[ip_of(1)]["conditions"]
            == {"ready": False, "serving": True, "terminating": True}
        ),
        what="web-1 terminating, still serving",
    )
    ep = await endpoints_become(
        cluster, "web", lambda e: ip_of(1) not in ready_ips(e) | not_ready_ips(e),
        what="web-1 out of the Endpoints",
    )  # fmt: skip
    assert ready_ips(ep) == {ip_of(2)}


async def test_250_pods_make_three_slices_of_at_most_100(cluster: Cluster) -> None:
    await make_pods(cluster, 250)
    await cluster.client.create(SERVICES, service("web", selector=WEB), namespace="default")
    slices = await slices_become(
        cluster,
        "web",
        lambda s: len(endpoints_by_ip(s)) == 250,
        what="250 endpoints in the slices",
    )
    assert len(slices) == 3
    assert all(len(s["endpoints"]) <= 100 for s in slices)
    # a restarted controller-manager (kill -9) adds no slice and keeps the same ones
    names = {s["metadata"]["name"] for s in slices}
    cluster.cm.kill()
    successor = cluster.new_cm("--controllers=endpoint,endpointslice", "--leader-elect=false")
    await asyncio.to_thread(successor.start)
    await report(cluster, "web-7", ip=ip_of(7), ready=False)
    after = await slices_become(
        cluster,
        "web",
        lambda s: not endpoints_by_ip(s)[ip_of(7)]["conditions"]["ready"],
        what="the successor reflects web-7 unready",
    )
    assert {s["metadata"]["name"] for s in after} == names
    ep = await endpoints_become(
        cluster, "web", lambda e: len(ready_ips(e)) == 249, what="249 ready addresses"
    )
    assert len(not_ready_ips(ep)) == 1


async def test_publish_not_ready_addresses(cluster: Cluster) -> None:
    await make_pods(cluster, 2, ready=False)
    body = service("web", selector=WEB, publishNotReadyAddresses=True, clusterIP="None")
    await cluster.client.create(SERVICES, body, namespace="default")
    ep = await endpoints_become(
        cluster, "web", lambda e: len(ready_ips(e)) == 2, what="unready pods published"
    )
    assert ep["metadata"]["labels"]["service.kubernetes.io/headless"] == ""
    await slices_become(
        cluster,
        "web",
        lambda s: (
            [e["conditions"] for e in endpoints_by_ip(s).values()]
            == [{"ready": True, "serving": False, "terminating": False}] * 2
        ),
        what="ready=true serving=false",
    )


async def test_a_selectorless_service_has_its_endpoints_mirrored(cluster: Cluster) -> None:
    await cluster.client.create(
        SERVICES, service("db", ports=[{"port": 5432}]), namespace="default"
    )
    await cluster.client.create(
        ENDPOINTS,
        endpoints("db", "127.77.9.1", "127.77.9.2", port=5432, not_ready=("127.77.9.3",)),
        namespace="default",
    )
    (es,) = await slices_become(
        cluster, "db", lambda s: len(endpoints_by_ip(s)) == 3, what="mirrored slice"
    )
    assert es["metadata"]["labels"][MANAGED_BY] == "endpointslicemirroring-controller.k8s.io"
    assert es["ports"] == [{"name": "", "port": 5432, "protocol": "TCP"}]
    ready = {ip: e["conditions"]["ready"] for ip, e in endpoints_by_ip([es]).items()}
    assert ready == {"127.77.9.1": True, "127.77.9.2": True, "127.77.9.3": False}
    # the hand-written Endpoints is left as written
    ep = await cluster.client.get(ENDPOINTS, "db", namespace="default")
    assert "endpoints.kubernetes.io/last-change-trigger-time" not in (
        ep["metadata"].get("annotations") or {}
    )
