"""apps/v1 ReplicaSets through the same controller (set-based selectors), and failed pods are
replaced (the failed pod stays, as Kubernetes leaves it) — against real processes."""

from __future__ import annotations

import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import EVENTS, PODS, RCS, RSS, Obj, active, owned_by

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


async def test_replicaset_with_set_based_selector(cluster: Cluster) -> None:
    client = cluster.client
    body = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "front"},
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "front"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "edge"]}],
            },
            "template": {
                "metadata": {"labels": {"app": "front", "tier": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
        },
    }
    async with (
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, RSS, namespace="default") as rss,
    ):
        rs = await client.create(RSS, body, namespace="default")

        def mine(o: list[Obj]) -> list[Obj]:
            return [p for p in o if owned_by(p, rs) and active(p)]

        await pods.wait_until(lambda o: len(mine(o)) == 3, what="3 pods of the ReplicaSet")
        await client.patch(RSS, "front", {"spec": {"replicas": 1}}, namespace="default")
        await pods.wait_until(lambda o: len(mine(o)) == 1 and len(o) == 1, what="1 pod left")
        await rss.wait_until(
            lambda o: (
                o[0]["status"].get("replicas") == 1
                and o[0]["status"].get("observedGeneration") == 2
            ),
            what="status of 1 at generation 2",
        )
    events = (await client.list(EVENTS, namespace="default"))["items"]
    assert {e["source"]["component"] for e in events} == {"replicaset-controller"}


async def test_failed_pod_is_replaced(cluster: Cluster) -> None:
    client = cluster.client
    async with Watcher(client, PODS, namespace="default") as pods:
        rc = await client.create(RCS, factories.rc("crashy", replicas=2), namespace="default")

        def mine(o: list[Obj]) -> list[Obj]:
            return [p for p in o if owned_by(p, rc)]

        got = await pods.wait_until(lambda o: len(mine(o)) == 2, what="2 pods")
        victim = got[0]["metadata"]["name"]
        pod = await client.get(PODS, victim, namespace="default")
        pod["status"]["phase"] = "Failed"
        await client.update_status(PODS, pod)
        got = await pods.wait_until(
            lambda o: sum(1 for p in mine(o) if active(p)) == 2 and len(mine(o)) == 3,
            what="a replacement beside the failed pod",
        )
        failed = [p for p in got if p["metadata"]["name"] == victim]
        assert failed and failed[0]["status"]["phase"] == "Failed"
