"""Deployments against real processes: an image change rolls the pods over through a new
ReplicaSet ``<name>-<pod-template-hash>`` without ever dropping below ``replicas -
maxUnavailable`` available pods or rising above ``replicas + maxSurge``; revisions and
history limits; Recreate never overlaps old and new pods; scaling only resizes."""

from __future__ import annotations

import copy

import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import (
    DEPLOYMENTS,
    PODS,
    RSS,
    Obj,
    active,
    ready,
    rolled_out,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

REVISION = "deployment.kubernetes.io/revision"


def image_of(pod: Obj) -> str:
    return pod["spec"]["containers"][0]["image"]


def condition(d: Obj, type_: str) -> Obj:
    return next(c for c in d["status"]["conditions"] if c["type"] == type_)


async def set_image(cluster: Cluster, name: str, image: str) -> None:
    """What ``kubectl set image`` sends: a strategic merge patch keyed by container name."""
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}
    await cluster.client.patch(
        DEPLOYMENTS, name, patch, namespace="default", patch_type="strategic"
    )


async def test_rolling_update_respects_max_unavailable_and_max_surge(cluster: Cluster) -> None:
    client = cluster.client
    replicas, surge, unavailable = 4, 1, 1
    violations: list[str] = []
    armed = {"on": False}
    peak = {"pods": 0}

    await cluster.start_nodes("node1", "node2")
    async with (
        Watcher(client, PODS, namespace="default", label_selector="app=web") as pods,
        Watcher(client, DEPLOYMENTS, namespace="default") as deployments,
        Watcher(client, RSS, namespace="default") as rss,
    ):

        def check(_type: str, _obj: Obj) -> None:
            current = [p for p in pods.objects() if active(p)]
            peak["pods"] = max(peak["pods"], len(current))
            available = sum(1 for p in current if ready(p))
            if armed["on"] and available < replicas - unavailable:
                violations.append(f"only {available} available pods")
            if len(current) > replicas + surge:
                violations.append(f"{len(current)} pods at once")

        pods.on_event = check
        body = factories.deployment(
            "web",
            replicas=replicas,
            strategy={
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
            },
            revisionHistoryLimit=1,
        )
        await client.create(DEPLOYMENTS, body, namespace="default")
        got = await deployments.wait_until(rolled_out("web", replicas=4), what="first rollout")
        d = got[0]
        assert d["metadata"]["annotations"][REVISION] == "1"
        assert condition(d, "Available")["status"] == "True"
        assert condition(d, "Progressing")["reason"] == "NewReplicaSetAvailable"
        (rs1,) = rss.objects()
        pod_hash = rs1["metadata"]["labels"]["pod-template-hash"]
        assert rs1["metadata"]["name"] == f"web-{pod_hash}"
        assert rs1["spec"]["selector"]["matchLabels"] == {
            "app": "web",
            "pod-template-hash": pod_hash,
        }
        assert rs1["metadata"]["annotations"][REVISION] == "1"
        assert rs1["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
        assert all(p["metadata"]["labels"]["pod-template-hash"] == pod_hash for p in pods.objects())
        await pods.wait_until(
            lambda o: sum(1 for p in o if active(p) and ready(p)) == 4, what="4 ready pods"
        )

        armed["on"] = True
        await set_image(cluster, "web", "busybox")
        await deployments.wait_until(
            lambda o: o[0]["metadata"]["generation"] == 2 and rolled_out("web", replicas=4)(o),
            what="second rollout",
        )
        got = await pods.wait_until(
            lambda o: len(o) == 4 and all(image_of(p) == "busybox" and ready(p) for p in o),
            what="4 busybox pods, the old ones gone",
        )
        assert not violations, violations[:5]
        assert peak["pods"] <= replicas + surge
        by_name = {rs["metadata"]["name"]: rs for rs in rss.objects()}
        assert by_name[f"web-{pod_hash}"]["spec"]["replicas"] == 0
        (rs2,) = [rs for n, rs in by_name.items() if n != f"web-{pod_hash}"]
        assert rs2["metadata"]["annotations"][REVISION] == "2"
        d = deployments.get("default/web")
        assert d is not None and d["metadata"]["annotations"][REVISION] == "2"

        # a third template: with revisionHistoryLimit 1 the first ReplicaSet is deleted
        await set_image(cluster, "web", "python")
        await deployments.wait_until(
            lambda o: o[0]["metadata"]["generation"] == 3 and rolled_out("web", replicas=4)(o),
            what="third rollout",
        )
        await rss.wait_until(
            lambda o: len(o) == 2 and f"web-{pod_hash}" not in {r["metadata"]["name"] for r in o},
            what="the oldest ReplicaSet deleted",
        )
        assert not violations, violations[:5]


async def test_recreate_never_runs_old_and_new_together(cluster: Cluster) -> None:
    client = cluster.client
    overlaps: list[str] = []
    await cluster.start_nodes("node1")
    async with (
        Watcher(client, PODS, namespace="default", label_selector="app=rec") as pods,
        Watcher(client, DEPLOYMENTS, namespace="default") as deployments,
    ):

        def check(_type: str, _obj: Obj) -> None:
            images = {image_of(p) for p in pods.objects()}
            if len(images) > 1:
                overlaps.append(str(sorted(images)))

        pods.on_event = check
        body = factories.deployment("rec", replicas=3, strategy={"type": "Recreate"})
        await client.create(DEPLOYMENTS, body, namespace="default")
        await deployments.wait_until(rolled_out("rec", replicas=3), what="first rollout")
        await set_image(cluster, "rec", "busybox")
        await deployments.wait_until(
            lambda o: o[0]["metadata"]["generation"] == 2 and rolled_out("rec", replicas=3)(o),
            what="recreated",
        )
        await pods.wait_until(
            lambda o: len(o) == 3 and all(image_of(p) == "busybox" for p in o), what="3 new pods"
        )
    assert not overlaps, overlaps[:3]


async def test_scaling_resizes_without_a_new_replica_set(cluster: Cluster) -> None:
    client = cluster.client
    async with (
        Watcher(client, DEPLOYMENTS, namespace="default") as deployments,
        Watcher(client, RSS, namespace="default") as rss,
        Watcher(client, PODS, namespace="default") as pods,
    ):
        await client.create(
            DEPLOYMENTS, factories.deployment("sc", replicas=2), namespace="default"
        )
        await rss.wait_until(
            lambda o: len(o) == 1 and o[0]["spec"]["replicas"] == 2, what="RS of 2"
        )
        await client.patch(DEPLOYMENTS, "sc", {"spec": {"replicas": 5}}, namespace="default")
        got = await rss.wait_until(
            lambda o: len(o) == 1 and o[0]["spec"]["replicas"] == 5, what="RS scaled to 5"
        )
        annotations = got[0]["metadata"]["annotations"]
        assert annotations["deployment.kubernetes.io/desired-replicas"] == "5"
        assert annotations[REVISION] == "1"
        await pods.wait_until(lambda o: sum(1 for p in o if active(p)) == 5, what="5 pods")
        d = deployments.get("default/sc")
        assert d is not None and copy.deepcopy(d)["metadata"]["annotations"][REVISION] == "1"


async def test_paused_deployment_does_not_roll_until_resumed(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.start_nodes("node1")
    async with (
        Watcher(client, DEPLOYMENTS, namespace="default") as deployments,
        Watcher(client, RSS, namespace="default") as rss,
        Watcher(client, PODS, namespace="default", label_selector="app=pz") as pods,
    ):
        await client.create(
            DEPLOYMENTS, factories.deployment("pz", replicas=2), namespace="default"
        )
        await deployments.wait_until(rolled_out("pz", replicas=2), what="first rollout")
        await client.patch(DEPLOYMENTS, "pz", {"spec": {"paused": True}}, namespace="default")
        await set_image(cluster, "pz", "busybox")
        got = await deployments.wait_until(
            lambda o: (o[0].get("status") or {}).get("observedGeneration") == 3,
            what="the paused change observed",
        )
        assert condition(got[0], "Progressing")["reason"] == "DeploymentPaused"
        assert len(rss.objects()) == 1, "no new ReplicaSet while paused"
        assert {image_of(p) for p in pods.objects() if active(p)} == {"nginx"}

        await client.patch(DEPLOYMENTS, "pz", {"spec": {"paused": False}}, namespace="default")
        await deployments.wait_until(
            lambda o: o[0]["metadata"]["generation"] == 4 and rolled_out("pz", replicas=2)(o),
            what="rolled out after resume",
        )
        await pods.wait_until(
            lambda o: {image_of(p) for p in o if active(p)} == {"busybox"}, what="busybox pods"
        )
