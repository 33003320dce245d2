"""A DaemonSet against real processes (apiserver, controller-manager, scheduler, sim kubelets):
one pod per eligible node, pinned by ``matchFields metadata.name`` and bound by the scheduler,
carrying the tolerations Kubernetes adds to daemon pods; a node joining gets a pod, a node
removed loses it; nodeSelector and taints keep pods off nodes; status counts them."""

from __future__ import annotations

import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import NODES, PODS, Obj, rt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

DAEMONSETS = rt("apps", "DaemonSet")
REVISIONS = rt("apps", "ControllerRevision")

AUTOMATIC_TOLERATIONS = {
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
}


def live(pods: list[Obj]) -> list[Obj]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def running_on(pods: list[Obj]) -> dict[str, str]:
    """node -> phase of each live pod bound to a node."""
    return {p["spec"]["nodeName"]: p["status"].get("phase") for p in live(pods) if p["spec"].get("nodeName")}  # fmt: skip


def pinned_node(pod: Obj) -> str:
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": terms[0]["matchFields"][0]["values"]}]}]  # fmt: skip
    return str(terms[0]["matchFields"][0]["values"][0])


async def test_daemon_pods_follow_nodes_joining_and_leaving(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.start_nodes("node1", "node2")
    async with (
        Watcher(client, PODS, namespace="default", label_selector="app=agent") as pods,
        Watcher(client, DAEMONSETS, namespace="default") as dss,
    ):
        await client.create(DAEMONSETS, factories.daemon_set("agent"), namespace="default")
        await pods.wait_until(
            lambda objs: running_on(objs) == {"node1": "Running", "node2": "Running"},
            what="one Running daemon pod on each of node1 and node2",
        )
        for pod in live(pods.objects()):
            assert pinned_node(pod) == pod["spec"]["nodeName"]
            tolerations = {(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]}
            assert AUTOMATIC_TOLERATIONS <= tolerations
            labels = pod["metadata"]["labels"]
            assert labels["pod-template-generation"] == "1"
            assert labels["controller-revision-hash"]
        [ds] = await dss.wait_until(
            lambda objs: any(
                (o.get("status") or {}).get("numberAvailable") == 2
                and o["status"].get("observedGeneration") == o["metadata"]["generation"]
                for o in objs
            ),
            what="status: two available",
        )
        status = ds["status"]
        assert (status["desiredNumberScheduled"], status["currentNumberScheduled"]) == (2, 2)
        assert (status["numberReady"], status["updatedNumberScheduled"]) == (2, 2)
        assert (status["numberMisscheduled"], status.get("numberUnavailable", 0)) == (0, 0)
        assert ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "1"
        revisions = (await client.list(REVISIONS, namespace="default"))["items"]
        assert [r["revision"] for r in revisions] == [1]
        assert revisions[0]["metadata"]["name"] == (
            f"agent-{revisions[0]['metadata']['labels']['controller-revision-hash']}"
        )
        assert revisions[0]["data"]["spec"]["template"]["$patch"] == "replace"

        await cluster.start_nodes("node3")
        await pods.wait_until(
            lambda objs: running_on(objs).get("node3") == "Running",
            what="a daemon pod Running on the joining node3",
        )

        cluster.kubelets["node3"].kill()
        await client.delete(NODES, "node3")
        await pods.wait_until(
            lambda objs: {pinned_node(p) for p in objs} == {"node1", "node2"},
            what="the pod of the removed node3 gone",
        )
        await dss.wait_until(
            lambda objs: any((o.get("status") or {}).get("desiredNumberScheduled") == 2 for o in objs),
            what="desiredNumberScheduled back to 2",
        )  # fmt: skip


async def test_node_selector_and_taints_decide_where_daemon_pods_run(cluster: Cluster) -> None:
    client = cluster.client
    # Nodes registered by hand (no kubelet): the DaemonSet controller pins pods to them all
    # the same; what matters here is where it does and does not.
    for node in (
        factories.node("plain", labels={"disk": "ssd"}),
        factories.node("other-disk", labels={"disk": "hdd"}),
        factories.node(
            "tainted",
            labels={"disk": "ssd"},
            taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}],
        ),
        factories.node(
            "tolerated",
            labels={"disk": "ssd"},
            taints=[{"key": "dedicated", "value": "agents", "effect": "NoSchedule"}],
        ),
        factories.node(
            "cordoned",
            labels={"disk": "ssd"},
            unschedulable=True,
            taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
        ),
    ):
        await client.create(NODES, node)
    ds = factories.daemon_set("agent")
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"disk": "ssd"}
    ds["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "dedicated", "operator": "Equal", "value": "agents", "effect": "NoSchedule"}
    ]
    async with (
        Watcher(client, PODS, namespace="default", label_selector="app=agent") as pods,
        Watcher(client, DAEMONSETS, namespace="default") as dss,
    ):
        await client.create(DAEMONSETS, ds, namespace="default")
        await dss.wait_until(
            lambda objs: any(
                (o.get("status") or {}).get("currentNumberScheduled") == 3 for o in objs
            ),
            what="three nodes scheduled",
        )
        assert sorted(pinned_node(p) for p in live(pods.objects())) == [
            "cordoned",
            "plain",
            "tolerated",
        ]

        # the tolerated taint changes: the pod there may stay only if no NoExecute taint
        # is untolerated — a NoSchedule one merely stops new pods
        await client.patch(
            NODES,
            "plain",
            {"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}},
            patch_type="merge",
        )
        await client.patch(
            NODES,
            "tolerated",
            {"spec": {"taints": [{"key": "evict", "effect": "NoExecute"}]}},
            patch_type="merge",
        )
        await pods.wait_until(
            lambda objs: sorted(pinned_node(p) for p in live(objs)) == ["cordoned", "plain"],
            what="the pod on the node with an untolerated NoExecute taint deleted",
        )
        # a label no longer matching the selector: the pod there is deleted
        await client.patch(
            NODES, "plain", {"metadata": {"labels": {"disk": "hdd"}}}, patch_type="merge"
        )
        await pods.wait_until(
            lambda objs: [pinned_node(p) for p in live(objs)] == ["cordoned"],
            what="the pod on the relabelled node deleted",
        )
