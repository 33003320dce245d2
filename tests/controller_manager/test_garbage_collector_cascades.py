"""Cascading deletion through ownerReferences, against real processes, in all three modes:
Background (the owner goes at once, the garbage collector deletes the pods after), Foreground
(the owner waits, marked ``foregroundDeletion``, until its pods are gone), Orphan (the pods
stay, without the reference) — and a pod whose owner never existed is collected."""

from __future__ import annotations

import pytest

from api.errors import NotFound
from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import DEPLOYMENTS, PODS, RCS, RSS, Obj, active, owned_by

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


async def _rc_with_pods(cluster: Cluster, pods: Watcher, name: str, replicas: int = 3) -> Obj:
    rc = await cluster.client.create(
        RCS, factories.rc(name, replicas=replicas), namespace="default"
    )
    await pods.wait_until(
        lambda o: sum(1 for p in o if owned_by(p, rc) and active(p)) == replicas,
        what=f"{replicas} pods of {name}",
    )
    return rc


async def test_background_deletes_owner_then_dependents(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.start_nodes("node1")
    async with (
        Watcher(client, PODS, namespace="default") as pods,
    ):
        rc = await _rc_with_pods(cluster, pods, "bg")
        await client.delete(RCS, "bg", namespace="default", propagation_policy="Background")
        with pytest.raises(NotFound):
            await client.get(RCS, "bg", namespace="default")  # the owner went at once
        await pods.wait_until(
            lambda o: not any(owned_by(p, rc) for p in o), what="every pod of bg collected"
        )


async def test_default_delete_is_background(cluster: Cluster) -> None:
    client = cluster.client
    async with Watcher(client, PODS, namespace="default") as pods:
        rc = await _rc_with_pods(cluster, pods, "plain", replicas=2)
        await client.delete(RCS, "plain", namespace="default")
        await pods.wait_until(
            lambda o: not any(owned_by(p, rc) for p in o), what="pods of plain collected"
        )


async def test_foreground_waits_for_dependents(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.start_nodes("node1")
    async with (
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, RCS, namespace="default") as rcs,
    ):
        rc = await _rc_with_pods(cluster, pods, "fg")
        answer = await client.delete(
            RCS, "fg", namespace="default", propagation_policy="Foreground"
        )
        assert answer["metadata"]["finalizers"] == ["foregroundDeletion"]
        assert answer["metadata"].get("deletionTimestamp")
        await rcs.wait_until(lambda o: not o, what="fg deleted once its pods are gone")
        remaining = (await client.list(PODS, namespace="default"))["items"]
        assert not any(owned_by(p, rc) for p in remaining), "the owner outlived its pods"


async def test_orphan_keeps_dependents_without_the_reference(cluster: Cluster) -> None:
    client = cluster.client
    async with (
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, RCS, namespace="default") as rcs,
    ):
        rc = await _rc_with_pods(cluster, pods, "orph")
        names = {p["metadata"]["name"] for p in pods.objects() if owned_by(p, rc)}
        await client.delete(RCS, "orph", namespace="default", propagation_policy="Orphan")
        await rcs.wait_until(lambda o: not o, what="orph deleted after orphaning")
        got = await pods.wait_until(
            lambda o: all(not p["metadata"].get("ownerReferences") for p in o),
            what="pods without ownerReferences",
        )
        assert {p["metadata"]["name"] for p in got} == names
        assert all(active(p) for p in got)


async def test_dangling_dependent_is_collected(cluster: Cluster) -> None:
    client = cluster.client
    ghost_ref = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "name": "ghost",
        "uid": "00000000-0000-0000-0000-000000000000",
        "controller": True,
    }
    async with Watcher(client, PODS, namespace="default") as pods:
        await client.create(
            PODS,
            {
                "metadata": {"name": "dangling", "ownerReferences": [ghost_ref]},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
            namespace="default",
        )
        await client.create(
            PODS,
            {
                "metadata": {"name": "free"},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
            namespace="default",
        )
        got = await pods.wait_until(
            lambda o: {p["metadata"]["name"] for p in o} == {"free"},
            what="the dangling pod collected",
        )
        assert [p["metadata"]["name"] for p in got] == ["free"]


async def test_foreground_through_two_levels_deployment_replicaset_pods(cluster: Cluster) -> None:
    client = cluster.client
    async with (
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, RSS, namespace="default") as rss,
        Watcher(client, DEPLOYMENTS, namespace="default") as deployments,
    ):
        await client.create(
            DEPLOYMENTS, factories.deployment("chain", replicas=3), namespace="default"
        )
        await pods.wait_until(lambda o: sum(1 for p in o if active(p)) == 3, what="3 pods")
        await rss.wait_until(lambda o: len(o) == 1, what="the ReplicaSet")
        await client.delete(
            DEPLOYMENTS, "chain", namespace="default", propagation_policy="Foreground"
        )
        await deployments.wait_until(lambda o: not o, what="the Deployment gone last", within=60)
        assert (await client.list(PODS, namespace="default"))["items"] == []
        assert (await client.list(RSS, namespace="default"))["items"] == []
