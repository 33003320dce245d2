"""Readiness probes gate Ready; a failing liveness probe restarts the container."""

from __future__ import annotations

import pytest

from tests import factories
from tests.factories import sh
from tests.kubectl.harness import Kubectl
from tests.kubelet.conftest import Cluster
from tests.kubelet.pods import create_and_wait, cstatus, phase
from tests.kubelet.waits import pods_rt, wait_for_object

pytestmark = [pytest.mark.e2e]


def ready(p: dict | None) -> str | None:
    conditions = ((p or {}).get("status") or {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), None)


async def test_readiness_probe_gates_ready(cluster: Cluster) -> None:
    # the probe and the flag are inside the pod (its own /tmp): kubectl exec sets and clears it
    container = sh("sleep 3600")
    container["readinessProbe"] = {
        "exec": {"command": ["test", "-f", "/tmp/ready-flag"]},
        "periodSeconds": 1,
        "failureThreshold": 1,
    }
    p = await create_and_wait(
        cluster,
        factories.pod(
            "gated",
            container,
            namespace="default",
            nodeName=cluster.node,
            terminationGracePeriodSeconds=1,
        ),
        lambda p: phase(p) == "Running",
    )
    assert ready(p) == "False" and cstatus(p)["ready"] is False
    kubectl = Kubectl.on(cluster.server, workdir=cluster.tmp)
    kubectl("exec", "gated", "--", "touch", "/tmp/ready-flag")
    p = await wait_for_object(
        cluster.client, pods_rt(), "gated", lambda p: ready(p) == "True", namespace="default"
    )
    assert cstatus(p)["ready"] is True
    kubectl("exec", "gated", "--", "rm", "/tmp/ready-flag")
    await wait_for_object(
        cluster.client, pods_rt(), "gated", lambda p: ready(p) == "False", namespace="default"
    )


async def test_http_readiness_probe_on_nginx(cluster: Cluster) -> None:
    web = {
        "name": "web",
        "image": "nginx",
        "ports": [{"name": "http", "containerPort": 80}],
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
    }
    await create_and_wait(
        cluster,
        factories.pod("probed", web, namespace="default", nodeName=cluster.node),
        lambda p: ready(p) == "True",
    )


async def test_failing_liveness_probe_restarts_the_container(cluster: Cluster) -> None:
    container = sh("sleep 3600")
    container["livenessProbe"] = {
        "tcpSocket": {"port": 9},  # nothing listens there
        "periodSeconds": 1,
        "failureThreshold": 2,
    }
    p = await create_and_wait(
        cluster,
        factories.pod(
            "unhealthy",
            container,
            namespace="default",
            nodeName=cluster.node,
            terminationGracePeriodSeconds=1,
        ),
        lambda p: cstatus(p).get("restartCount", 0) >= 1,
    )
    assert cstatus(p)["lastState"]["terminated"]["exitCode"] in (137, 143)
