"""The disruption controller, in a real controller-manager process, keeps PDB status true.

Only the ``disruption`` controller runs: the test builds the Deployment, its ReplicaSet and the
pods itself and reports each pod's status as a kubelet would (``pods/{name}/status``), so every
count the budget shows is one the test decided. The status is read back from the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import DEPLOYMENTS, EVENTS, PODS, RSS, rt
from tests.factories import (
    controlled_by,
    deployment,
    pod,
    pod_disruption_budget,
    replica_set,
)

Obj = dict[str, Any]

PDBS = rt("policy", "PodDisruptionBudget")
WEB = {"app": "web"}


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--controllers=disruption",)


async def report(cluster: Cluster, name: str, *, ready: bool) -> None:
    """What the kubelet would post: Running, Ready or not."""
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    status = {"phase": "Running", "conditions": [condition]}
    await cluster.client.patch(
        PODS, name, {"status": status}, namespace="default", subresource="status"
    )


async def web_deployment(cluster: Cluster, *, replicas: int, pods: int) -> list[Obj]:
    """Deployment ``web`` of ``replicas``, its ReplicaSet, and ``pods`` Ready pods of it."""
    client = cluster.client
    d = await client.create(DEPLOYMENTS, deployment("web", replicas=replicas), namespace="default")
    rs = await client.create(
        RSS, replica_set("web-1", replicas=replicas, labels=WEB, owner=d), namespace="default"
    )
    made = []
    for i in range(pods):
        member = controlled_by(pod(f"web-1-{i}", labels=WEB), rs)
        made.append(await client.create(PODS, member, namespace="default"))
        await report(cluster, f"web-1-{i}", ready=True)
    return made


async def status_becomes(
    cluster: Cluster, name: str, check: Callable[[Obj], bool], *, what: str
) -> Obj:
    """Await the budget's status (observed at its generation) satisfying ``check``."""
    async with Watcher(cluster.client, PDBS, namespace="default") as budgets:

        def holds(_objects: list[Obj]) -> bool:
            budget = budgets.get(f"default/{name}")
            if budget is None:
                return False
            status = budget.get("status") or {}
            observed = status.get("observedGeneration", 0) >= budget["metadata"]["generation"]
            return observed and check(status)

        await budgets.wait_until(holds, what=what)
        found = budgets.get(f"default/{name}")
        assert found is not None
        return dict(found["status"])


def counts(status: Obj) -> tuple[int, int, int, int]:
    """``(disruptionsAllowed, currentHealthy, desiredHealthy, expectedPods)``."""
    return (
        status["disruptionsAllowed"],
        status["currentHealthy"],
        status["desiredHealthy"],
        status["expectedPods"],
    )


def allowed_condition(status: Obj) -> tuple[str, str]:
    [cond] = [c for c in status["conditions"] if c["type"] == "DisruptionAllowed"]
    return cond["status"], cond["reason"]


async def test_min_available_over_a_deployment_allows_the_surplus(cluster: Cluster) -> None:
    await web_deployment(cluster, replicas=3, pods=3)
    await cluster.client.create(
        PDBS, pod_disruption_budget("web", selector=WEB, minAvailable=2), namespace="default"
    )
    status = await status_becomes(
        cluster, "web", lambda s: counts(s) == (1, 3, 2, 3), what="1 allowed of 3 healthy"
    )
    assert allowed_condition(status) == ("True", "SufficientPods")
    assert "disruptedPods" not in status

    await report(cluster, "web-1-2", ready=False)
    status = await status_becomes(
        cluster, "web", lambda s: counts(s) == (0, 2, 2, 3), what="none allowed once one is unready"
    )
    assert allowed_condition(status) == ("False", "InsufficientPods")

    # a restarted controller-manager (killed while a pod turned ready again) converges
    await asyncio.to_thread(cluster.cm.kill)
    await report(cluster, "web-1-2", ready=True)
    await asyncio.to_thread(cluster.cm.start)
    status = await status_becomes(
        cluster, "web", lambda s: counts(s) == (1, 3, 2, 3), what="1 allowed after the restart"
    )
    assert allowed_condition(status) == ("True", "SufficientPods")


async def test_percentages_and_max_unavailable_use_the_controller_scale(cluster: Cluster) -> None:
    # the Deployment wants 4 but only 3 pods exist (one is still to come)
    await web_deployment(cluster, replicas=4, pods=3)
    client = cluster.client
    await client.create(
        PDBS, pod_disruption_budget("web", selector=WEB, minAvailable="50%"), namespace="default"
    )
    await status_becomes(
        cluster, "web", lambda s: counts(s) == (1, 3, 2, 4), what="50% of 4 is 2: 1 allowed"
    )

    async def respec(spec: Obj) -> None:
        await client.patch(PDBS, "web", {"spec": spec}, namespace="default")

    await respec({"minAvailable": None, "maxUnavailable": 1})
    await status_becomes(
        cluster, "web", lambda s: counts(s) == (0, 3, 3, 4), what="4 - 1 = 3 desired: none"
    )
    await respec({"maxUnavailable": "30%"})
    await status_becomes(
        cluster, "web", lambda s: counts(s) == (1, 3, 2, 4), what="30% of 4 rounds up to 2"
    )
    # scaling the Deployment (not its pods) moves the expected count
    await client.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 2}}, namespace="default")
    await status_becomes(
        cluster, "web", lambda s: counts(s) == (2, 3, 1, 2), what="30% of 2 rounds up to 1"
    )


async def test_pods_without_a_known_controller_fail_safe(cluster: Cluster) -> None:
    client = cluster.client
    # an unmanaged pod: left out of the expected count, with a warning on the budget
    await client.create(PODS, pod("loner", labels=WEB), namespace="default")
    await report(cluster, "loner", ready=True)
    await client.create(
        PDBS, pod_disruption_budget("web", selector=WEB, maxUnavailable=1), namespace="default"
    )
    await status_becomes(
        cluster, "web", lambda s: counts(s) == (0, 1, 0, 0), what="nothing expected, none allowed"
    )
    # a pod whose controller does not exist: the budget cannot be computed and grants nothing
    ghost = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "gone",
             "uid": "9d3a8a4e-0000-4000-8000-000000000001"}}  # fmt: skip
    await client.create(PODS, controlled_by(pod("orphan", labels=WEB), ghost), namespace="default")
    status = await status_becomes(
        cluster,
        "web",
        lambda s: allowed_condition(s) == ("False", "SyncFailed"),
        what="SyncFailed",
    )
    [cond] = status["conditions"]
    assert cond["message"] == 'found no controllers for pod "orphan"'
    assert status["disruptionsAllowed"] == 0

    wanted = {
        ("PodDisruptionBudget", "UnmanagedPods"),
        ("PodDisruptionBudget", "CalculateExpectedPodCountFailed"),
    }
    async with Watcher(client, EVENTS, namespace="default") as events:
        await events.wait_until(
            lambda items: wanted <= {(e["involvedObject"]["kind"], e["reason"]) for e in items},
            what="UnmanagedPods and CalculateExpectedPodCountFailed events",
        )

    # an integer minAvailable needs no controller: the budget recovers
    await client.patch(
        PDBS, "web", {"spec": {"maxUnavailable": None, "minAvailable": 1}}, namespace="default"
    )
    status = await status_becomes(
        cluster, "web", lambda s: counts(s) == (0, 1, 1, 2), what="2 expected, 1 healthy"
    )
    assert allowed_condition(status) == ("False", "InsufficientPods")
    await report(cluster, "orphan", ready=True)
    status = await status_becomes(
        cluster, "web", lambda s: counts(s) == (1, 2, 1, 2), what="1 allowed"
    )
    assert allowed_condition(status) == ("True", "SufficientPods")
