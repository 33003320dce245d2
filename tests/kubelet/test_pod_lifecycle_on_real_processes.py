"""A real apiserver and kubelet running pods as real processes: what a Kubernetes user sees."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from importlib.metadata import version

import aiohttp
import pytest

from kubelite.testing.waiting import apoll_until
from tests import factories
from tests.factories import Obj, sh
from tests.kubelet.conftest import Cluster
from tests.kubelet.pods import (
    container_pid,
    create_and_wait,
    cstatus,
    follow_log_until,
    phase,
    pod_log,
)
from tests.kubelet.waits import pods_rt, wait_for_object, wait_process_exit

pytestmark = [pytest.mark.e2e]


async def test_busybox_pod_runs_and_its_log_holds_hello(cluster: Cluster) -> None:
    p = await create_and_wait(
        cluster,
        factories.pod(
            "hello", sh("echo hello; sleep 3600"), namespace="default", nodeName=cluster.node
        ),
        lambda p: phase(p) == "Running",
    )
    status = p["status"]
    assert status["podIP"].startswith("127.") and status["hostIP"] == "127.0.0.1"
    assert status["startTime"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    cs = cstatus(p)
    assert cs["ready"] and cs["started"] and cs["restartCount"] == 0
    assert "running" in cs["state"] and cs["containerID"].startswith("process://")
    assert cs["image"] == "busybox" and cs["imageID"].startswith("busybox@sha256:")
    # Running means the process started, not that its echo has reached the log yet
    await apoll_until(
        lambda: _holds(pod_log(cluster, "hello"), "hello"), what="hello in the pod's log"
    )


async def _holds(text: Awaitable[str], part: str) -> bool:
    return part in await text


async def test_nginx_pod_answers_http_on_its_pod_ip(cluster: Cluster) -> None:
    web = {"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}
    p = await create_and_wait(
        cluster,
        factories.pod("web", web, namespace="default", nodeName=cluster.node),
        lambda p: phase(p) == "Running",
    )
    ip = p["status"]["podIP"]
    # Running means the process started; it listens once nginx says so in its log
    await follow_log_until(cluster, "web", "start worker processes")
    async with aiohttp.ClientSession() as session, session.get(f"http://{ip}:80/") as resp:
        assert resp.status == 200
        assert resp.headers["Server"] == f"kubelite-webserver/{version('kubelite')}"
        assert "Welcome to nginx!" in await resp.text()
    await follow_log_until(cluster, "web", '"GET / HTTP/1.1" 200')  # nginx's access log


async def test_a_crashing_container_restarts_into_crash_loop_back_off(cluster: Cluster) -> None:
    p = await create_and_wait(
        cluster,
        factories.pod(
            "crash", sh("echo dying; exit 1"), namespace="default", nodeName=cluster.node
        ),
        lambda p: (
            (cstatus(p).get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
        ),
    )
    cs = cstatus(p)
    assert cs["restartCount"] >= 1
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert cs["lastState"]["terminated"]["reason"] == "Error"
    assert "back-off 10s restarting failed container=main" in cs["state"]["waiting"]["message"]
    assert phase(p) == "Running"  # restartPolicy Always: the pod is still meant to run
    assert "dying" in await pod_log(cluster, "crash")


async def test_restart_policy_never_ends_failed_with_the_exit_code(cluster: Cluster) -> None:
    p = await create_and_wait(
        cluster,
        factories.pod(
            "once", sh("exit 3"), namespace="default", nodeName=cluster.node, restartPolicy="Never"
        ),
        lambda p: phase(p) == "Failed",
    )
    terminated = cstatus(p)["state"]["terminated"]
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error"
    assert cstatus(p)["restartCount"] == 0
    ready = {c["type"]: c for c in p["status"]["conditions"]}["Ready"]
    assert ready["status"] == "False"


async def test_a_successful_run_once_pod_succeeds(cluster: Cluster) -> None:
    p = await create_and_wait(
        cluster,
        factories.pod(
            "job",
            sh("echo done"),
            namespace="default",
            nodeName=cluster.node,
            restartPolicy="OnFailure",
        ),
        lambda p: phase(p) == "Succeeded",
    )
    assert cstatus(p)["state"]["terminated"]["reason"] == "Completed"


async def test_an_unknown_image_backs_off_pulling(cluster: Cluster) -> None:
    body = factories.pod(
        "ghost",
        {"name": "main", "image": "no-such-image:1.0"},
        namespace="default",
        nodeName=cluster.node,
    )
    seen: list[str] = []

    def reason(p: Obj | None) -> bool:
        r = (cstatus(p).get("state") or {}).get("waiting", {}).get("reason")
        if r and (not seen or seen[-1] != r):
            seen.append(r)
        return r == "ImagePullBackOff"

    p = await create_and_wait(cluster, body, reason)
    assert "ErrImagePull" in seen
    assert phase(p) == "Pending"
    assert cstatus(p)["state"]["waiting"]["message"] == 'Back-off pulling image "no-such-image:1.0"'


async def test_delete_sends_sigterm_then_removes_the_pod(cluster: Cluster) -> None:
    marker = f"term-{uuid.uuid4().hex}"
    script = f"trap 'echo {marker}; exit 0' TERM; echo trapping; while :; do sleep 1; done"
    p = await create_and_wait(
        cluster,
        factories.pod("graceful", sh(script), namespace="default", nodeName=cluster.node),
        lambda p: phase(p) == "Running",
    )
    pid = container_pid(cluster, p)
    await follow_log_until(cluster, "graceful", "trapping")  # the trap is set
    # the trap's line reaches a log follower opened before the delete
    saw_term = asyncio.create_task(follow_log_until(cluster, "graceful", marker))
    await cluster.client.delete(pods_rt(), "graceful", namespace="default")
    await saw_term
    await wait_for_object(
        cluster.client, pods_rt(), "graceful", lambda p: p is None, namespace="default"
    )
    await wait_process_exit(pid)


async def test_an_image_change_restarts_that_container_with_the_new_image(cluster: Cluster) -> None:
    p = await create_and_wait(
        cluster,
        factories.pod(
            "swap",
            sh("echo $HOSTNAME; sleep 3600"),
            sh("sleep 3600", name="side"),
            namespace="default",
            nodeName=cluster.node,
            # PID 1 of its container without a TERM handler: SIGKILL ends it after the grace
            terminationGracePeriodSeconds=1,
        ),
        lambda p: phase(p) == "Running",
    )
    old_id = cstatus(p)["containerID"]
    side_id = cstatus(p, 1)["containerID"]
    containers = p["spec"]["containers"]
    containers[0]["image"] = "alpine:3.20"
    await cluster.client.patch(
        pods_rt(),
        "swap",
        {"spec": {"containers": containers}},
        namespace="default",
        patch_type="strategic",
    )
    p = await wait_for_object(
        cluster.client,
        pods_rt(),
        "swap",
        lambda p: cstatus(p).get("image") == "alpine:3.20" and "running" in cstatus(p)["state"],
        namespace="default",
    )
    assert p is not None
    assert cstatus(p)["containerID"] != old_id and cstatus(p)["restartCount"] == 1
    assert cstatus(p, 1)["containerID"] == side_id  # the other container was left alone
    assert cstatus(p)["lastState"]["terminated"]["containerID"] == old_id
