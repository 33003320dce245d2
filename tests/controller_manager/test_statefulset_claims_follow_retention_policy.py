"""A StatefulSet's claims against real processes (apiserver, controller-manager with the PV
controller and the local-path provisioner, scheduler, sim kubelets): one claim per ordinal from
``volumeClaimTemplates``, created before its pod and announced by an event; then
``persistentVolumeClaimRetentionPolicy`` as Kubernetes enforces it — ownerReferences the garbage
collector follows: ``whenScaled: Delete`` takes the claims of condemned ordinals, ``Retain``
keeps them for the ordinal's return, ``whenDeleted: Delete`` takes the rest with the set. Also
the official client's AppsV1Api calls for StatefulSets parse."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes import client as k8s

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import EVENTS, PODS, Obj, ready, rt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

STATEFULSETS = rt("apps", "StatefulSet")
CLAIMS = rt("", "PersistentVolumeClaim")


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return (
        "--controllers=statefulset,garbagecollector,persistentvolume-binder,local-path-provisioner",
    )


def names(objs: list[Obj]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def all_ready(pods: list[Obj], count: int) -> bool:
    return len(pods) == count and all(
        p["status"].get("phase") == "Running" and ready(p) for p in pods
    )


def owners(claim: Obj | None) -> set[str]:
    return {r["kind"] for r in ((claim or {}).get("metadata") or {}).get("ownerReferences") or []}


async def test_claims_per_ordinal_and_the_retention_policy(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.start_nodes("node1")
    body = factories.stateful_set(
        "web",
        replicas=3,
        claim="data",
        persistentVolumeClaimRetentionPolicy={"whenScaled": "Delete", "whenDeleted": "Retain"},
    )
    async with (
        Watcher(client, PODS, namespace="default", label_selector="app=web") as pods,
        Watcher(client, CLAIMS, namespace="default") as claims,
    ):
        await client.create(STATEFULSETS, body, namespace="default")
        await pods.wait_until(lambda o: all_ready(o, 3), what="3 ready pods")
        await claims.wait_until(
            lambda o: (
                names(o) == ["data-web-0", "data-web-1", "data-web-2"]
                and all(c["status"].get("phase") == "Bound" for c in o)
            ),
            what="three bound claims",
        )
        for pod in pods.objects():
            volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "data")
            assert volume["persistentVolumeClaim"]["claimName"] == f"data-{pod['metadata']['name']}"
        for claim in claims.objects():
            assert claim["metadata"]["labels"] == {"app": "web"}
            assert owners(claim) == set()  # in range, whenDeleted Retain: nobody owns it
        kept = claims.get("default/data-web-0")
        assert kept is not None

        # whenScaled Delete: the condemned ordinals' claims go with their pods
        await client.patch(
            STATEFULSETS, "web", {"spec": {"replicas": 1}}, namespace="default", subresource="scale"
        )
        await claims.wait_until(lambda o: names(o) == ["data-web-0"], what="only data-web-0 left")
        await pods.wait_until(lambda o: names(o) == ["web-0"], what="only web-0 left")

        # whenScaled Retain: scaling down keeps the claim for the ordinal's return
        await client.patch(
            STATEFULSETS,
            "web",
            {
                "spec": {
                    "replicas": 2,
                    "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Retain"},
                }
            },
            namespace="default",
        )
        await pods.wait_until(lambda o: all_ready(o, 2), what="web-1 back")
        await claims.wait_until(
            lambda _o: claims.get("default/data-web-1") is not None, what="data-web-1 again"
        )
        data1 = claims.get("default/data-web-1")
        assert data1 is not None
        await client.patch(
            STATEFULSETS, "web", {"spec": {"replicas": 1}}, namespace="default", subresource="scale"
        )
        await pods.wait_until(lambda o: names(o) == ["web-0"], what="web-1 gone again")
        await client.patch(
            STATEFULSETS, "web", {"spec": {"replicas": 2}}, namespace="default", subresource="scale"
        )
        await pods.wait_until(lambda o: all_ready(o, 2), what="web-1 back once more")
        again = claims.get("default/data-web-1")
        assert again is not None and again["metadata"]["uid"] == data1["metadata"]["uid"]

        # whenDeleted Delete: the set owns every claim, which goes with it
        await client.patch(
            STATEFULSETS,
            "web",
            {"spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"}}},
            namespace="default",
        )
        await claims.wait_until(
            lambda o: len(o) == 2 and all(owners(c) == {"StatefulSet"} for c in o),
            what="both claims owned by the set",
        )
        assert claims.get("default/data-web-0")["metadata"]["uid"] == kept["metadata"]["uid"]  # type: ignore[index]
        await client.delete(STATEFULSETS, "web", namespace="default")
        await claims.wait_until(lambda o: o == [], what="the claims deleted with the set")
        await pods.wait_until(lambda o: o == [], what="the pods deleted with the set")

    events = (await client.list(EVENTS, namespace="default"))["items"]
    created = {e["message"] for e in events if e["reason"] == "SuccessfulCreate"}
    assert "create Claim data-web-0 Pod web-0 in StatefulSet web success" in created
    assert "create Pod web-0 in StatefulSet web successful" in created


async def test_official_client_stateful_set_calls(cluster: Cluster) -> None:
    await cluster.start_nodes("node1")
    apps = k8s.AppsV1Api(k8s.ApiClient(k8s.Configuration(host=cluster.api.url)))
    body = k8s.V1StatefulSet(
        metadata=k8s.V1ObjectMeta(name="db"),
        spec=k8s.V1StatefulSetSpec(
            replicas=2,
            service_name="db",
            selector=k8s.V1LabelSelector(match_labels={"app": "db"}),
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(labels={"app": "db"}),
                spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="db", image="nginx")]),
            ),
        ),
    )
    created = await asyncio.to_thread(apps.create_namespaced_stateful_set, "default", body)
    assert isinstance(created, k8s.V1StatefulSet)
    assert created.spec.pod_management_policy == "OrderedReady"
    assert created.spec.update_strategy.type == "RollingUpdate"
    async with Watcher(cluster.client, STATEFULSETS, namespace="default") as sets:
        await sets.wait_until(
            lambda o: o[0]["status"].get("availableReplicas") == 2, what="2 available"
        )
    status = await asyncio.to_thread(apps.read_namespaced_stateful_set_status, "db", "default")
    assert status.status.ready_replicas == status.status.available_replicas == 2
    assert status.status.current_revision == status.status.update_revision
    assert status.status.current_revision.startswith("db-")
    scale = await asyncio.to_thread(apps.read_namespaced_stateful_set_scale, "db", "default")
    assert isinstance(scale, k8s.V1Scale)
    assert scale.spec.replicas == 2 and scale.status.replicas == 2
    assert scale.status.selector == "app=db"
    patched = await asyncio.to_thread(
        apps.patch_namespaced_stateful_set_scale, "db", "default", {"spec": {"replicas": 1}}
    )
    assert patched.spec.replicas == 1
    listed = await asyncio.to_thread(apps.list_namespaced_stateful_set, "default")
    assert [s.metadata.name for s in listed.items] == ["db"]
    revisions = await asyncio.to_thread(
        apps.list_namespaced_controller_revision, "default", label_selector="app=db"
    )
    assert [r.metadata.name for r in revisions.items] == [status.status.update_revision]
    revision = revisions.items[0]
    assert revision.revision == 1 and revision.metadata.owner_references[0].kind == "StatefulSet"
    assert revision.data["spec"]["template"]["$patch"] == "replace"
    await asyncio.to_thread(apps.delete_namespaced_stateful_set, "db", "default")
