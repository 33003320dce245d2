"""A kubelet stopped while a container starts: the start is recorded, then handled like any other.

The report: a real-cluster test stopped while a pod was still starting, and the container's
process outlived the cluster. The process runtime spawned the container's shim in a thread;
cancelling the pod worker (the kubelet stopping) abandoned the await but not the thread, so the
container started with no record of it in the runtime — not stopped by ``--stop-pods-on-exit``
(``kubelite up``'s stop), not re-adopted by the next kubelet from a finished record.

Here the start is held where that happened: the shim has forked the container, whose exec an
``ExecGate`` holds, so the shim has not answered the kubelet. The kubelet gets SIGTERM, and the
exec goes on only once the kubelet says the cancelled start is being finished — or, as it did
before the fix, says it has stopped without it (the container then starts unknown to anyone,
and the assertions below see it outlive the kubelet). Then the design
holds for it as for every running container (``services/kubelet/service.py``):

* with ``--stop-pods-on-exit`` it is stopped before the kubelet exits: no process of the pod is
  left (psutil), and the runtime's record of the instance says it exited;
* without, it keeps running, and the next kubelet re-adopts that very process: the pod reports
  its container Running, not restarted.
"""

from __future__ import annotations

import contextlib
import json
import random
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from client.rest import ApiClient
from kubelite.testing import ComponentProcess
from kubelite.testing.waiting import apoll_until
from tests import factories
from tests.conftest import StartApiServer
from tests.kubelet.conftest import StartKubelet
from tests.kubelet.exec_gate import ExecGate
from tests.kubelet.pods import cstatus, phase
from tests.kubelet.waits import pods_rt, wait_for_object

pytestmark = [pytest.mark.e2e]

CANCELLED_START = "cancelled while its shim starts it"
"""What the process runtime logs when it finishes a start its caller gave up on."""
STOPPED = "kubelet: stopped"
"""What the kubelet logs when its stop is done (before it exits)."""
MARK = "KUBELITE_HELD_START"
"""An env variable only this test's container has: how psutil tells its processes apart."""

Obj = dict[str, Any]


@pytest.fixture
def held_command(tmp_path: Path) -> Iterator[tuple[Path, ExecGate]]:
    """A container command whose exec is held until the gate is released."""
    reason = ExecGate.unavailable()
    if reason is not None:
        pytest.skip(reason)
    script = tmp_path / "held-entrypoint"
    script.write_text("#!/bin/sh\nexec sleep 3600\n")
    script.chmod(0o755)
    gate = ExecGate(script)
    try:
        yield script, gate
    finally:
        gate.close()


async def _node(
    apiserver_process: StartApiServer, start_kubelet: StartKubelet, *flags: str
) -> tuple[ApiClient, ComponentProcess, str]:
    api = apiserver_process(store="memory://")
    node = f"node-{random.randint(1000, 9999)}"
    cidr = f"127.{random.randint(150, 199)}.{random.randint(0, 255)}.0/24"
    # unsandboxed: the held command lives under tmp_path, which a sandbox's private /tmp hides
    args = ["--pod-cidr", cidr, "--sandbox", "off", *flags]
    kubelet = start_kubelet(api.url, node, runtime="process", args=args)
    client = ApiClient(server=api.url)
    return client, kubelet, node


async def _stop_during_start(
    client: ApiClient, kubelet: ComponentProcess, *, node: str, command: Path, gate: ExecGate
) -> tuple[Obj, int, str]:
    """Create the pod, SIGTERM the kubelet while its container's exec is held, let the exec go
    on once the kubelet finishes the cancelled start, and wait for the kubelet's exit (0).
    The pod as created, the container's pid and its mark."""
    mark = secrets.token_hex(8)
    body = factories.pod(
        "held",
        factories.container(
            "main", "busybox", command=[str(command)], env=[{"name": MARK, "value": mark}]
        ),
        namespace="default",
        nodeName=node,
    )
    pod = await client.create(pods_rt(), body, namespace="default")
    pid = await gate.held()
    kubelet.send(signal.SIGTERM)
    try:
        # the kubelet finishing the cancelled start — or, as it did, stopping without it
        await apoll_until(
            _logged(kubelet, CANCELLED_START, STOPPED), what="the kubelet's stop", within=60
        )
    finally:
        gate.release()
    assert await kubelet.wait_exit(within=60) == 0, kubelet.tail()
    return pod, pid, mark


def _logged(kubelet: ComponentProcess, *needles: str) -> Any:
    async def said() -> bool:
        text = kubelet.log_path.read_text(errors="replace")
        return any(needle in text for needle in needles)

    return said


def _processes_marked(mark: str) -> list[psutil.Process]:
    """Live processes (zombies are not) whose environment carries ``mark``."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(MARK) == mark:
                found.append(proc)
    return found


def _instances(kubelet: ComponentProcess, pod: Obj) -> list[Obj]:
    """The runtime's records of the pod's container instances, from the kubelet's state dir."""
    assert kubelet.state_dir is not None
    containers = kubelet.state_dir / "pods" / pod["metadata"]["uid"] / "containers"
    return [
        json.loads(path.read_text())
        for path in sorted(containers.glob("*.json"))
        if not path.name.endswith((".pid.json", ".exit.json"))
    ]


async def test_stop_pods_on_exit_stops_a_container_that_was_starting(
    apiserver_process: StartApiServer,
    start_kubelet: StartKubelet,
    held_command: tuple[Path, ExecGate],
) -> None:
    client, kubelet, node = await _node(apiserver_process, start_kubelet, "--stop-pods-on-exit")
    try:
        pod, pid, mark = await _stop_during_start(
            client, kubelet, node=node, command=held_command[0], gate=held_command[1]
        )
    finally:
        await client.close()

    assert not _processes_marked(mark)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    (instance,) = _instances(kubelet, pod)
    assert instance["pid"] == pid  # the start was recorded ...
    assert instance["finishedAt"] is not None  # ... and the instance stopped with the others


async def test_container_that_was_starting_is_readopted_by_the_next_kubelet(
    apiserver_process: StartApiServer,
    start_kubelet: StartKubelet,
    held_command: tuple[Path, ExecGate],
) -> None:
    client, kubelet, node = await _node(apiserver_process, start_kubelet)
    try:
        pod, pid, mark = await _stop_during_start(
            client, kubelet, node=node, command=held_command[0], gate=held_command[1]
        )
        # containers keep running across a kubelet restart: this one too, recorded as running
        assert [p.pid for p in _processes_marked(mark)] == [pid]
        (instance,) = _instances(kubelet, pod)
        assert (instance["pid"], instance["finishedAt"]) == (pid, None)

        await kubelet.astart()
        running = await wait_for_object(
            client,
            pods_rt(),
            "held",
            lambda p: phase(p) == "Running",
            namespace="default",
            within=60,
        )
        assert running is not None
        assert cstatus(running)["containerID"] == instance["containerID"]
        assert cstatus(running)["restartCount"] == 0
        assert [p.pid for p in _processes_marked(mark)] == [pid]
    finally:
        await client.close()
