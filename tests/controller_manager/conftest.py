"""Fixtures: a real apiserver process (memory store) and a real controller-manager process.

``cluster`` yields a ``Cluster`` with the apiserver, the controller-manager process (started
with the test's ``cm_args``, default none) and an ``ApiClient`` for the test to act and watch
through. A test whose pods must be scheduled and run calls ``await cluster.start_nodes(...)``:
the real scheduler and one real ``kubelet --runtime sim`` process per node, each renewing its
Lease and posting status every second; it returns once every node is Ready. Stopping a node is
``kill()`` of its kubelet (as if the process died), bringing it back is ``start()``. Every
process's log is printed at teardown, so a failing test shows it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from client.rest import ApiClient
from kubelite.testing import ComponentProcess, Processes
from kubelite.testing.waiting import Watcher
from tests.controller_manager.harness import NODES, ready_of

SIM_KUBELET_ARGS = ("--node-lease-renew-interval=1s", "--node-status-update-frequency=1s")
"""Heartbeats every second: a node-monitor grace period of a few seconds is a wide margin."""


@dataclass
class Cluster:
    api: ComponentProcess
    cm: ComponentProcess
    client: ApiClient
    tmp_path: Path
    processes: Processes
    scheduler: ComponentProcess | None = None
    kubelets: dict[str, ComponentProcess] = field(default_factory=dict)

    def new_cm(self, *args: str, server: str | None = None) -> ComponentProcess:
        """Another controller-manager process (not started) with its own log."""
        return self.processes.controller_manager(server or self.api.url, args=args, start=False)

    async def start_nodes(self, *names: str) -> dict[str, ComponentProcess]:
        """The real scheduler (once) and a sim kubelet per node in ``names``, all Ready."""
        if self.scheduler is None:
            self.scheduler = await asyncio.to_thread(
                self.processes.scheduler, self.api.url, args=["--leader-elect=false"]
            )
        for name in names:
            self.kubelets[name] = await asyncio.to_thread(
                self.processes.kubelet, self.api.url, name, args=SIM_KUBELET_ARGS
            )
        async with Watcher(self.client, NODES) as nodes:
            await nodes.wait_until(
                lambda _o: all(
                    (ready_of(nodes.get(n) or {}) or {}).get("status") == "True" for n in names
                ),
                what=f"nodes {', '.join(names)} Ready",
            )
        return {name: self.kubelets[name] for name in names}


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ()


@pytest.fixture
async def cluster(
    kubelite_processes: Processes, tmp_path: Path, cm_args: tuple[str, ...]
) -> AsyncIterator[Cluster]:
    api = kubelite_processes.apiserver(store="memory://")
    cm = kubelite_processes.controller_manager(api.url, args=cm_args)
    client = ApiClient(server=api.url)
    try:
        yield Cluster(
            api=api, cm=cm, client=client, tmp_path=tmp_path, processes=kubelite_processes
        )
    finally:
        await client.close()
        kubelite_processes.stop_all()
        print(kubelite_processes.tails(80))
