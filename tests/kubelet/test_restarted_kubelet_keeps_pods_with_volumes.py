"""A restarted kubelet re-adopts a pod with volumes and env references without restarting it,
even when a ConfigMap its env reads changed while the kubelet was away, and refreshes the
ConfigMap's volume.

Real apiserver and kubelet processes; the kubelet is SIGKILLed and started again on the same
state dir; the refreshed file is read with ``kubectl exec ... cat``.
"""

from __future__ import annotations

import pytest

from kubelite.testing.waiting import poll_until
from tests import factories
from tests.factories import sh
from tests.kubelet.conftest import Cluster
from tests.kubelet.pod_config import exec_out, kubectl
from tests.kubelet.pods import create_and_wait, cstatus, phase
from tests.kubelet.waits import pods_rt

pytestmark = [pytest.mark.e2e]


async def test_readopted_pod_keeps_running_and_its_volume_follows(cluster: Cluster) -> None:
    k = kubectl(cluster)
    k("create", "configmap", "kept", "--from-literal=v=1")
    container = sh("sleep 3600") | {
        "env": [{"name": "V", "valueFrom": {"configMapKeyRef": {"name": "kept", "key": "v"}}}],
        "volumeMounts": [
            {"name": "cfg", "mountPath": "/etc/kept"},
            {"name": "scratch", "mountPath": "/scratch"},
        ],
    }
    p = await create_and_wait(
        cluster,
        factories.pod(
            "steady",
            container,
            namespace="default",
            nodeName=cluster.node,
            volumes=[
                {"name": "cfg", "configMap": {"name": "kept"}},
                {"name": "scratch", "emptyDir": {}},
            ],
        ),
        lambda p: phase(p) == "Running",
    )
    cluster.kubelet.kill()
    k("patch", "configmap", "kept", "-p", '{"data": {"v": "2"}}')  # while the kubelet is away
    cluster.kubelet.start()
    poll_until(
        lambda: exec_out(k, "steady", "cat", "/etc/kept/v") == "2",
        what="the restarted kubelet's refresh of the volume",
    )
    now = await cluster.client.get(pods_rt(), "steady", namespace="default")
    assert cstatus(now)["containerID"] == cstatus(p)["containerID"]
    assert cstatus(now)["restartCount"] == 0
    assert exec_out(k, "steady", "printenv", "V") == "1\n"
