"""The service-lb controller gives LoadBalancer Services loopback ingress IPs; kubectl and the
official client read Endpoints and EndpointSlices.

A real apiserver and controller-manager (service-lb, endpoint, endpointslice); the range is
narrowed to a /30 (two usable addresses) so uniqueness and release are visible.
"""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import PODS, Obj, rt
from tests.factories import container, pod, service
from tests.kubectl.harness import Kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SERVICES = rt("", "Service")
LB_RANGE = "127.192.7.0/30"


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--controllers=service-lb,endpoint,endpointslice", f"--service-lb-range={LB_RANGE}")


def ingress_ip(svc: Obj | None) -> str | None:
    ingress = (((svc or {}).get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return ingress[0].get("ip") if ingress else None


async def test_load_balancers_get_unique_addresses_freed_on_delete(cluster: Cluster) -> None:
    lb = {"type": "LoadBalancer"}
    async with Watcher(cluster.client, SERVICES, namespace="default") as services:
        for name in ("a", "b", "c"):
            await cluster.client.create(SERVICES, service(name, **lb), namespace="default")
        await cluster.client.create(
            SERVICES,
            service("other", type="LoadBalancer", loadBalancerClass="example.com/lb"),
            namespace="default",
        )
        await services.wait_until(
            lambda _o: all(ingress_ip(services.get(f"default/{n}")) for n in ("a", "b")),
            what="a and b given addresses",
        )
        a, b = ingress_ip(services.get("default/a")), ingress_ip(services.get("default/b"))
        hosts = {str(h) for h in ipaddress.IPv4Network(LB_RANGE).hosts()}
        assert {a, b} == hosts  # unique, from the range
        assert ingress_ip(services.get("default/c")) is None  # the range is used up
        assert ingress_ip(services.get("default/other")) is None  # another class's Service

        await cluster.client.delete(SERVICES, "a", namespace="default")
        await services.wait_until(
            lambda _o: ingress_ip(services.get("default/c")) == a, what="c takes a's address"
        )
        # a type change releases the address
        await cluster.client.patch(
            SERVICES,
            "b",
            {"spec": {"type": "ClusterIP", "allocateLoadBalancerNodePorts": None}},
            namespace="default",
        )
        await services.wait_until(
            lambda _o: ingress_ip(services.get("default/b")) is None, what="b released"
        )


def _of_web(endpoint_slice: dict[str, Any]) -> bool:
    labels = endpoint_slice["metadata"].get("labels") or {}
    return labels.get("kubernetes.io/service-name") == "web"


async def test_kubectl_and_the_official_client_read_endpoints_and_slices(
    cluster: Cluster, tmp_path: Path
) -> None:
    web = container(ports=[{"name": "http", "containerPort": 8080}])
    for i in range(4):
        await cluster.client.create(
            PODS, pod(f"web-{i}", web, labels={"app": "web"}, nodeName="n"), namespace="default"
        )
        ip = f"127.78.0.{i + 1}"
        status = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                  "conditions": [{"type": "Ready", "status": "True"}]}  # fmt: skip
        await cluster.client.patch(
            PODS, f"web-{i}", {"status": status}, namespace="default", subresource="status"
        )
    ports = [{"name": "web", "port": 80, "targetPort": "http"}]
    await cluster.client.create(
        SERVICES, service("web", selector={"app": "web"}, ports=ports), namespace="default"
    )
    slices = rt("discovery.k8s.io", "EndpointSlice")
    async with Watcher(cluster.client, slices, namespace="default") as watcher:
        await watcher.wait_until(
            # the apiserver's own kubernetes slice lives in default too: count web's only
            lambda objs: sum(len(s.get("endpoints") or []) for s in objs if _of_web(s)) == 4,
            what="4 endpoints sliced",
        )
    kubectl = Kubectl.on(cluster.api.url, workdir=tmp_path)
    out = (await asyncio.to_thread(kubectl, "get", "ep,endpointslices")).stdout
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "ENDPOINTS", "AGE"]
    ep_row = next(line for line in lines if line.startswith("endpoints/web "))
    assert "127.78.0.1:8080,127.78.0.2:8080,127.78.0.3:8080 + 1 more..." in ep_row
    header = next(line for line in lines if "ADDRESSTYPE" in line)
    assert header.split() == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    slice_row = next(
        line for line in lines if line.startswith("endpointslice.discovery.k8s.io/web-")
    )
    assert slice_row.split()[1:4] == ["IPv4", "8080", "127.78.0.1,127.78.0.2,127.78.0.3"]

    api = k8s.ApiClient(k8s.Configuration(host=cluster.api.url))
    try:
        ep = await asyncio.to_thread(k8s.CoreV1Api(api).read_namespaced_endpoints, "web", "default")
        assert isinstance(ep, k8s.V1Endpoints)
        assert ep.subsets[0].ports[0].port == 8080
        assert len(ep.subsets[0].addresses) == 4
        listed = await asyncio.to_thread(
            k8s.DiscoveryV1Api(api).list_namespaced_endpoint_slice,
            "default",
            label_selector="kubernetes.io/service-name=web",
        )
        (es,) = listed.items
        assert isinstance(es, k8s.V1EndpointSlice)
        assert es.address_type == "IPv4"
        assert es.endpoints[0].conditions.ready is True
        assert es.endpoints[0].target_ref.kind == "Pod"
    finally:
        await asyncio.to_thread(api.close)
