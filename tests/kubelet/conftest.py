"""Fixtures for kubelet tests: runtimes over a temporary state dir, torn down without orphans."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from api.registry import REGISTRY
from client.rest import ApiClient
from kubelite.testing import ComponentProcess, Processes
from services.kubelet.runtime.base import ContainerConfig, ContainerRecord, PodSandbox
from services.kubelet.runtime.images import ImageCatalog, ImageStore
from services.kubelet.runtime.process import ProcessRuntime
from services.kubelet.runtime.sim import SimRuntime
from tests.conftest import StartApiServer
from tests.kubelet.waits import kill_container_processes, wait_for_object


@pytest.fixture
async def process_runtime(tmp_path: Path) -> AsyncIterator[ProcessRuntime]:
    images = ImageStore(catalog=ImageCatalog(), state_dir=tmp_path)
    rt = ProcessRuntime(state_dir=tmp_path, pod_cidr="127.201.0.0/16", images=images)
    await rt.start()
    try:
        yield rt
    finally:
        if not rt.closed:
            for uid in rt.list_pod_uids():
                await rt.remove_pod_sandbox(uid)
            await rt.close()
        kill_container_processes(tmp_path)


@pytest.fixture
async def unsandboxed_runtime(tmp_path: Path) -> AsyncIterator[ProcessRuntime]:
    """A process runtime with ``--sandbox=off``: containers are plain host processes."""
    state = tmp_path / "unsandboxed"
    images = ImageStore(catalog=ImageCatalog(), state_dir=state)
    rt = ProcessRuntime(state_dir=state, pod_cidr="127.203.0.0/16", images=images, sandbox="off")
    await rt.start()
    try:
        yield rt
    finally:
        for uid in rt.list_pod_uids():
            await rt.remove_pod_sandbox(uid)
        await rt.close()
        kill_container_processes(state)


@pytest.fixture
async def sim_runtime() -> AsyncIterator[SimRuntime]:
    rt = SimRuntime(pod_cidr="127.202.0.0/24")
    await rt.start()
    yield rt
    await rt.close()


def sandbox(name: str = "demo", uid: str | None = None) -> PodSandbox:
    return PodSandbox(uid=uid or f"uid-{name}", namespace="default", name=name)


async def run(
    rt: ProcessRuntime, *command: str, image: str = "busybox", **kw: object
) -> ContainerRecord:
    """Pull ``image`` and start ``command`` in it, in the ``sandbox()`` pod."""
    ref, _ = await rt.pull_image(image, policy="IfNotPresent")
    cfg = ContainerConfig(name=str(kw.pop("name", "main")), image=image, command=command, **kw)  # type: ignore[arg-type]
    return await rt.start_container(sandbox(), cfg, image=ref)


@dataclass
class Cluster:
    """A real apiserver and kubelet (process runtime) on loopback, and a client for them."""

    server: str
    client: ApiClient
    kubelet: ComponentProcess
    node: str
    tmp: Path

    def restart_kubelet(self) -> None:
        self.kubelet.kill()
        self.kubelet.start()


def _pod_cidr() -> str:
    # a /24 of its own per test, so tests on a busy machine never share a pod address
    return f"127.{random.randint(150, 199)}.{random.randint(0, 255)}.0/24"


StartKubelet = Callable[..., ComponentProcess]


@pytest.fixture
def start_kubelet(kubelite_processes: Processes, tmp_path: Path) -> Iterator[StartKubelet]:
    """``start_kubelet(server, node, runtime=..., args=...)``: a running kubelet; at teardown
    every kubelet is stopped, then any container process still alive is killed."""
    started: list[ComponentProcess] = []

    def start(server: str, node: str, **kw: Any) -> ComponentProcess:
        kubelet = kubelite_processes.kubelet(server, node, **kw)
        started.append(kubelet)
        return kubelet

    yield start
    for kubelet in started:
        kubelet.stop()
    kill_container_processes(tmp_path)


@pytest.fixture
async def cluster(
    apiserver_process: StartApiServer, tmp_path: Path, start_kubelet: StartKubelet
) -> AsyncIterator[Cluster]:
    api = apiserver_process(store="memory://")
    node = f"node-{random.randint(1000, 9999)}"
    kubelet = start_kubelet(api.url, node, runtime="process", args=["--pod-cidr", _pod_cidr()])
    client = ApiClient(server=api.url)
    try:
        nodes = REGISTRY.get("", "v1", "nodes")
        assert nodes is not None
        await wait_for_object(client, nodes, node, lambda n: n is not None, within=30)
        yield Cluster(server=api.url, client=client, kubelet=kubelet, node=node, tmp=tmp_path)
    finally:
        await client.close()
