"""The runtime contract (``runtime/base.py``), run against every runtime: process (sandboxed and
with ``--sandbox=off``) and sim."""

from __future__ import annotations

import ipaddress

import pytest

from services.kubelet.runtime.base import ContainerConfig, Runtime
from tests.kubelet.conftest import sandbox

LONG_RUNNING = ("sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait")
"""Stops at SIGTERM also as PID 1 of a sandbox (where a signal without a handler is ignored)."""


@pytest.fixture(params=["process", "unsandboxed", "sim"])
def runtime(request: pytest.FixtureRequest) -> Runtime:
    return request.getfixturevalue(f"{request.param}_runtime")


def config(name: str = "main", *, attempt: int = 0) -> ContainerConfig:
    return ContainerConfig(name=name, image="busybox:1.36", command=LONG_RUNNING, attempt=attempt)


async def test_runtime_satisfies_the_protocol(runtime: Runtime) -> None:
    assert isinstance(runtime, Runtime)
    assert runtime.version.startswith(runtime.name + "://")


async def test_runtime_says_whether_pods_are_sandboxed(runtime: Runtime) -> None:
    """What the kubelet reads to warn a pod that runs unsandboxed: a reason exactly when a
    process runtime is not sandboxed (sim runs nothing, so it has nothing to warn about)."""
    sandboxed = runtime.sandboxed  # type: ignore[attr-defined]
    reason = runtime.sandbox_unavailable_reason  # type: ignore[attr-defined]
    assert isinstance(sandboxed, bool)
    assert (reason is not None) == (runtime.name == "process" and not sandboxed)


async def test_each_pod_gets_its_own_loopback_ip_and_keeps_it(runtime: Runtime) -> None:
    ip1 = await runtime.run_pod_sandbox(sandbox("a"))
    ip2 = await runtime.run_pod_sandbox(sandbox("b"))
    assert ip1 != ip2
    assert await runtime.run_pod_sandbox(sandbox("a")) == ip1
    for ip in (ip1, ip2):
        assert ipaddress.ip_address(ip) in ipaddress.ip_network("127.0.0.0/8")
    assert runtime.pod_ip("uid-a") == ip1
    assert sorted(runtime.list_pod_uids()) == ["uid-a", "uid-b"]


async def test_pull_reports_presence_by_policy(runtime: Runtime) -> None:
    image, present = await runtime.pull_image("busybox:1.36", policy="IfNotPresent")
    assert not present and image.image_id
    _, present = await runtime.pull_image("busybox:1.36", policy="IfNotPresent")
    assert present
    _, present = await runtime.pull_image("busybox:1.36", policy="Always")
    assert not present


async def test_started_container_runs_until_stopped(runtime: Runtime) -> None:
    sb = sandbox()
    image, _ = await runtime.pull_image("busybox:1.36", policy="IfNotPresent")
    record = await runtime.start_container(sb, config(), image=image)
    assert record.running
    assert record.container_id.startswith(f"{runtime.name}://")
    assert record.image == "busybox:1.36" and record.image_id == image.image_id
    assert [r.container_id for r in runtime.list_containers(sb.uid)] == [record.container_id]

    stopped = await runtime.stop_container(record.container_id, grace_period=5)
    assert not stopped.running
    assert isinstance(stopped.exit_code, int)
    waited = await runtime.wait_container(record.container_id)
    assert waited.finished_at == stopped.finished_at


async def test_restarts_are_new_instances_listed_by_attempt(runtime: Runtime) -> None:
    sb = sandbox()
    image, _ = await runtime.pull_image("busybox:1.36", policy="IfNotPresent")
    first = await runtime.start_container(sb, config(), image=image)
    await runtime.stop_container(first.container_id, grace_period=0)
    second = await runtime.start_container(sb, config(attempt=1), image=image)
    listed = runtime.list_containers(sb.uid)
    assert [(r.attempt, r.running) for r in listed] == [(0, False), (1, True)]
    assert second.container_id != first.container_id


async def test_removing_the_sandbox_stops_and_forgets_everything(runtime: Runtime) -> None:
    sb = sandbox()
    image, _ = await runtime.pull_image("busybox:1.36", policy="IfNotPresent")
    record = await runtime.start_container(sb, config(), image=image)
    await runtime.remove_pod_sandbox(sb.uid)
    assert runtime.list_containers(sb.uid) == []
    assert sb.uid not in runtime.list_pod_uids()
    assert runtime.pod_ip(sb.uid) is None
    assert record.container_id not in {r.container_id for r in runtime.list_containers()}
    await runtime.remove_pod_sandbox(sb.uid)  # idempotent


async def test_exec_reports_the_exit_code(runtime: Runtime) -> None:
    sb = sandbox()
    image, _ = await runtime.pull_image("busybox:1.36", policy="IfNotPresent")
    record = await runtime.start_container(sb, config(), image=image)
    session = await runtime.exec(
        record.container_id, ["sh", "-c", "exit 0"], tty=False, stdin=False
    )
    while (await session.read_output()) != (0, b""):
        pass
    assert await session.wait() == 0
