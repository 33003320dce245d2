"""The stock kubectl drives a StatefulSet on kubelite as on Kubernetes — ``apply``, ``set
image``, ``rollout status|history|undo|restart``, ``scale`` — against real apiserver,
controller-manager, scheduler and sim kubelet processes. A RollingUpdate with a partition only
replaces ordinals at or above it, highest first; ``rollout undo`` brings the old template (and
its ControllerRevision, renumbered) back. kubectl runs on a thread so the test's watches keep
going."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import PODS, Obj, ready, rt
from tests.kubectl.harness import Kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.kubectl, pytest.mark.timeout(240)]

STATEFULSETS = rt("apps", "StatefulSet")
REVISIONS = rt("apps", "ControllerRevision")

MANIFEST = """\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  replicas: 3
  serviceName: web
  selector:
    matchLabels: {app: web}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {partition: 2}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: nginx
"""


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--controllers=statefulset,garbagecollector",)


def image_of(pod: Obj) -> str:
    return str(pod["spec"]["containers"][0]["image"])


def ordinal(pod: Obj) -> int:
    return int(pod["metadata"]["name"].rsplit("-", 1)[1])


def images(pods: list[Obj]) -> dict[int, str]:
    """Ordinal -> image of the live pods."""
    return {ordinal(p): image_of(p) for p in pods if not p["metadata"].get("deletionTimestamp")}


def all_ready(pods: list[Obj], count: int) -> bool:
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return len(live) == count and all(
        p["status"].get("phase") == "Running" and ready(p) for p in live
    )


async def test_partitioned_rollout_full_rollout_undo_restart_and_scale(
    cluster: Cluster, tmp_path: Path
) -> None:
    kubectl = Kubectl.on(cluster.api.url, workdir=tmp_path)

    async def run(*args: str, stdin: str | None = None) -> str:
        return (await asyncio.to_thread(kubectl, *args, stdin=stdin)).stdout

    client = cluster.client
    await cluster.start_nodes("node1", "node2")
    deleted: list[str] = []
    below_partition: list[str] = []
    partition = {"value": 2}

    def check(_type: str, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp") and (not deleted or deleted[-1] != name):
            deleted.append(name)
        if image_of(pod) == "busybox" and ordinal(pod) < partition["value"]:
            below_partition.append(name)

    async with (
        Watcher(
            client, PODS, namespace="default", label_selector="app=web", on_event=check
        ) as pods,
        Watcher(client, STATEFULSETS, namespace="default") as sets,
    ):
        await run("apply", "-f", "-", stdin=MANIFEST)
        out = await run("rollout", "status", "sts/web", "--timeout=90s")
        assert "partitioned roll out complete: 3 new pods have been updated" in out
        first = sets.objects()[0]["status"]["updateRevision"]

        # partition 2: only web-2 moves to the new template
        await run("set", "image", "sts/web", "app=busybox")
        out = await run("rollout", "status", "sts/web", "--timeout=90s")
        assert "partitioned roll out complete: 1 new pods have been updated" in out
        await pods.wait_until(
            lambda o: all_ready(o, 3) and images(o) == {0: "nginx", 1: "nginx", 2: "busybox"},
            what="web-2 on busybox, web-0 and web-1 still on nginx",
        )
        status = sets.objects()[0]["status"]
        assert status["currentRevision"] == first != status["updateRevision"]
        assert status["updatedReplicas"] == 1 and status["currentReplicas"] == 2
        second = status["updateRevision"]

        # partition 0: the rest follows, highest ordinal first
        partition["value"] = 0
        deleted.clear()
        await run(
            "patch",
            "sts/web",
            "-p",
            '{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}',
        )
        out = await run("rollout", "status", "sts/web", "--timeout=90s")
        assert "partitioned roll out complete: 3 new pods have been updated" in out
        await pods.wait_until(
            lambda o: all_ready(o, 3) and set(images(o).values()) == {"busybox"},
            what="every pod on busybox",
        )
        assert deleted == ["web-1", "web-0"]
        got = await sets.wait_until(
            lambda o: o[0]["status"].get("currentRevision") == second,
            what="second revision current",
        )
        assert got[0]["status"]["currentReplicas"] == 3

        history = await run("rollout", "history", "sts/web")
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]

        # undo: back to nginx, the first revision renumbered 3
        await run("rollout", "undo", "sts/web")
        await pods.wait_until(
            lambda o: all_ready(o, 3) and set(images(o).values()) == {"nginx"},
            what="every pod back on nginx",
        )
        got = await sets.wait_until(
            lambda o: (
                o[0]["status"].get("currentRevision") == first
                and o[0]["status"].get("updateRevision") == first
            ),
            what="the first revision current again",
        )
        revision = await client.get(REVISIONS, first, namespace="default")
        assert revision["revision"] == 3
        history = await run("rollout", "history", "sts/web")
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]

        # restart: a new revision (the restartedAt annotation), every pod replaced
        uids = {p["metadata"]["uid"] for p in pods.objects()}
        await run("rollout", "restart", "sts/web")
        out = await run("rollout", "status", "sts/web", "--timeout=90s")
        assert "partitioned roll out complete: 3 new pods have been updated" in out
        await pods.wait_until(
            lambda o: all_ready(o, 3) and not uids & {p["metadata"]["uid"] for p in o},
            what="three new pods after the restart",
        )
        for pod in pods.objects():
            assert "kubectl.kubernetes.io/restartedAt" in pod["metadata"]["annotations"]

        # scale through the scale subresource
        await run("scale", "sts/web", "--replicas=1")
        await pods.wait_until(
            lambda o: [p["metadata"]["name"] for p in o] == ["web-0"], what="only web-0 left"
        )
        table = await run("get", "sts", "web")
        assert table.split("\n")[1].split()[:2] == ["web", "1/1"]
