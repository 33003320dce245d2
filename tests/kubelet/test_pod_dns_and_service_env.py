"""A pod on a real process-runtime kubelet started with ``--cluster-dns`` resolves Service names
through a real ``kubelite dns``, and gets the Service environment variables.

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
