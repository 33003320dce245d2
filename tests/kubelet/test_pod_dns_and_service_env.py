"""A pod on a real process-runtime kubelet started with ``--cluster-dns`` resolves Service names
through a real ``kubelite dns``, and gets the Service environment variables; and the rules
behind both on their own (``dnsPolicy``/``dnsConfig``, ``FromServices``).

Inside the pod (its sandbox bind-mounts the kubelet's resolv.conf over ``/etc/resolv.conf``)
the file names the cluster DNS, Kubernetes' search path and ``ndots:5``, and the host's glibc
resolver finds ``web`` through the search path. A pod made after the Service sees
``WEB_SERVICE_HOST`` and friends; with ``enableServiceLinks: false`` it does not.
"""

from __future__ import annotations

import asyncio
import random

import aiohttp
import pytest

from api.registry import REGISTRY
from client.rest import ApiClient
from kubelite.testing import Processes
from services.kubelet.pod_dns import ClusterDns, resolv_conf
from services.kubelet.service_env import service_env
from tests.conftest import StartApiServer
from tests.factories import container, pod, service
from tests.kubelet.conftest import StartKubelet
from tests.kubelet.pods import phase
from tests.kubelet.waits import pods_rt, wait_for_object

pytestmark = pytest.mark.e2e

SERVICES = REGISTRY.require("", "Service")
SCRIPT = """
import os, socket
print(open("/etc/resolv.conf").read())
print("WEB", socket.gethostbyname("web"))
print("FQDN", socket.gethostbyname("web.default.svc.cluster.local"))
for name in sorted(os.environ):
    if name.startswith(("WEB_", "KUBERNETES_")):
        print("ENV", name, os.environ[name])
"""


async def test_pod_resolves_services_by_search_path_and_sees_their_env(
    apiserver_process: StartApiServer,
    kubelite_processes: Processes,
    start_kubelet: StartKubelet,
) -> None:
    api = apiserver_process(store="memory://")
    # a DNS address of this test's own in the default service range, on port 53 (we are root),
    # where glibc in the pod looks
    dns_ip = f"127.128.{random.randint(100, 250)}.{random.randint(2, 250)}"
    await asyncio.to_thread(
        kubelite_processes.dns, api.url, address=dns_ip, port=53, args=["--upstream=127.0.0.1:9"]
    )
    node = f"node-{random.randint(1000, 9999)}"
    pod_cidr = f"127.{random.randint(150, 199)}.{random.randint(0, 255)}.0/24"
    await asyncio.to_thread(
        start_kubelet, api.url, node, runtime="process",
        args=["--pod-cidr", pod_cidr, "--cluster-dns", dns_ip],
    )  # fmt: skip
    async with ApiClient(server=api.url) as client:
        web = await client.create(
            SERVICES, service("web", ports=[{"name": "http", "port": 80}]), namespace="default"
        )
        web_ip = web["spec"]["clusterIP"]

        async def run(name: str, **spec: object) -> str:
            body = pod(
                name,
                container("main", "python", command=["python3", "-c", SCRIPT]),
                nodeName=node,
                restartPolicy="Never",
                **spec,
            )
            await client.create(pods_rt(), body, namespace="default")
            done = await wait_for_object(
                client, pods_rt(), name, lambda p: phase(p) in ("Succeeded", "Failed"),
                namespace="default", within=60,
            )  # fmt: skip
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"{api.url}/api/v1/namespaces/default/pods/{name}/log") as r,
            ):
                log = await r.text()
            assert phase(done) == "Succeeded", log
            return log

        out = await run("linked")
        assert f"nameserver {dns_ip}\n" in out
        assert "search default.svc.cluster.local svc.cluster.local cluster.local" in out
        assert "options ndots:5" in out
        assert f"WEB {web_ip}" in out and f"FQDN {web_ip}" in out
        assert f"ENV WEB_SERVICE_HOST {web_ip}" in out
        assert "ENV WEB_SERVICE_PORT 80" in out and "ENV WEB_SERVICE_PORT_HTTP 80" in out
        assert f"ENV WEB_PORT tcp://{web_ip}:80" in out
        assert f"ENV WEB_PORT_80_TCP_ADDR {web_ip}" in out

        unlinked = await run("unlinked", enableServiceLinks=False)
        assert f"WEB {web_ip}" in unlinked  # the name still resolves
        assert "ENV WEB_" not in unlinked
        kubernetes = await client.get(SERVICES, "kubernetes", namespace="default")
        # the master service's variables are there whatever enableServiceLinks says
        kube_ip = kubernetes["spec"]["clusterIP"]
        assert f"ENV KUBERNETES_SERVICE_HOST {kube_ip}" in unlinked


NODE_RESOLV = "nameserver 192.0.2.53\nsearch corp.example\noptions edns0\n"
CLUSTER = ClusterDns(servers=("127.128.0.10",))


@pytest.mark.parametrize(
    ("spec", "cluster_first"),
    [
        ({}, True),
        ({"dnsPolicy": "ClusterFirst", "hostNetwork": True}, False),
        ({"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": True}, True),
        ({"dnsPolicy": "Default"}, False),
    ],
)
def test_dns_policy_picks_the_cluster_dns_or_the_nodes(
    spec: dict[str, object], cluster_first: bool
) -> None:
    text = resolv_conf(spec, node_resolv_conf=NODE_RESOLV, namespace="shop", cluster=CLUSTER)
    if cluster_first:
        assert text == (
            "nameserver 127.128.0.10\n"
            "search shop.svc.cluster.local svc.cluster.local cluster.local corp.example\n"
            "options ndots:5\n"
        )
    else:
        assert text is None  # the node's file, unchanged


def test_without_cluster_dns_cluster_first_falls_back_to_the_node() -> None:
    assert resolv_conf({}, node_resolv_conf=NODE_RESOLV, namespace="shop") is None


def test_dns_config_is_appended_to_the_cluster_settings() -> None:
    config = {"nameservers": ["127.0.0.53"], "options": [{"name": "ndots", "value": "2"}]}
    text = resolv_conf(
        {"dnsConfig": config}, node_resolv_conf=NODE_RESOLV, namespace="shop", cluster=CLUSTER
    )
    assert text is not None
    assert text.splitlines()[0] == "nameserver 127.128.0.10"
    assert "nameserver 127.0.0.53" in text and "options ndots:2" in text


def test_service_variables_follow_kubernetes_envvars() -> None:
    svc = service(
        "my-db",
        ports=[{"name": "pg", "port": 5432, "protocol": "TCP"}, {"port": 9187, "protocol": "UDP"}],
        clusterIP="127.128.0.7",
    )
    svc["metadata"]["namespace"] = "shop"
    headless = service("peers", clusterIP="None")
    headless["metadata"]["namespace"] = "shop"
    kubernetes = service(
        "kubernetes", ports=[{"name": "https", "port": 443}], clusterIP="127.128.0.1"
    )
    kubernetes["metadata"]["namespace"] = "default"
    env = service_env([svc, headless, kubernetes], namespace="shop", enable_service_links=True)
    assert {k: v for k, v in env.items() if k.startswith("MY_DB")} == {
        "MY_DB_SERVICE_HOST": "127.128.0.7",
        "MY_DB_SERVICE_PORT": "5432",
        "MY_DB_SERVICE_PORT_PG": "5432",
        "MY_DB_PORT": "tcp://127.128.0.7:5432",
        "MY_DB_PORT_5432_TCP": "tcp://127.128.0.7:5432",
        "MY_DB_PORT_5432_TCP_PROTO": "tcp",
        "MY_DB_PORT_5432_TCP_PORT": "5432",
        "MY_DB_PORT_5432_TCP_ADDR": "127.128.0.7",
        "MY_DB_PORT_9187_UDP": "udp://127.128.0.7:9187",
        "MY_DB_PORT_9187_UDP_PROTO": "udp",
        "MY_DB_PORT_9187_UDP_PORT": "9187",
        "MY_DB_PORT_9187_UDP_ADDR": "127.128.0.7",
    }
    assert not any(k.startswith("PEERS_") for k in env)  # headless: no ClusterIP, no variables
    assert env["KUBERNETES_SERVICE_HOST"] == "127.128.0.1"
    unlinked = service_env([svc, kubernetes], namespace="shop", enable_service_links=False)
    assert set(unlinked) == {k for k in env if k.startswith("KUBERNETES_")}
