"""A container over its memory limit is OOMKilled (exit 137) and restarted with back-off.

Real apiserver and kubelet processes; the status is read with kubectl, as a user reads it. One
pod, two containers with the same 50Mi limit: the hog allocating in a loop ends ``OOMKilled``
and goes to ``CrashLoopBackOff``; the modest one beside it keeps running, never restarted.
"""

from __future__ import annotations

import json

import pytest

from tests import factories
from tests.kubectl.harness import Kubectl
from tests.kubelet.conftest import Cluster
from tests.kubelet.pods import cstatus
from tests.kubelet.waits import pods_rt, wait_for_object

pytestmark = [pytest.mark.e2e]

HOG = """
import time
heap = []
while True:
    heap.append(b"x" * (1 << 20))
    time.sleep(0.002)
"""


def limited(name: str, image: str, command: list[str]) -> dict[str, object]:
    return factories.container(
        name, image, command=command, resources={"limits": {"memory": "50Mi"}}
    )


async def test_a_memory_hog_is_oomkilled_and_backs_off(cluster: Cluster) -> None:
    pod = factories.pod(
        "hog",
        limited("hog", "python:3.12", ["python", "-c", HOG]),
        limited("modest", "busybox", ["sleep", "3600"]),
        namespace="default",
        nodeName=cluster.node,
        terminationGracePeriodSeconds=1,
    )
    await cluster.client.create(pods_rt(), pod, namespace="default")

    def backing_off(p: dict[str, object] | None) -> bool:
        waiting = cstatus(p).get("state", {}).get("waiting") or {}
        return waiting.get("reason") == "CrashLoopBackOff"

    await wait_for_object(
        cluster.client, pods_rt(), "hog", backing_off, namespace="default", within=60
    )
    k = Kubectl.on(cluster.server, workdir=cluster.tmp)
    status = json.loads(k("get", "pod", "hog", "-o", "json").stdout)["status"]
    hog, modest = sorted(status["containerStatuses"], key=lambda s: s["name"])
    assert hog["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    terminated = hog["lastState"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137)
    assert hog["restartCount"] >= 1
    assert "running" in modest["state"] and modest["restartCount"] == 0
