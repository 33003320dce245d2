"""Node lifecycle against real processes: a node whose kubelet stops renewing its Lease turns
Ready=Unknown after the grace period, is tainted unreachable (NoSchedule + NoExecute), its pods
are marked not ready and evicted once their toleration runs out, and their RC replaces them on
the healthy node; when the kubelet comes back the taints go. With every node silent (full
disruption) nothing is evicted."""

from __future__ import annotations

import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import (
    EVENTS,
    NODES,
    PODS,
    RCS,
    UNREACHABLE,
    Obj,
    active,
    ready,
    ready_of,
    taints_of,
    tolerating_silence,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    # 6 s of silence against 1 s heartbeats: a wide margin on two busy shared cores
    return ("--node-monitor-grace-period", "6s", "--node-eviction-rate", "10")


def node_of(pod: Obj) -> str | None:
    return (pod.get("spec") or {}).get("nodeName")


async def test_silent_node_is_marked_tainted_and_its_pods_move(cluster: Cluster) -> None:
    client = cluster.client
    body = factories.rc("app", replicas=4)
    body["spec"]["template"]["spec"]["tolerations"] = tolerating_silence(2)
    kubelets = await cluster.start_nodes("node1", "node2")
    async with (
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, NODES) as nodes,
    ):
        await client.create(RCS, body, namespace="default")
        got = await pods.wait_until(
            lambda o: sum(1 for p in o if active(p) and node_of(p) and ready(p)) == 4,
            what="4 bound, ready pods",
        )
        on_node1 = {p["metadata"]["name"] for p in got if node_of(p) == "node1"}
        assert on_node1, "the scheduler spreads the RC's pods over both nodes"

        await kubelets["node1"].akill()
        got = await nodes.wait_until(
            lambda o: (
                (ready_of(nodes.get("node1") or {}) or {}).get("status") == "Unknown"
                and {(UNREACHABLE, "NoExecute"), (UNREACHABLE, "NoSchedule")}
                <= taints_of(nodes.get("node1"))
            ),
            what="node1 Unknown and tainted unreachable",
        )
        cond = ready_of(nodes.get("node1") or {})
        assert cond is not None
        assert cond["reason"] == "NodeStatusUnknown"
        assert cond["message"] == "Kubelet stopped posting node status."
        assert taints_of(nodes.get("node2")) == set()

        await pods.wait_until(
            lambda o: sum(1 for p in o if active(p) and node_of(p) == "node2") == 4
            and all(p["metadata"].get("deletionTimestamp") for p in o if p["metadata"]["name"] in on_node1),
            what="node1's pods evicted and replaced on node2",
        )  # fmt: skip

        def conditions(p: Obj) -> dict[str, Obj]:
            return {c["type"]: c for c in p["status"].get("conditions") or []}

        await pods.wait_until(
            lambda o: all(
                conditions(p).get("Ready", {}).get("status") != "True"
                and conditions(p).get("DisruptionTarget", {}).get("reason")
                == "DeletionByTaintManager"
                for p in o
                if p["metadata"]["name"] in on_node1
            ),
            what="node1's pods not ready and marked as disrupted by the taint manager",
        )

        await kubelets["node1"].astart()
        await nodes.wait_until(
            lambda o: (
                taints_of(nodes.get("node1")) == set()
                and (ready_of(nodes.get("node1") or {}) or {}).get("status") == "True"
            ),
            what="node1 back and untainted",
        )

    events = (await client.list(EVENTS, namespace="default"))["items"]
    reasons = {(e["reason"], e["involvedObject"]["kind"]) for e in events}
    assert ("NodeNotReady", "Node") in reasons
    assert ("TaintManagerEviction", "Pod") in reasons
    assert any(
        e["reason"] == "TaintManagerEviction" and e["message"].startswith("Marking for deletion Pod default/")
        for e in events
    )  # fmt: skip


async def test_full_disruption_taints_nothing_for_eviction(cluster: Cluster) -> None:
    client = cluster.client
    kubelets = await cluster.start_nodes("solo")
    async with (
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, NODES) as nodes,
    ):
        await client.create(RCS, factories.rc("lonely", replicas=2), namespace="default")
        await pods.wait_until(
            lambda o: sum(1 for p in o if active(p) and node_of(p)) == 2, what="2 bound pods"
        )
        await kubelets["solo"].akill()
        await nodes.wait_until(
            lambda o: (UNREACHABLE, "NoSchedule") in taints_of(nodes.get("solo")),
            what="solo Unknown and NoSchedule-tainted",
        )
        assert (UNREACHABLE, "NoExecute") not in taints_of(nodes.get("solo"))
        assert sum(1 for p in pods.objects() if active(p)) == 2
