"""Two real apiservers on one real etcd act as one cluster: a watch on B sees A's writes in
order; 50 ClusterIPs allocated at once, 25 through each, are 50 different addresses; the
``kubernetes`` Service's endpoints name both (each apiserver's Lease) and drop one that stops;
behind ``kubelite front`` kubectl keeps working after A is killed -9, and a client given both
URLs (``--server a,b``) turns to B by itself."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from api.errors import NotFound
from api.registry import REGISTRY, ResourceType
from client.kubeconfig import ClientConfig
from client.rest import ApiClient
from kubelite import commands
from kubelite.testing import ComponentProcess, etcd
from kubelite.testing.waiting import apoll_until
from tests.factories import service

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not etcd.available(), reason="no etcd binary: apt-get install etcd-server"),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]


def _core(kind: str) -> ResourceType:
    rt = REGISTRY.by_kind("", kind)
    assert rt is not None
    return rt


CONFIG_MAPS, SERVICES, ENDPOINTS = _core("ConfigMap"), _core("Service"), _core("Endpoints")


@pytest.fixture
def member(tmp_path: Path) -> Iterator[etcd.EtcdMember]:
    started = etcd.EtcdMember(tmp_path / "etcd")
    started.start()
    yield started
    started.stop()


def _apiserver(name: str, store: str, tmp_path: Path) -> ComponentProcess:
    argv = commands.apiserver(
        store=store, state_dir=tmp_path / name, bind_address="127.0.0.1", port=0, secure_port=-1
    ).python()
    (tmp_path / name).mkdir()
    return ComponentProcess(argv, name="apiserver", log_path=tmp_path / f"{name}.log")


@pytest.fixture
async def pair(
    member: etcd.EtcdMember, tmp_path: Path
) -> AsyncIterator[tuple[ComponentProcess, ComponentProcess]]:
    store = f"etcd://{member.endpoint}"
    a, b = _apiserver("a", store, tmp_path), _apiserver("b", store, tmp_path)
    await asyncio.gather(a.astart(), b.astart())
    yield a, b
    await asyncio.gather(a.astop(), b.astop())


async def test_a_watch_on_b_sees_the_writes_through_a_in_order(
    pair: tuple[ComponentProcess, ComponentProcess],
) -> None:
    a, b = pair
    async with ApiClient(server=a.url) as on_a, ApiClient(server=b.url) as on_b:
        start = (await on_b.list(CONFIG_MAPS, namespace="default"))["metadata"]["resourceVersion"]
        names = [f"cm-{i:02d}" for i in range(30)]
        seen: list[tuple[str, int]] = []
        async with on_b.watch(CONFIG_MAPS, namespace="default", resource_version=start) as stream:
            for name in names:  # one at a time: the order of the writes is the order acknowledged
                await on_a.create(CONFIG_MAPS, {"metadata": {"name": name}}, namespace="default")
            async for event in stream:
                if event.type == "ADDED":
                    meta = event.object["metadata"]
                    seen.append((meta["name"], int(meta["resourceVersion"])))
                if len(seen) == len(names):
                    break
    assert [name for name, _ in seen] == names
    revisions = [rv for _, rv in seen]
    assert revisions == sorted(revisions) and len(set(revisions)) == len(revisions)


async def test_fifty_cluster_ips_allocated_at_once_through_both_are_all_different(
    pair: tuple[ComponentProcess, ComponentProcess],
) -> None:
    a, b = pair
    async with ApiClient(server=a.url) as on_a, ApiClient(server=b.url) as on_b:
        created = await asyncio.gather(
            *(
                (on_a if i % 2 else on_b).create(SERVICES, service(f"s{i}"), namespace="default")
                for i in range(50)
            )
        )
        listed = (await on_a.list(SERVICES, namespace="default"))["items"]
    ips = [svc["spec"]["clusterIP"] for svc in created]
    assert len(set(ips)) == 50
    assert {
        svc["spec"]["clusterIP"] for svc in listed if svc["metadata"]["name"] != "kubernetes"
    } == set(ips)


async def test_the_kubernetes_endpoints_name_every_live_apiserver(
    pair: tuple[ComponentProcess, ComponentProcess],
) -> None:
    a, b = pair

    async def named(wanted: set[int]) -> bool:
        async with ApiClient(server=b.url) as client:
            try:
                eps = await client.get(ENDPOINTS, "kubernetes", namespace="default")
            except NotFound:  # not written yet
                return False
        ports = {p["port"] for subset in eps.get("subsets") or [] for p in subset["ports"]}
        return ports == wanted

    await apoll_until(lambda: named({a.port, b.port}), what="the endpoints to name A and B")
    await a.astop()  # a clean stop drops A's Lease and its address at once
    await apoll_until(lambda: named({b.port}), what="the endpoints to name B alone")


def kubectl(server: str, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    kubectl_path = shutil.which("kubectl")
    assert kubectl_path is not None
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(workdir), "KUBECONFIG": "/dev/null"}
    return subprocess.run(
        [kubectl_path, f"--server={server}", f"--cache-dir={workdir / 'kube-cache'}", *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


async def test_kubectl_through_the_front_survives_the_loss_of_an_apiserver(
    pair: tuple[ComponentProcess, ComponentProcess], tmp_path: Path
) -> None:
    a, b = pair
    argv = commands.front(
        backends=[f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"],
        port=0,
        health_scheme="http",
        healthz_port=0,
    ).python()
    front = ComponentProcess(argv, name="front", endpoint="front", log_path=tmp_path / "front.log")
    await front.astart()
    try:
        server = f"http://127.0.0.1:{front.port}"
        made = kubectl(server, tmp_path, "create", "configmap", "before")
        assert made.returncode == 0, made.stderr
        await a.akill()
        for i in range(6):  # each kubectl opens new connections: both backends' turns come
            done = await asyncio.to_thread(
                kubectl, server, tmp_path, "create", "configmap", f"after-{i}"
            )
            assert done.returncode == 0, done.stderr
        got = kubectl(server, tmp_path, "get", "configmaps", "-o", "name")
        assert got.returncode == 0, got.stderr
        assert {"configmap/before", *(f"configmap/after-{i}" for i in range(6))} <= set(
            got.stdout.split()
        )
    finally:
        await front.astop()


async def test_a_client_given_both_urls_turns_to_the_other_when_one_dies(
    pair: tuple[ComponentProcess, ComponentProcess],
) -> None:
    a, b = pair
    config = ClientConfig(server=a.url, other_servers=(b.url,))
    async with ApiClient(config) as client:
        await client.create(CONFIG_MAPS, {"metadata": {"name": "first"}}, namespace="default")
        await a.akill()
        # a write whose connection is refused was never sent: it goes to B at once
        await client.create(CONFIG_MAPS, {"metadata": {"name": "second"}}, namespace="default")
        assert client.server == b.url
        names = {
            cm["metadata"]["name"]
            for cm in (await client.list(CONFIG_MAPS, namespace="default"))["items"]
        }
    assert {"first", "second"} <= names
