"""The PV controller (``persistentvolume-binder``), in a real controller-manager process against a
real apiserver: claims bind to volumes both ways, wait for a volume or a first consumer with the
events Kubernetes writes, and a claim's deletion releases its volume as the reclaim policy says.
A controller-manager restarted in the middle converges from what it finds."""

from __future__ import annotations

from typing import Any

import pytest

from client.rest import ApiClient
from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import EVENTS, rt
from tests.factories import node, persistent_volume, persistent_volume_claim, storage_class

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PVS = rt("", "PersistentVolume")
PVCS = rt("", "PersistentVolumeClaim")
CLASSES = rt("storage.k8s.io", "StorageClass")
NODES = rt("", "Node")

Obj = dict[str, Any]


def phase(obj: Obj | None) -> str | None:
    return (obj or {}).get("status", {}).get("phase")


def annotations(obj: Obj) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


async def events_for(client: ApiClient, name: str, reason: str) -> list[Obj]:
    found = await client.list(EVENTS, namespace=None)
    return [
        e
        for e in found["items"]
        if e["involvedObject"].get("name") == name and e.get("reason") == reason
    ]


async def wait_for_event(client: ApiClient, name: str, reason: str) -> Obj:
    async with Watcher(client, EVENTS) as events:
        await events.wait_until(
            lambda objs: any(
                e["involvedObject"].get("name") == name and e.get("reason") == reason for e in objs
            ),
            what=f"event {reason} for {name}",
        )
    return (await events_for(client, name, reason))[0]


async def bound(client: ApiClient, claim: str, *, namespace: str = "default") -> Obj:
    """Await the claim's phase Bound; the claim as the server has it."""
    async with Watcher(client, PVCS, namespace=namespace) as claims:
        await claims.wait_until(
            lambda _o: phase(claims.get(f"{namespace}/{claim}")) == "Bound",
            what=f"claim {claim} Bound",
        )
    return await client.get(PVCS, claim, namespace=namespace)


async def volume_phase(client: ApiClient, name: str, wanted: str) -> Obj:
    async with Watcher(client, PVS) as volumes:
        await volumes.wait_until(
            lambda _o: phase(volumes.get(name)) == wanted, what=f"volume {name} {wanted}"
        )
    return await client.get(PVS, name)


async def test_immediate_claim_binds_the_smallest_fitting_volume_both_ways(
    cluster: Cluster,
) -> None:
    client = cluster.client
    await client.create(
        CLASSES, storage_class("manual", provisioner="kubernetes.io/no-provisioner")
    )
    await client.create(PVS, persistent_volume("big", storage="5Gi", storage_class="manual"))
    await client.create(PVS, persistent_volume("small", storage="1Gi", storage_class="manual"))
    await client.create(PVS, persistent_volume("tiny", storage="100Mi", storage_class="manual"))
    await client.create(PVS, persistent_volume("other-class", storage="1Gi"))
    await client.create(
        PVS,
        persistent_volume(
            "read-only", storage="1Gi", storage_class="manual", access_modes=("ReadOnlyMany",)
        ),
    )
    # the controller picks among the volumes it knows: let it know them all first
    for name in ("big", "small", "tiny", "other-class", "read-only"):
        await volume_phase(client, name, "Available")
    created = await client.create(
        PVCS, persistent_volume_claim("data", storage="500Mi", storage_class="manual")
    )

    claim = await bound(client, "data")
    assert claim["spec"]["volumeName"] == "small"
    assert claim["status"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["status"]["capacity"] == {"storage": "1Gi"}
    assert annotations(claim)["pv.kubernetes.io/bind-completed"] == "yes"
    assert annotations(claim)["pv.kubernetes.io/bound-by-controller"] == "yes"

    volume = await volume_phase(client, "small", "Bound")
    ref = volume["spec"]["claimRef"]
    assert (ref["kind"], ref["apiVersion"]) == ("PersistentVolumeClaim", "v1")
    assert (ref["namespace"], ref["name"]) == ("default", "data")
    assert ref["uid"] == created["metadata"]["uid"]
    assert ref["resourceVersion"]
    assert annotations(volume)["pv.kubernetes.io/bound-by-controller"] == "yes"
    for name in ("big", "tiny", "other-class", "read-only"):
        other = await client.get(PVS, name)
        assert phase(other) == "Available" and "claimRef" not in other["spec"]


async def test_claim_without_a_volume_waits_then_binds_when_one_appears(cluster: Cluster) -> None:
    client = cluster.client
    await client.create(PVCS, persistent_volume_claim("later", storage="1Gi", storage_class=""))
    event = await wait_for_event(client, "later", "FailedBinding")
    assert event["type"] == "Normal"
    assert event["message"] == (
        "no persistent volumes available for this claim and no storage class is set"
    )
    assert event["source"]["component"] == "persistentvolume-controller"
    assert phase(await client.get(PVCS, "later", namespace="default")) == "Pending"

    await client.create(PVS, persistent_volume("arrives", storage="2Gi"))
    claim = await bound(client, "later")
    assert claim["spec"]["volumeName"] == "arrives"
    assert claim["status"]["capacity"] == {"storage": "2Gi"}


async def test_prebound_claim_takes_the_volume_it_names(cluster: Cluster) -> None:
    client = cluster.client
    await client.create(PVS, persistent_volume("chosen", storage="1Gi"))
    await client.create(PVS, persistent_volume("better-fit", storage="1Gi"))
    await client.create(
        PVCS,
        persistent_volume_claim("named", storage="1Gi", storage_class="", volumeName="chosen"),
    )
    claim = await bound(client, "named")
    assert claim["spec"]["volumeName"] == "chosen"
    # the user set volumeName: the controller only completed the binding
    assert "pv.kubernetes.io/bound-by-controller" not in annotations(claim)
    volume = await volume_phase(client, "chosen", "Bound")
    assert annotations(volume)["pv.kubernetes.io/bound-by-controller"] == "yes"


async def test_wait_for_first_consumer_claim_binds_on_the_selected_node(cluster: Cluster) -> None:
    client = cluster.client
    await client.create(
        CLASSES,
        storage_class(
            "local", provisioner="kubernetes.io/no-provisioner", binding_mode="WaitForFirstConsumer"
        ),
    )
    for name in ("n1", "n2"):
        await client.create(NODES, node(name))
        await client.create(
            PVS,
            persistent_volume(
                f"disk-{name}",
                storage="1Gi",
                storage_class="local",
                node_affinity={"kubernetes.io/hostname": [name]},
            ),
        )
    await client.create(PVCS, persistent_volume_claim("wffc", storage_class="local"))
    event = await wait_for_event(client, "wffc", "WaitForFirstConsumer")
    assert event["message"] == "waiting for first consumer to be created before binding"
    assert phase(await client.get(PVCS, "wffc", namespace="default")) == "Pending"
    assert phase(await client.get(PVS, "disk-n1")) == "Available"

    # what the scheduler does when it places the claim's first pod on n2
    await client.patch(
        PVCS,
        "wffc",
        {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n2"}}},
        namespace="default",
    )
    claim = await bound(client, "wffc")
    assert claim["spec"]["volumeName"] == "disk-n2"
    assert phase(await client.get(PVS, "disk-n1")) == "Available"


async def test_class_with_an_external_provisioner_is_asked_for_a_volume(cluster: Cluster) -> None:
    client = cluster.client
    await client.create(CLASSES, storage_class("fast", provisioner="example.com/fast"))
    await client.create(PVCS, persistent_volume_claim("ask", storage_class="fast"))
    event = await wait_for_event(client, "ask", "ExternalProvisioning")
    assert event["message"].startswith(
        "Waiting for a volume to be created either by the external provisioner "
        "'example.com/fast' or manually by the system administrator."
    )
    claim = await client.get(PVCS, "ask", namespace="default")
    assert annotations(claim)["volume.kubernetes.io/storage-provisioner"] == "example.com/fast"
    assert annotations(claim)["volume.beta.kubernetes.io/storage-provisioner"] == (
        "example.com/fast"
    )
    assert phase(claim) == "Pending"


async def test_deleted_claim_releases_a_retained_volume_and_fails_an_undeletable_one(
    cluster: Cluster,
) -> None:
    client = cluster.client
    await client.create(PVS, persistent_volume("keep", storage="1Gi"))
    await client.create(PVCS, persistent_volume_claim("k", storage="1Gi", storage_class=""))
    await bound(client, "k")
    await client.delete(PVCS, "k", namespace="default")
    volume = await volume_phase(client, "keep", "Released")
    assert volume["spec"]["claimRef"]["name"] == "k"  # Retain keeps the link for the admin

    await client.create(
        PVS,
        persistent_volume("drop", storage="3Gi", persistentVolumeReclaimPolicy="Delete"),
    )
    await client.create(PVCS, persistent_volume_claim("d", storage="3Gi", storage_class=""))
    assert (await bound(client, "d"))["spec"]["volumeName"] == "drop"
    await client.delete(PVCS, "d", namespace="default")
    failed = await volume_phase(client, "drop", "Failed")
    message = (
        'error getting deleter volume plugin for volume "drop": no deletable volume plugin matched'
    )
    assert failed["status"]["message"] == message
    event = await wait_for_event(client, "drop", "VolumeFailedDelete")
    assert (event["type"], event["message"]) == ("Warning", message)


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--leader-elect=false",)


async def test_restarted_controller_manager_finishes_what_it_finds(cluster: Cluster) -> None:
    client = cluster.client
    await client.create(PVS, persistent_volume("first", storage="1Gi"))
    await client.create(PVCS, persistent_volume_claim("one", storage="1Gi", storage_class=""))
    await bound(client, "one")

    await cluster.cm.akill()
    # while nobody binds: a new claim, a volume for it, and the first claim goes away
    await client.create(PVS, persistent_volume("second", storage="1Gi"))
    await client.create(PVCS, persistent_volume_claim("two", storage="1Gi", storage_class=""))
    await client.delete(PVCS, "one", namespace="default")
    assert phase(await client.get(PVCS, "two", namespace="default")) == "Pending"

    await cluster.new_cm("--leader-elect=false").astart()
    assert (await bound(client, "two"))["spec"]["volumeName"] == "second"
    await volume_phase(client, "first", "Released")
