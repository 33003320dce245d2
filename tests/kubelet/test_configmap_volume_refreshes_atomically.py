"""A changed ConfigMap reaches a running pod's volume by Kubernetes' ``..data`` symlink swap;
the container's env, read once at its start, does not change.

Real apiserver and kubelet processes; the update is a ``kubectl patch``; the file is read with
``kubectl exec ... cat`` at the container's path, the swap on the node's volume directory.
"""

from __future__ import annotations

import os

import pytest

from kubelite.testing.waiting import poll_until
from tests import factories
from tests.factories import sh
from tests.kubelet.conftest import Cluster
from tests.kubelet.pod_config import exec_out, kubectl, pod_env
from tests.kubelet.pods import create_and_wait, cstatus, phase
from tests.kubelet.waits import pods_rt

pytestmark = [pytest.mark.e2e]


async def test_an_update_swaps_the_files_and_leaves_env_alone(cluster: Cluster) -> None:
    k = kubectl(cluster)
    k("create", "configmap", "live", "--from-literal=level=1", "--from-literal=gone=soon")
    container = sh("sleep 3600") | {
        "env": [{"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "live", "key": "level"}}}],
        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/live"}],
    }  # fmt: skip
    p = await create_and_wait(
        cluster,
        factories.pod(
            "follower",
            container,
            namespace="default",
            nodeName=cluster.node,
            volumes=[{"name": "cfg", "configMap": {"name": "live"}}],
        ),
        lambda p: phase(p) == "Running",
    )
    volume = (
        cluster.kubelet.state_dir / "pods" / p["metadata"]["uid"] / "volumes"
        / "kubernetes.io~configmap" / "cfg"
    )  # fmt: skip
    first = os.readlink(volume / "..data")
    assert exec_out(k, "follower", "cat", "/etc/live/level") == "1"

    k("patch", "configmap", "live", "--type=json", "-p",
      '[{"op": "replace", "path": "/data/level", "value": "2"},'
      ' {"op": "remove", "path": "/data/gone"}]')  # fmt: skip

    poll_until(
        lambda: exec_out(k, "follower", "cat", "/etc/live/level") == "2",
        what="the new level in the mounted file",
    )
    second = os.readlink(volume / "..data")
    assert second != first and second.startswith("..20")
    assert not (volume / first).exists()  # the old version's directory is gone
    assert exec_out(k, "follower", "ls", "/etc/live").split() == ["level"]
    assert {e.name for e in volume.iterdir()} == {"..data", second, "level"}

    assert pod_env(k, "follower")["LEVEL"] == "1"  # env is read once, at the start
    now = await cluster.client.get(pods_rt(), "follower", namespace="default")
    assert (
        cstatus(now)["restartCount"] == 0
        and cstatus(now)["containerID"] == cstatus(p)["containerID"]
    )
