"""The node-failure story with every component real: apiserver, controller-manager, scheduler
and two sim-runtime kubelets, each its own process. A Deployment runs on both nodes; one
kubelet is SIGKILLed; its node turns Unknown and tainted, its pods are evicted after their
toleration and the scheduler places the replacements on the surviving node; the restarted
kubelet brings the node back Ready and untainted and finishes the evicted pods."""

from __future__ import annotations

import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import (
    DEPLOYMENTS,
    NODES,
    PODS,
    UNREACHABLE,
    Obj,
    active,
    ready_of,
    rolled_out,
    taints_of,
    tolerating_silence,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--node-monitor-grace-period", "5s", "--node-eviction-rate", "10")


def running_ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


async def test_pods_leave_a_node_whose_kubelet_died(cluster: Cluster) -> None:
    client = cluster.client
    kubelets = await cluster.start_nodes("node-a", "node-b")
    body = factories.deployment("svc", replicas=4)
    body["spec"]["template"]["spec"]["tolerations"] = tolerating_silence(2)
    async with (
        Watcher(client, NODES) as nodes,
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, DEPLOYMENTS, namespace="default") as deployments,
    ):
        await client.create(DEPLOYMENTS, body, namespace="default")
        await deployments.wait_until(
            rolled_out("svc", replicas=4), what="4 pods rolled out", within=60
        )
        got = await pods.wait_until(
            lambda o: sum(1 for p in o if running_ready(p)) == 4, what="4 running pods"
        )
        on_a = {p["metadata"]["name"] for p in got if p["spec"].get("nodeName") == "node-a"}
        assert on_a, "the scheduler spreads the Deployment's pods over both nodes"

        await kubelets["node-a"].akill()
        await nodes.wait_until(
            lambda o: (ready_of(nodes.get("node-a") or {}) or {}).get("status") == "Unknown"
            and (UNREACHABLE, "NoExecute") in taints_of(nodes.get("node-a")),
            what="node-a Unknown and tainted", within=60,
        )  # fmt: skip
        await pods.wait_until(
            lambda o: sum(1 for p in o if active(p) and running_ready(p)
                          and p["spec"].get("nodeName") == "node-b") == 4
            and all(p["metadata"].get("deletionTimestamp") for p in o if p["metadata"]["name"] in on_a),
            what="node-a's pods evicted, 4 running on node-b", within=60,
        )  # fmt: skip

        await kubelets["node-a"].astart()
        await nodes.wait_until(
            lambda o: (ready_of(nodes.get("node-a") or {}) or {}).get("status") == "True"
            and not taints_of(nodes.get("node-a")),
            what="node-a Ready and untainted again", within=60,
        )  # fmt: skip
        await pods.wait_until(
            lambda o: not ({p["metadata"]["name"] for p in o} & on_a),
            what="the restarted kubelet finishing the evicted pods",
            within=60,
        )
