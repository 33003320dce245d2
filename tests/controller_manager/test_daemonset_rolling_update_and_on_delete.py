"""DaemonSet updates against real processes (apiserver, controller-manager, scheduler, sim
kubelets): RollingUpdate replaces pods node by node without more than ``maxUnavailable``
nodes lacking a ready pod, surges a new pod beside the old one with ``maxSurge``, survives a
controller-manager killed -9 in the middle; OnDelete changes a pod only when it is deleted."""

from __future__ import annotations

import asyncio

import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import PODS, Obj, ready, rt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

DAEMONSETS = rt("apps", "DaemonSet")
REVISIONS = rt("apps", "ControllerRevision")
NODES = ("node1", "node2", "node3")


def live(pods: list[Obj]) -> list[Obj]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def image_by_node(pods: list[Obj]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in live(pods):
        node = p["spec"].get("nodeName")
        if node:
            out.setdefault(node, []).append(p["spec"]["containers"][0]["image"])
    return out


def nodes_without_ready_pod(pods: list[Obj]) -> set[str]:
    have = {p["spec"].get("nodeName") for p in live(pods) if ready(p)}
    return set(NODES) - have


def all_on(image: str):  # type: ignore[no-untyped-def]
    def check(pods: list[Obj]) -> bool:
        return image_by_node(pods) == {n: [image] for n in NODES} and all(
            ready(p) for p in live(pods)
        )

    return check


def rolled_out(ds_list: list[Obj]) -> bool:
    """What ``kubectl rollout status ds`` waits for."""
    for ds in ds_list:
        s = ds.get("status") or {}
        return (
            s.get("observedGeneration", 0) >= ds["metadata"]["generation"]
            and s.get("updatedNumberScheduled") == s.get("desiredNumberScheduled") == len(NODES)
            and s.get("numberAvailable") == len(NODES)
        )
    return False


async def set_image(cluster: Cluster, image: str) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}
    await cluster.client.patch(
        DAEMONSETS, "agent", patch, namespace="default", patch_type="strategic"
    )


async def test_rolling_update_keeps_max_unavailable_and_survives_a_killed_manager(
    cluster: Cluster,
) -> None:
    client = cluster.client
    await cluster.start_nodes(*NODES)
    ds = factories.daemon_set("agent", image="nginx:1.26")
    ds["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}  # fmt: skip
    violations: list[set[str]] = []
    armed = {"on": False}
    async with (
        Watcher(client, PODS, namespace="default", label_selector="app=agent") as pods,
        Watcher(client, DAEMONSETS, namespace="default") as dss,
    ):

        def check(_type: str, _obj: Obj) -> None:
            missing = nodes_without_ready_pod(pods.objects())
            if armed["on"] and len(missing) > 1:
                violations.append(missing)

        pods.informer.add_handler(
            on_add=lambda o: check("ADDED", o),
            on_update=lambda _o, n: check("MODIFIED", n),
            on_delete=lambda o: check("DELETED", o),
        )
        await client.create(DAEMONSETS, ds, namespace="default")
        await pods.wait_until(all_on("nginx:1.26"), what="a ready nginx:1.26 pod on every node")
        armed["on"] = True

        await set_image(cluster, "nginx:1.27")
        await pods.wait_until(
            lambda objs: (
                "nginx:1.27" in str(image_by_node(objs))
                and "nginx:1.26" in str(image_by_node(objs))
            ),
            what="the rollout half way: old and new pods",
        )
        cluster.cm.kill()  # SIGKILL: no lease release, no cleanup
        await asyncio.to_thread(cluster.cm.start)
        await pods.wait_until(all_on("nginx:1.27"), what="a ready nginx:1.27 pod on every node")
        await dss.wait_until(rolled_out, what="status: rolled out")
        assert violations == [], f"more than maxUnavailable=1 nodes without a ready pod: {violations}"  # fmt: skip

    revisions = (await client.list(REVISIONS, namespace="default"))["items"]
    assert sorted(r["revision"] for r in revisions) == [1, 2]
    [current] = [r for r in revisions if r["revision"] == 2]
    for pod in live(pods.objects()):
        assert (
            pod["metadata"]["labels"]["controller-revision-hash"]
            == (current["metadata"]["labels"]["controller-revision-hash"])
        )
        assert pod["metadata"]["labels"]["pod-template-generation"] == "2"


async def test_max_surge_starts_the_new_pod_before_the_old_one_goes(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.start_nodes(*NODES)
    ds = factories.daemon_set("agent", image="nginx:1.26")
    ds["spec"]["updateStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    violations: list[set[str]] = []
    surging: list[set[str]] = []
    armed = {"on": False}
    async with (
        Watcher(client, PODS, namespace="default", label_selector="app=agent") as pods,
        Watcher(client, DAEMONSETS, namespace="default") as dss,
    ):

        def check(_obj: Obj) -> None:
            if not armed["on"]:
                return
            objs = pods.objects()
            starting = {p["spec"].get("nodeName") for p in live(objs) if not ready(p)}
            if len(starting) > 1:
                surging.append(starting)
            missing = nodes_without_ready_pod(objs)
            if missing:
                violations.append(missing)

        pods.informer.add_handler(on_add=check, on_update=lambda _o, n: check(n), on_delete=check)
        await client.create(DAEMONSETS, ds, namespace="default")
        await pods.wait_until(all_on("nginx:1.26"), what="a ready nginx:1.26 pod on every node")
        armed["on"] = True
        await set_image(cluster, "nginx:1.27")
        await pods.wait_until(all_on("nginx:1.27"), what="a ready nginx:1.27 pod on every node")
        await dss.wait_until(rolled_out, what="status: rolled out")
    assert violations == [], f"a node went without a ready pod under maxUnavailable=0: {violations}"  # fmt: skip
    assert surging == [], f"more than maxSurge=1 nodes with a new pod starting: {surging}"


async def test_on_delete_replaces_a_pod_only_when_it_is_deleted(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.start_nodes(*NODES)
    ds = factories.daemon_set("agent", image="nginx:1.26")
    ds["spec"]["updateStrategy"] = {"type": "OnDelete"}
    async with (
        Watcher(client, PODS, namespace="default", label_selector="app=agent") as pods,
        Watcher(client, DAEMONSETS, namespace="default") as dss,
    ):
        await client.create(DAEMONSETS, ds, namespace="default")
        await pods.wait_until(all_on("nginx:1.26"), what="a ready nginx:1.26 pod on every node")
        before = {p["metadata"]["name"] for p in live(pods.objects())}

        await set_image(cluster, "nginx:1.27")
        # the sync that saw the new template has written its status: nothing was rolled
        await dss.wait_until(
            lambda objs: any(
                (o.get("status") or {}).get("observedGeneration") == o["metadata"]["generation"]
                and o["metadata"]["generation"] == 2
                and o["status"].get("updatedNumberScheduled") == 0
                for o in objs
            ),
            what="status observed generation 2 with no pod updated",
        )
        assert {p["metadata"]["name"] for p in live(pods.objects())} == before

        victim = next(p for p in live(pods.objects()) if p["spec"]["nodeName"] == "node2")
        await client.delete(PODS, victim["metadata"]["name"], namespace="default")
        await pods.wait_until(
            lambda objs: (
                image_by_node(objs)
                == {"node1": ["nginx:1.26"], "node2": ["nginx:1.27"], "node3": ["nginx:1.26"]}
            ),
            what="only node2's pod replaced, with the new template",
        )
        await dss.wait_until(
            lambda objs: any(
                (o.get("status") or {}).get("updatedNumberScheduled") == 1 for o in objs
            ),
            what="status: one pod updated",
        )
