"""In a real cluster an autoscaler made by ``kubectl autoscale`` scales a busy Deployment up.

``kubelite up``'s processes with the process runtime: a Deployment whose one pod spins a Python
busy loop against a 100m CPU request. ``kubectl autoscale`` (kubectl 1.33, which creates an
autoscaling/v2 object; with only 1.32 installed, whose ``autoscale`` creates autoscaling/v1, the
same object is applied as a v2 manifest) asks for 50% — a spinning process uses several times
its request, so the controller-manager's autoscaler, reading ``metrics.k8s.io`` on the real
clock, scales the Deployment to its maximum of 2, says why in a ``SuccessfulRescale`` event,
and ``kubectl get hpa`` shows Kubernetes' columns.
"""

from __future__ import annotations

import pytest

from api.registry import REGISTRY
from kubelite.testing.waiting import Watcher
from tests import factories
from tests.e2e.cluster import Cluster
from tests.kubectl.harness import Kubectl, kubectl_binary

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

DEPLOYMENTS = REGISTRY.require("apps", "Deployment")
EVENTS = REGISTRY.require("", "Event")


def spinning() -> dict[str, object]:
    body = factories.deployment("spin", replicas=1)
    body["spec"]["template"]["spec"]["containers"] = [  # type: ignore[index]
        factories.container(
            "spin", "python", cpu="100m", command=["python3", "-c", "while True: pass"]
        )
    ]
    return body


HPA = factories.horizontal_pod_autoscaler(
    "spin", target="spin", max_replicas=2, minReplicas=1, metrics=[factories.cpu_utilization(50)]
)


async def test_kubectl_autoscale_scales_a_busy_deployment_up(
    cluster: Cluster, kubectl: Kubectl
) -> None:
    kubectl.apply(spinning())
    if kubectl_binary(33) is not None:
        newer = Kubectl.on(cluster.server, workdir=kubectl.workdir, minor=33)
        made = newer("autoscale", "deployment", "spin", "--cpu-percent=50", "--min=1", "--max=2")
        assert "horizontalpodautoscaler.autoscaling/spin autoscaled" in made.stdout
    else:
        kubectl.apply(HPA)

    async with Watcher(cluster.client, DEPLOYMENTS, namespace="default") as deployments:
        await deployments.wait_until(
            lambda o: bool(o) and o[0]["spec"]["replicas"] == 2,
            what="spin scaled to 2",
            within=180,
        )
        # both pods running before the cluster stops (no container is left half-started)
        await deployments.wait_until(
            lambda o: (o[0].get("status") or {}).get("readyReplicas") == 2,
            what="both spin pods ready",
        )
    async with Watcher(cluster.client, EVENTS, namespace="default") as events:
        await events.wait_until(
            lambda o: any(
                e["reason"] == "SuccessfulRescale"
                and e["message"]
                == "New size: 2; reason: cpu resource utilization "
                "(percentage of request) above target"
                and e["source"]["component"] == "horizontal-pod-autoscaler"
                for e in o
            ),
            what="the autoscaler's SuccessfulRescale event",
        )

    header, row = (line.split() for line in kubectl("get", "hpa").stdout.splitlines()[:2])
    assert header == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    # TARGETS is "cpu: <current>%/50%" (two cells when split on spaces)
    assert row[:3] == ["spin", "Deployment/spin", "cpu:"], row
    assert row[3].endswith("%/50%") and row[4:6] == ["1", "2"], row
