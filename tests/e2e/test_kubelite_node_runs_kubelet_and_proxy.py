"""``kubelite node`` for real: one process that runs a node's kubelet and its proxy.

What a compose node container runs, here on the host's loopback (no container engine needed):
an apiserver and a controller-manager (its EndpointSlice controller) as separate processes,
and ``kubelite node`` with the kubelet's flags plus ``--proxy-healthz-port``. It shows:

* the Node registers and turns Ready (its kubelet child), the proxy child's /healthz answers,
  and both children's lines carry their prefix;
* an nginx pod on that node behind a ClusterIP Service answers ``GET http://<cluster-ip>/``
  from the host, through the node's proxy;
* SIGKILL to the proxy child: ``kubelite node`` says so, starts a new proxy, and the ClusterIP
  answers again;
* SIGTERM to ``kubelite node``: it passes it on, both children exit, and so does it (code 0).

The children are found in ``/proc`` (the node's children by parent pid); their restart and exit
are polled there, as the kernel announces nothing to another process.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from api.registry import REGISTRY
from client.rest import ApiClient
from kubelite import commands, up
from kubelite.testing import ComponentProcess, Processes
from kubelite.testing.waiting import Watcher, apoll_until, poll_until
from tests.e2e.cluster import loopback_pod_cidr
from tests.factories import pod, service

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

NODES = REGISTRY.require("", "Node")
PODS = REGISTRY.require("", "Pod")
SERVICES = REGISTRY.require("", "Service")
NODE = "node-x1"
ROOT = Path(__file__).resolve().parents[2]


def children(pid: int) -> dict[str, int]:
    """The live children of ``pid`` by the module they run (``services.kubelet`` ...)."""
    found = {}
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:  # it just exited
            continue
        if b"-m" in argv:
            found[argv[argv.index(b"-m") + 1].decode()] = int(child)
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


async def answer(url: str) -> str | None:
    """The body of ``GET url``, or None while nothing (or a dead proxy's port) answers."""
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
            session.get(url) as response,
        ):
            return await response.text() if response.status == 200 else None
    except (aiohttp.ClientError, TimeoutError):
        return None


@pytest.fixture
def node(kubelite_processes: Processes, tmp_path: Path) -> Iterator[tuple[str, ComponentProcess]]:
    """An apiserver (with a service range of its own), a controller-manager and a started
    ``kubelite node``; the apiserver's URL and the node's process."""
    service_cidr = up.cluster_service_cidr(tmp_path)
    api = kubelite_processes.apiserver(
        store="memory://", args=[f"--service-cluster-ip-range={service_cidr}"]
    )
    kubelite_processes.controller_manager(api.url)
    kubelet = commands.kubelet(
        server=api.url, node_name=NODE, runtime="process", state_dir=tmp_path / "kubelet",
        address="127.0.0.1", port=0, healthz_bind_address="127.0.0.1", healthz_port=0,
        pod_cidr=loopback_pod_cidr(1), stop_pods_on_exit=True,
    )  # fmt: skip
    process = ComponentProcess(
        commands.node(kubelet, proxy_healthz_port=0).python(),
        name="node",
        component="proxy",  # ready once the proxy is; the Node's Ready condition says the rest
        endpoint="health",
        log_path=tmp_path / "node.log",
        cwd=tmp_path / "run",
        env={"PYTHONPATH": str(ROOT)},
        stop_grace=30,
    )
    kubelite_processes.started.append(process)  # stopped at teardown if the test did not
    yield api.url, process.start()


def ready(node: dict[str, Any] | None) -> bool:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def test_node_runs_kubelet_and_proxy_restarts_the_proxy_and_stops_both(
    node: tuple[str, ComponentProcess],
) -> None:
    server, process = node
    async with ApiClient(server=server) as client:
        async with Watcher(client, NODES) as nodes:
            await nodes.wait_until(
                lambda _: ready(nodes.get(NODE)), what=f"{NODE} Ready", within=90
            )
        health = process.url_of("health")
        assert await apoll_until(
            lambda: answer(f"{health}/healthz"), what="the proxy's /healthz", every=0.2
        )
        log = process.log_path.read_text()
        assert "kubelet | kubelite: kubelet ready" in log and "proxy   | " in log

        web = pod("web", labels={"app": "web"}, nodeName=NODE)
        web["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
        await client.create(PODS, web, namespace="default")
        created = await client.create(
            SERVICES, service("web", selector={"app": "web"}), namespace="default"
        )
        url = f"http://{created['spec']['clusterIP']}/"
        body = await apoll_until(lambda: answer(url), what=f"{url} through the node's proxy")
        assert "Welcome to nginx" in body

        proxy = children(process.pid)["services.proxy"]
        os.kill(proxy, signal.SIGKILL)
        restarted = poll_until(
            lambda: children(process.pid).get("services.proxy", proxy) != proxy,
            what="a new proxy child",
        )
        assert restarted
        assert "proxy exited with code -9; restarting" in process.log_path.read_text()
        body = await apoll_until(lambda: answer(url), what=f"{url} through the new proxy")
        assert "Welcome to nginx" in body

    agents = children(process.pid)
    assert set(agents) == {"services.kubelet", "services.proxy"}
    process.send(signal.SIGTERM)
    assert await process.wait_exit(within=60) == 0
    assert not any(alive(pid) for pid in agents.values())
    assert process.log_path.read_text().rstrip().endswith("node    | stopped")
