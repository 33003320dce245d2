"""Deleting a namespace deletes everything in it (RCs, Deployments, their ReplicaSets and pods,
events), and only then the namespace itself — against real processes."""

from __future__ import annotations

import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import DEPLOYMENTS, EVENTS, NAMESPACES, PODS, RCS, RSS, active

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


async def test_namespace_is_emptied_then_removed(cluster: Cluster) -> None:
    client = cluster.client
    await client.create(NAMESPACES, {"metadata": {"name": "team"}})
    await cluster.start_nodes("node1")
    async with (
        Watcher(client, PODS, namespace="team") as pods,
        Watcher(client, NAMESPACES) as namespaces,
    ):
        await client.create(RCS, factories.rc("rc", replicas=2), namespace="team")
        await client.create(DEPLOYMENTS, factories.deployment("dep", replicas=2), namespace="team")
        await pods.wait_until(lambda o: sum(1 for p in o if active(p)) == 4, what="4 pods in team")

        answer = await client.delete(NAMESPACES, "team")
        assert answer["status"]["phase"] == "Terminating"
        await namespaces.wait_until(
            lambda o: (
                ((namespaces.get("team") or {}).get("status") or {}).get("phase") == "Terminating"
            ),
            what="team seen Terminating",
        )
        seen_pods_while_terminating = {"n": 0}

        def namespace_gone(_o: list[dict[str, object]]) -> bool:
            team = namespaces.get("team")
            if team is not None:
                seen_pods_while_terminating["n"] = max(
                    seen_pods_while_terminating["n"], len(pods.objects())
                )
            return team is None

        await namespaces.wait_until(namespace_gone, what="namespace team removed")
        assert seen_pods_while_terminating["n"] > 0, "the namespace waited for its content"
        for rt in (PODS, RCS, RSS, DEPLOYMENTS, EVENTS):
            assert (await client.list(rt, namespace="team"))["items"] == [], rt.plural
