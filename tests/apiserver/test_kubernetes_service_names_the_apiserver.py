"""The ``kubernetes`` Service leads to the apiserver: a real apiserver process writes the
Endpoints and EndpointSlice ``default/kubernetes`` naming its own address and serving port
(read with the official client's typed calls), and puts them back when they are edited away."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from kubernetes import client

from kubelite.testing import ComponentProcess
from kubelite.testing.waiting import poll_until


def _api(url: str) -> client.ApiClient:
    config = client.Configuration()
    config.host = url
    return client.ApiClient(config)


async def test_the_kubernetes_service_names_the_serving_apiserver(apiserver_process) -> None:  # type: ignore[no-untyped-def]
    server: ComponentProcess = await asyncio.to_thread(apiserver_process, store="memory://")
    await asyncio.to_thread(_check, server.url)


def _check(url: str) -> None:
    port = urlsplit(url).port
    with _api(url) as api:
        core, discovery = client.CoreV1Api(api), client.DiscoveryV1Api(api)
        service = core.read_namespaced_service("kubernetes", "default")
        assert service.spec.selector is None

        endpoints = poll_until(lambda: _endpoints(core), what="the kubernetes Endpoints")
        (subset,) = endpoints.subsets
        assert [a.ip for a in subset.addresses] == ["127.0.0.1"]
        assert [(p.name, p.port, p.protocol) for p in subset.ports] == [("https", port, "TCP")]
        assert endpoints.metadata.labels["endpointslice.kubernetes.io/skip-mirror"] == "true"

        slice_ = discovery.read_namespaced_endpoint_slice("kubernetes", "default")
        assert slice_.metadata.labels["kubernetes.io/service-name"] == "kubernetes"
        assert slice_.address_type == "IPv4"
        assert [e.addresses for e in slice_.endpoints] == [["127.0.0.1"]]
        assert slice_.endpoints[0].conditions.ready is True
        assert [(p.name, p.port) for p in slice_.ports] == [("https", port)]

        # edited away, it comes back at the next round
        endpoints.subsets = [
            client.V1EndpointSubset(addresses=[client.V1EndpointAddress(ip="127.9.9.9")])
        ]
        core.replace_namespaced_endpoints("kubernetes", "default", endpoints)
        poll_until(
            lambda: (
                _endpoints(core).subsets[0].ports is not None
                and _endpoints(core).subsets[0].addresses[0].ip == "127.0.0.1"
            ),
            what="the kubernetes Endpoints restored",
            within=30,
        )


def _endpoints(core: client.CoreV1Api) -> client.V1Endpoints | None:
    try:
        return core.read_namespaced_endpoints("kubernetes", "default")
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
