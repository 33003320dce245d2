"""Fixtures for the resource-metrics and autoscaling tests.

* ``cluster``: ``tests/e2e/cluster.py``'s whole cluster of real processes — exactly what
  ``kubelite up`` starts (the process runtime, the apiserver reaching the kubelets over TLS
  with its client certificate, as metrics-server would), stopped with the orphan check;
  ``kubectl`` is the stock binary against its plain port.
* ``sim_cluster``: a real apiserver (memory store), scheduler, controller-manager (every
  controller but the autoscaler) and one ``sim`` kubelet, whose pods "use" what their
  ``kubelite.io/simulated-cpu`` annotation says; ``autoscaler`` runs the
  horizontal-pod-autoscaling controller in the test process on a ``ManualClock``, so the
  sync period and the stabilisation window pass when the test says.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from client.events import EventRecorder
from client.rest import ApiClient
from kubelite.testing import Processes
from services.controller_manager.clock import ManualClock
from services.controller_manager.horizontal_pod_autoscaler import (
    HorizontalPodAutoscalerController,
)
from services.controller_manager.informers import SharedInformers
from tests.e2e.cluster import Cluster, started_cluster
from tests.kubectl.harness import Kubectl


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with started_cluster(tmp_path) as c:
        yield c


@pytest.fixture
def kubectl(cluster: Cluster, tmp_path: Path) -> Kubectl:
    return Kubectl.on(cluster.server, workdir=tmp_path)


@dataclass
class SimCluster:
    client: ApiClient
    server: str


@pytest.fixture
async def sim_cluster(kubelite_processes: Processes) -> AsyncIterator[SimCluster]:
    api = kubelite_processes.apiserver(store="memory://")
    kubelite_processes.controller_manager(
        api.url, args=["--controllers=*,-horizontalpodautoscaling", "--leader-elect=false"]
    )
    kubelite_processes.scheduler(api.url, args=["--leader-elect=false"])
    kubelite_processes.kubelet(
        api.url,
        "node1",
        args=["--node-lease-renew-interval=1s", "--node-status-update-frequency=1s"],
    )
    client = ApiClient(server=api.url)
    try:
        yield SimCluster(client=client, server=api.url)
    finally:
        await client.close()
        kubelite_processes.stop_all()
        print(kubelite_processes.tails(80))


@pytest.fixture
async def autoscaler(sim_cluster: SimCluster) -> AsyncIterator[ManualClock]:
    """The autoscaler, in this process, on a clock only the test moves."""
    clock = ManualClock()
    informers = SharedInformers(sim_cluster.client)
    recorder = EventRecorder(sim_cluster.client, component="horizontal-pod-autoscaler")
    controller = HorizontalPodAutoscalerController(
        client=sim_cluster.client, informers=informers, recorder=recorder, clock=clock
    )
    informers.start()
    tasks = [recorder.start(), asyncio.create_task(controller.run(), name="autoscaler")]
    try:
        yield clock
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await informers.stop()
