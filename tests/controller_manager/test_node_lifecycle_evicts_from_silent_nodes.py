"""Node lifecycle against real processes: a node whose kubelet stops renewing its Lease turns
Ready=Unknown after the grace period, is tainted unreachable (NoSchedule + NoExecute), its pods
are marked not ready and evicted once their toleration runs out, and their RC replaces them on
the healthy node; when the kubelet comes back the taints go. With every node silent (full
disruption) nothing is evicted."""

from __future__ import annotations

import pytest

from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import EVENTS, NODES, PODS, RCS, Obj, Watcher, active, rc_body
from tests.controller_manager.sim_cluster import SimCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    # 6 s of silence against 0.5 s heartbeats: a wide margin on two busy shared cores
    return ("--node-monitor-grace-period", "6s", "--node-eviction-rate", "10")


def ready_of(node: Obj) -> Obj | None:
    return next(
        (c for c in (node.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"),
        None,
    )


def taints_of(node: Obj | None) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in ((node or {}).get("spec") or {}).get("taints") or []}


def ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def node_of(pod: Obj) -> str | None:
    return (pod.get("spec") or {}).get("nodeName")


async def test_silent_node_is_marked_tainted_and_its_pods_move(cluster: Cluster) -> None:
    client = cluster.client
    body = rc_body("app", replicas=4)
    body["spec"]["template"]["spec"]["tolerations"] = [
        {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 2},
    ]  # fmt: skip
    async with (
        SimCluster(client, nodes=["node1", "node2"], renew_every=0.5) as sim,
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, NODES) as nodes,
    ):
        await client.create(RCS, body, namespace="default")
        got = await pods.wait_until(
            lambda o: sum(1 for p in o if active(p) and node_of(p) and ready(p)) == 4,
            what="4 bound, ready pods",
        )
        on_node1 = {p["metadata"]["name"] for p in got if node_of(p) == "node1"}
        assert on_node1, "round-robin binding put pods on node1"

        await sim.stop_kubelet("node1")
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

        await sim.resume_kubelet("node1")
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
    async with (
        SimCluster(client, nodes=["solo"], renew_every=0.5) as sim,
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, NODES) as nodes,
    ):
        await client.create(RCS, rc_body("lonely", replicas=2), namespace="default")
        await pods.wait_until(
            lambda o: sum(1 for p in o if active(p) and node_of(p)) == 2, what="2 bound pods"
        )
        await sim.stop_kubelet("solo")
        await nodes.wait_until(
            lambda o: (UNREACHABLE, "NoSchedule") in taints_of(nodes.get("solo")),
            what="solo Unknown and NoSchedule-tainted",
        )
        assert (UNREACHABLE, "NoExecute") not in taints_of(nodes.get("solo"))
        assert sum(1 for p in pods.objects() if active(p)) == 2
