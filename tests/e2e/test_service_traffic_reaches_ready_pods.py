"""Service traffic through ``kubelite proxy``, every component a separate process (``kubelite
up``'s command lines, the process runtime, real pods on loopback).

A Deployment of 3 nginx pods behind a LoadBalancer Service: each pod serves ``/who.html``
holding its own name (written with ``kubectl exec`` under its working directory /tmp; the
pods' readiness probe GETs that file,
so writing it makes a pod ready and removing it unready). From the host:

* the ClusterIP answers and, over many requests, every pod answers;
* the NodePort on 127.0.0.1 and the LoadBalancer ingress IP (given by the controller-manager's
  ServiceLB) answer;
* a ClientIP-affinity Service keeps one client on one pod;
* a pod turned unready stops getting traffic (it would answer 404: its file is gone), and gets
  it again once ready; scaled down to one pod, only that pod answers;
* UDP: a ``python`` pod echoing datagrams answers through its Service's ClusterIP.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from api.registry import REGISTRY
from kubelite.testing.waiting import apoll_until
from tests.e2e.cluster import Cluster, running
from tests.factories import container, deployment, pod, service
from tests.kubectl.harness import Kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.kubectl, pytest.mark.timeout(300)]

DEPLOYMENTS = REGISTRY.require("apps", "Deployment")
SERVICES = REGISTRY.require("", "Service")
PODS = REGISTRY.require("", "Pod")

Obj = dict[str, Any]
BATCH = 30
"""Requests per look at where traffic goes."""

UDP_ECHO = """
import os, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((os.environ["POD_IP"], 5353))
while True:
    data, peer = s.recvfrom(65535)
    s.sendto(os.environ["POD_NAME"].encode() + b":" + data, peer)
"""


def web_deployment() -> Obj:
    body = deployment("web", replicas=3)
    app = body["spec"]["template"]["spec"]["containers"][0]
    app["ports"] = [{"name": "http", "containerPort": 80}]
    app["workingDir"] = "/tmp"  # writable in the pod's sandbox: the web root is ./html
    app["readinessProbe"] = {
        "httpGet": {"path": "/who.html", "port": "http"},
        "periodSeconds": 1,
        "failureThreshold": 1,
    }
    body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 2
    return body


def web_service(name: str, **spec: Any) -> Obj:
    body = service(name, selector={"app": "web"}, ports=[{"port": 80, "targetPort": "http"}])
    body["spec"].update(spec)
    return body


def is_ready(pod: Obj | None) -> bool:
    conditions = ((pod or {}).get("status") or {}).get("conditions") or []
    return running(pod) and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


class Traffic:
    """Where a batch of HTTP requests to one address lands."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url

    async def one(self) -> str:
        """The pod that answered; ``404`` when a pod without the file answered."""
        async with self.session.get(self.url) as r:
            return (await r.text()).strip() if r.status == 200 else str(r.status)

    async def batch(self, n: int = BATCH) -> list[str]:
        return [await self.one() for _ in range(n)]

    async def settles_on(self, expected: set[str], *, within: float = 30.0) -> None:
        """Until a whole batch lands only on ``expected`` (every one of them when the batch is
        large enough to), then once more: traffic stays there."""

        seen: list[str] = []

        async def landed() -> bool:
            try:
                seen[:] = await self.batch()
            except aiohttp.ClientError as exc:
                seen[:] = [repr(exc)]
            return set(seen) == expected

        await apoll_until(
            landed,
            what=f"{self.url} answered only by {expected}",
            within=within,
            describe=lambda: f"last batch: {sorted(set(seen))}",
        )
        assert set(await self.batch()) == expected


async def test_service_addresses_reach_ready_pods_and_follow_changes(
    cluster: Cluster, tmp_path: Path
) -> None:
    c = cluster
    kubectl = Kubectl.on(c.server, workdir=tmp_path)

    async def run(*args: str) -> str:
        return (await asyncio.to_thread(kubectl, *args)).stdout

    await c.client.create(DEPLOYMENTS, web_deployment(), namespace="default")
    web = await c.client.create(
        SERVICES, web_service("web", type="LoadBalancer"), namespace="default"
    )
    sticky = await c.client.create(
        SERVICES, web_service("sticky", sessionAffinity="ClientIP"), namespace="default"
    )
    await c.until(
        lambda: len([p for p in c.live_pods(label="app=web") if running(p)]) == 3,
        within=90,
        what="3 web pods running",
    )
    names = {p["metadata"]["name"] for p in c.live_pods(label="app=web")}

    async def serve_name(name: str) -> None:
        await run("exec", name, "--", "sh", "-c", f"mkdir -p html && echo {name} > html/who.html")

    await asyncio.gather(*(serve_name(n) for n in names))
    await c.until(
        lambda: all(is_ready(c.pod(n)) for n in names), within=60, what="3 web pods ready"
    )

    cluster_ip = web["spec"]["clusterIP"]
    node_port = web["spec"]["ports"][0]["nodePort"]
    timeout = aiohttp.ClientTimeout(total=10)
    # a new connection per request: the proxy balances connections, not requests
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        via_cluster_ip = Traffic(session, f"http://{cluster_ip}/who.html")
        # every pod answers through the ClusterIP
        await via_cluster_ip.settles_on(names)

        # the node port, on the nodes' InternalIP
        assert await Traffic(session, f"http://127.0.0.1:{node_port}/who.html").one() in names

        # the LoadBalancer's ingress IP, once the ServiceLB controller gave one
        async def ingress_ip() -> str | None:
            svc = await c.client.get(SERVICES, "web", namespace="default")
            ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
            return ingress[0].get("ip") if ingress else None

        # from inside another pod, by the Service's cluster DNS name, as a user would
        client_pod = pod("client", container("client", "busybox", command=["sleep", "3600"]))
        client_pod["spec"]["terminationGracePeriodSeconds"] = 1
        await c.client.create(PODS, client_pod, namespace="default")
        await c.until(lambda: running(c.pod("client")), within=60, what="the client pod running")
        inside = await run(
            "exec", "client", "--", "wget", "-qO-", "http://web.default.svc.cluster.local/who.html"
        )
        assert inside.strip() in names, inside
        short = await run("exec", "client", "--", "wget", "-qO-", "http://web/who.html")
        assert short.strip() in names, short  # the search path of the pod's resolv.conf

        lb_ip = await apoll_until(ingress_ip, what="a LoadBalancer ingress IP", within=30)
        await Traffic(session, f"http://{lb_ip}/who.html").settles_on(names)

        # ClientIP affinity: this host is one client, so one pod answers everything
        sticky_traffic = Traffic(session, f"http://{sticky['spec']['clusterIP']}/who.html")
        answers = await apoll_until(
            sticky_traffic.batch, what="the sticky Service answering", within=30
        )
        assert len(set(answers)) == 1 and answers[0] in names, answers

        # readiness: a pod whose probe fails leaves the Service, and comes back
        quiet, *others = sorted(names)
        await run("exec", quiet, "--", "rm", "html/who.html")
        await via_cluster_ip.settles_on(set(others))
        await serve_name(quiet)
        await via_cluster_ip.settles_on(names)

        # scaling: down to one pod, only that one answers
        await run("scale", "deployment/web", "--replicas=1")
        await c.until(
            lambda: len(c.live_pods(label="app=web")) == 1, within=60, what="one web pod left"
        )
        (left,) = [p["metadata"]["name"] for p in c.live_pods(label="app=web")]
        await via_cluster_ip.settles_on({left})


async def test_udp_datagrams_reach_a_pod_through_its_cluster_ip(cluster: Cluster) -> None:
    c = cluster
    echo = container("echo", "python", command=["python", "-c", UDP_ECHO])
    echo["ports"] = [{"containerPort": 5353, "protocol": "UDP"}]
    await c.client.create(
        PODS, pod("echo", echo, namespace="default", labels={"app": "echo"}), namespace="default"
    )
    svc = service(
        "echo",
        selector={"app": "echo"},
        ports=[{"name": "dns", "port": 53, "targetPort": 5353, "protocol": "UDP"}],
    )
    created = await c.client.create(SERVICES, svc, namespace="default")
    await c.until(lambda: is_ready(c.pod("echo")), within=90, what="the echo pod ready")
    cluster_ip = created["spec"]["clusterIP"]
    loop = asyncio.get_running_loop()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        sock.connect((cluster_ip, 53))

        async def echoed() -> bytes | None:
            # a datagram sent before the proxy listens, or before the pod binds, is lost or
            # refused: ask again
            try:
                await loop.sock_sendall(sock, b"ping")
                return await asyncio.wait_for(loop.sock_recv(sock, 65535), 1.0)
            except (TimeoutError, ConnectionRefusedError):
                return None

        answer = await apoll_until(echoed, what="an echo through the ClusterIP", within=60)
        assert answer == b"echo:ping"
        for n in range(5):  # the flow carries on
            await loop.sock_sendall(sock, f"{n}".encode())
            assert await asyncio.wait_for(loop.sock_recv(sock, 65535), 5) == f"echo:{n}".encode()
