"""A pod with PersistentVolumeClaims is placed where its volumes can be: it waits for a missing or
unbound claim, follows a bound volume's node affinity, and for a WaitForFirstConsumer claim
tells the PV controller its node (``volume.kubernetes.io/selected-node``) and binds only once the
claim is Bound.

Real apiserver, real scheduler process, hand-written nodes; the tests play the PV controller
(binding claims with ``Cluster.bind_claim``), except the last, which runs the controller-manager's
PV controller and local-path provisioner. The tests await watch events, never sleep.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from api.storage import LOCAL_PATH_CLASS, LOCAL_PATH_ROOT_ANNOTATION, SELECTED_NODE_ANNOTATION
from kubelite.testing import ComponentProcess, Processes
from tests.factories import storage_class
from tests.scheduler.cluster import CLAIMS, PODS, Cluster, cluster_at

pytestmark = pytest.mark.e2e

DATA = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]


async def failed_scheduling(cluster: Cluster, pod: str, message: str) -> None:
    await cluster.until(
        lambda: any(e["message"] == message for e in cluster.pod_events(pod, "FailedScheduling")),
        within=20,
        what=f"FailedScheduling {message!r}",
    )


def selected(cluster: Cluster) -> str:
    """The claim ``data``'s selected node, as the watch last saw it."""
    claim = cluster.claim("data") or {}
    annotations = claim.get("metadata", {}).get("annotations") or {}
    return str(annotations.get(SELECTED_NODE_ANNOTATION) or "")


async def scheduled(cluster: Cluster, pod: str) -> str:
    await cluster.until(lambda: bool(cluster.node_of(pod)), within=20, what=f"{pod} bound")
    return cluster.node_of(pod)


async def test_a_pod_waits_for_its_missing_claim_then_schedules_once_it_is_bound(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess]
) -> None:
    start_scheduler()
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node1")
        await cluster.add_node("node2")
        await cluster.add_pod("app", volumes=DATA)
        await failed_scheduling(
            cluster, "app", '0/2 nodes are available: persistentvolumeclaim "data" not found.'
        )
        assert cluster.node_of("app") == ""

        await cluster.add_volume("pv1")
        await cluster.add_claim("data", storage_class="")
        await cluster.bind_claim("data", "pv1")
        assert await scheduled(cluster, "app") in ("node1", "node2")


async def test_a_pod_follows_its_bound_volume_s_node_affinity(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess]
) -> None:
    start_scheduler()
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node1")
        await cluster.add_node("node2")
        await cluster.add_volume("pv2", node_affinity={"kubernetes.io/hostname": ["node2"]})
        await cluster.add_claim("data", storage_class="")
        await cluster.bind_claim("data", "pv2")
        await cluster.add_pods([f"app-{i}" for i in range(4)], volumes=DATA)
        for i in range(4):
            assert await scheduled(cluster, f"app-{i}") == "node2"


async def test_an_unbound_immediate_claim_keeps_the_pod_pending_until_it_is_bound(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess]
) -> None:
    start_scheduler()
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node1")
        await cluster.add_class(storage_class("fast", provisioner="example.com/fast"))
        await cluster.add_volume("pv1", storage_class="fast")
        await cluster.add_claim("data", storage_class="fast")
        await cluster.add_pod("app", volumes=DATA)
        await failed_scheduling(
            cluster,
            "app",
            "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
        )
        assert cluster.node_of("app") == ""

        await cluster.bind_claim("data", "pv1")
        assert await scheduled(cluster, "app") == "node1"


async def test_a_wait_for_first_consumer_claim_is_given_the_pod_s_node_before_the_pod_binds(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess]
) -> None:
    start_scheduler()
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node1")  # no local-path root: the provisioner cannot serve it
        await cluster.add_node("node2", annotations={LOCAL_PATH_ROOT_ANNOTATION: "/var/local/n2"})
        await cluster.add_claim("data", storage_class=LOCAL_PATH_CLASS)
        await cluster.add_pod("app", volumes=DATA)

        await cluster.until(lambda: bool(selected(cluster)), within=20, what="selected-node")
        assert selected(cluster) == "node2"
        # the claim is not bound yet, so the pod cannot have been: read the server, not the watch
        pod = await cluster.client.get(PODS, "app", namespace="default")
        assert not pod["spec"].get("nodeName")

        await cluster.add_volume(
            "pvc-data", storage_class=LOCAL_PATH_CLASS,
            node_affinity={"kubernetes.io/hostname": ["node2"]},
        )  # fmt: skip
        await cluster.bind_claim("data", "pvc-data")
        assert await scheduled(cluster, "app") == "node2"
        await cluster.until(
            lambda: bool(cluster.pod_events("app", "Scheduled")), within=20, what="Scheduled"
        )


async def test_a_provisioner_taking_back_the_selected_node_sends_the_pod_round_again(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess]
) -> None:
    start_scheduler()
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node2", annotations={LOCAL_PATH_ROOT_ANNOTATION: "/var/local/n2"})
        await cluster.add_claim("data", storage_class=LOCAL_PATH_CLASS)
        await cluster.add_pod("app", volumes=DATA)
        await cluster.until(lambda: bool(selected(cluster)), within=20, what="selected-node")

        # what a provisioner that cannot serve the node does (Kubernetes' "reschedule")
        reset = {"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: None}}}
        await cluster.client.patch(CLAIMS, "data", reset, namespace="default")
        await failed_scheduling(
            cluster,
            "app",
            'running PreBind plugin "VolumeBinding": binding volumes: selected node annotation '
            "reset for claim default/data",
        )
        await cluster.until(lambda: bool(selected(cluster)), within=20, what="selected again")
        await cluster.add_volume(
            "pvc-data", storage_class=LOCAL_PATH_CLASS,
            node_affinity={"kubernetes.io/hostname": ["node2"]},
        )  # fmt: skip
        await cluster.bind_claim("data", "pvc-data")
        assert await scheduled(cluster, "app") == "node2"


async def test_a_scheduler_restarted_while_a_claim_waits_binds_the_pod_to_the_selected_node(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess]
) -> None:
    first = start_scheduler("--no-leader-elect")  # the next one need not wait out a lease
    async with cluster_at(api.url) as cluster:
        for name in ("node1", "node2"):
            await cluster.add_node(name, annotations={LOCAL_PATH_ROOT_ANNOTATION: "/var/local/r"})
        await cluster.add_claim("data", storage_class=LOCAL_PATH_CLASS)
        await cluster.add_pod("app", volumes=DATA)
        await cluster.until(lambda: bool(selected(cluster)), within=20, what="selected-node")
        chosen = selected(cluster)
        first.kill()  # returns once the process is gone, its PreBind wait with it

        start_scheduler(
            "--no-leader-elect"
        )  # lists the annotated claim: the pod is held to the chosen node
        await cluster.add_volume(
            "pvc-data", storage_class=LOCAL_PATH_CLASS,
            node_affinity={"kubernetes.io/hostname": [chosen]},
        )  # fmt: skip
        await cluster.bind_claim("data", "pvc-data")
        assert await scheduled(cluster, "app") == chosen


async def test_with_the_real_pv_controller_a_local_path_claim_is_provisioned_on_the_pod_s_node(
    api: ComponentProcess,
    start_scheduler: Callable[..., ComponentProcess],
    kubelite_processes: Processes,
) -> None:
    start_scheduler()
    kubelite_processes.controller_manager(
        api.url, args=["--controllers", "persistentvolume-binder,local-path-provisioner"]
    )
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node1")
        await cluster.add_node("node2", annotations={LOCAL_PATH_ROOT_ANNOTATION: "/var/local/n2"})
        await cluster.add_claim("data")  # the default class: local-path, WaitForFirstConsumer
        await cluster.add_pod("app", volumes=DATA)

        assert await scheduled(cluster, "app") == "node2"
        claim = await cluster.client.get(CLAIMS, "data", namespace="default")
        assert claim["status"]["phase"] == "Bound"
        assert claim["metadata"]["annotations"][SELECTED_NODE_ANNOTATION] == "node2"
