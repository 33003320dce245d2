"""The node and network components' ``/metrics``, parsed by prometheus-client, moving with what
they do: a kubelet starting a pod (the kubelet's names), the DNS answering queries (CoreDNS's),
the proxy syncing a Service (kube-proxy's) and the front relaying a connection (HAProxy's).

Each counter is read once the effect that follows it has been seen (a pod Running on a watch,
an answer received, a response through the relay). The proxy writes nothing anyone can watch,
so its counters alone are polled, through ``poll_until``.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import dns.asyncquery
import dns.message
import dns.rcode
import pytest

from api.registry import REGISTRY
from client.rest import ApiClient
from kubelite import commands
from kubelite.testing import ComponentProcess, Processes
from kubelite.testing.metrics import metric, samples, scrape
from kubelite.testing.waiting import Watcher, poll_until
from tests.factories import pod, service

pytestmark = pytest.mark.e2e

PODS = REGISTRY.require("", "Pod")
SERVICES = REGISTRY.require("", "Service")
DNS_IP = "127.128.0.10"
"""``.10`` of the apiserver's default service range: the kube-dns ClusterIP."""


async def test_a_kubelet_counts_a_pod_start_and_its_runtime_operations(
    kubelite_processes: Processes,
) -> None:
    api = kubelite_processes.apiserver(store="memory://")
    kubelet = kubelite_processes.kubelet(api.url, "node1")  # sim runtime
    samples(scrape(kubelet.url))
    assert metric(kubelet.url, "kubelet_pod_start_duration_seconds_count") == 0

    async with ApiClient(server=api.url) as client:
        async with Watcher(client, PODS, namespace="default") as pods:
            await client.create(PODS, pod("started", nodeName="node1"), namespace="default")
            await pods.wait_until(
                lambda objs: any((o.get("status") or {}).get("phase") == "Running" for o in objs),
                what="started Running",
            )

    assert metric(kubelet.url, "kubelet_pod_start_duration_seconds_count") == 1
    for operation in ("run_podsandbox", "pull_image", "start_container"):
        assert (
            metric(kubelet.url, "kubelet_runtime_operations_total", operation_type=operation) >= 1
        ), operation
    assert metric(kubelet.url, "kubelet_running_pods") == 1
    assert metric(kubelet.url, "kubelet_running_containers", container_state="running") == 1


async def test_the_dns_counts_queries_by_zone_type_and_protocol(
    kubelite_processes: Processes,
) -> None:
    api = kubelite_processes.apiserver(store="memory://")
    server = kubelite_processes.dns(api.url, address=DNS_IP)
    health, port = server.url_of("health"), server.port_of("dns")
    samples(scrape(health))

    name = "kubernetes.default.svc.cluster.local."
    udp = await dns.asyncquery.udp(dns.message.make_query(name, "A"), DNS_IP, port=port, timeout=5)
    tcp = await dns.asyncquery.tcp(
        dns.message.make_query(name, "SRV"), DNS_IP, port=port, timeout=5
    )
    assert udp.rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN)  # before or after the sync
    assert tcp.rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN)

    block = {"server": f"dns://{DNS_IP}:{port}", "zone": "cluster.local.", "view": ""}
    assert (
        metric(health, "coredns_dns_requests_total", **block, proto="udp", family="1", type="A")
        == 1
    )
    assert (
        metric(health, "coredns_dns_requests_total", **block, proto="tcp", family="1", type="SRV")
        == 1
    )
    answered = [
        s
        for s in samples(scrape(health))
        if s.name == "coredns_dns_responses_total" and s.labels["plugin"] == "kubernetes"
    ]
    assert sum(s.value for s in answered) == 2
    assert metric(health, "coredns_dns_request_duration_seconds_count", **block, type="A") == 1


def _proxy(api: ComponentProcess, tmp_path: Path) -> ComponentProcess:
    argv = commands.proxy(server=api.url, healthz_bind_address="127.0.0.1", healthz_port=0).python()
    return ComponentProcess(argv, name="proxy", endpoint="health", log_path=tmp_path / "proxy.log")


async def test_the_proxy_counts_service_changes_and_syncs(
    kubelite_processes: Processes, tmp_path: Path
) -> None:
    api = kubelite_processes.apiserver(store="memory://")
    proxy = _proxy(api, tmp_path)
    kubelite_processes.started.append(proxy)  # stopped at teardown
    proxy.start()
    samples(scrape(proxy.url))

    def synced_more_than(n: float) -> bool:
        return metric(proxy.url, "kubeproxy_sync_proxy_rules_duration_seconds_count") > n

    poll_until(lambda: synced_more_than(0), what="the proxy's first sync (the kubernetes Service)")
    changes = metric(proxy.url, "kubeproxy_sync_proxy_rules_service_changes_total")
    syncs = metric(proxy.url, "kubeproxy_sync_proxy_rules_duration_seconds_count")
    async with ApiClient(server=api.url) as client:
        await client.create(SERVICES, service("counted"), namespace="default")
    poll_until(lambda: synced_more_than(syncs), what="the proxy's sync of the new Service")
    assert metric(proxy.url, "kubeproxy_sync_proxy_rules_service_changes_total") >= changes + 1
    assert metric(proxy.url, "kubeproxy_sync_proxy_rules_last_timestamp_seconds") > 0


def test_the_front_counts_the_connections_it_relays(
    kubelite_processes: Processes, tmp_path: Path
) -> None:
    api = kubelite_processes.apiserver(store="memory://")
    backend = f"127.0.0.1:{api.port}"
    argv = commands.front(
        backends=[backend], bind_address="127.0.0.1", port=0, health_scheme="http",
        healthz_bind_address="127.0.0.1", healthz_port=0,
    ).python()  # fmt: skip
    front = ComponentProcess(argv, name="front", endpoint="front", log_path=tmp_path / "front.log")
    kubelite_processes.started.append(front)
    front.start()
    health = front.url_of("health")
    samples(scrape(health))

    with urllib.request.urlopen(f"http://127.0.0.1:{front.port}/version", timeout=30) as reply:
        assert reply.status == 200

    assert metric(health, "haproxy_frontend_connections_total", frontend="front") == 1
    assert (
        metric(health, "haproxy_server_connections_total", backend="apiservers", server=backend)
        == 1
    )
    assert metric(health, "haproxy_server_up", backend="apiservers", server=backend) == 1
