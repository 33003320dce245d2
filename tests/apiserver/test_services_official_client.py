"""The official ``kubernetes`` client's typed Service calls against a real apiserver process:
create, read, replace, patch, list, watch, read and patch status, delete — every answer parses
into ``V1Service`` — and a taken address surfacing as a 422 ``ApiException`` with Kubernetes'
message."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes import client, watch

from kubelite.testing import ComponentProcess

NS = "default"


def until_deleted(v1: client.CoreV1Api, name: str, *, resource_version: str) -> list[Any]:
    """The typed watch events of ``name`` from ``resource_version`` up to its DELETED."""
    w = watch.Watch()
    events = []
    for event in w.stream(
        v1.list_namespaced_service, NS, resource_version=resource_version, timeout_seconds=30
    ):
        if event["object"].metadata.name != name:
            continue
        events.append(event)
        if event["type"] == "DELETED":
            w.stop()
    return events


async def test_typed_service_calls(apiserver_process) -> None:  # type: ignore[no-untyped-def]
    server: ComponentProcess = await asyncio.to_thread(apiserver_process, store="memory://")
    await asyncio.to_thread(_services, server.url)


def _services(url: str) -> None:
    v1 = client.CoreV1Api(client.ApiClient(client.Configuration(host=url)))
    start_rv = v1.list_namespaced_service(NS).metadata.resource_version
    body = client.V1Service(
        metadata=client.V1ObjectMeta(name="web", labels={"app": "web"}),
        spec=client.V1ServiceSpec(
            type="LoadBalancer",
            selector={"app": "web"},
            ports=[client.V1ServicePort(name="http", port=80, target_port="http")],
            session_affinity="ClientIP",
        ),
    )
    created = v1.create_namespaced_service(NS, body)
    spec = created.spec
    assert spec.cluster_ip.startswith("127.128.") and spec.cluster_ips == [spec.cluster_ip]
    assert spec.ports[0].target_port == "http" and 30000 <= spec.ports[0].node_port <= 32767
    assert spec.session_affinity_config.client_ip.timeout_seconds == 10800
    assert spec.allocate_load_balancer_node_ports is True
    assert spec.ip_families == ["IPv4"] and spec.ip_family_policy == "SingleStack"

    read = v1.read_namespaced_service("web", NS)
    read.spec.publish_not_ready_addresses = True
    replaced = v1.replace_namespaced_service("web", NS, read)
    assert replaced.spec.publish_not_ready_addresses is True
    assert replaced.spec.cluster_ip == spec.cluster_ip
    patched = v1.patch_namespaced_service("web", NS, {"metadata": {"labels": {"tier": "front"}}})
    assert patched.metadata.labels == {"app": "web", "tier": "front"}
    assert [s.metadata.name for s in v1.list_namespaced_service(NS).items] == ["kubernetes", "web"]

    status = v1.read_namespaced_service_status("web", NS)
    assert status.status.load_balancer.ingress is None
    ingress = {"status": {"loadBalancer": {"ingress": [{"ip": "127.192.0.1", "ipMode": "VIP"}]}}}
    with_ingress = v1.patch_namespaced_service_status("web", NS, ingress)
    assert with_ingress.status.load_balancer.ingress[0].ip == "127.192.0.1"
    assert with_ingress.spec.cluster_ip == spec.cluster_ip  # a status write leaves the spec

    taken = client.V1Service(
        metadata=client.V1ObjectMeta(name="copy"),
        spec=client.V1ServiceSpec(cluster_ip=spec.cluster_ip, ports=[client.V1ServicePort(port=1)]),
    )
    with pytest.raises(client.ApiException) as refused:
        v1.create_namespaced_service(NS, taken)
    assert refused.value.status == 422
    assert json.loads(refused.value.body)["message"].endswith(
        f"failed to allocate IP {spec.cluster_ip}: provided IP is already allocated"
    )

    deleted = v1.delete_namespaced_service("web", NS)
    assert deleted.metadata.name == "web"  # a Service's DELETE answers with the object
    events = until_deleted(v1, "web", resource_version=start_rv)
    assert events[0]["type"] == "ADDED" and events[-1]["type"] == "DELETED"
    assert all(isinstance(e["object"], client.V1Service) for e in events)
