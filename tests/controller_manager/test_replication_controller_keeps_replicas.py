"""The seed's replication controller, against real processes: an RC of 3 gets 3 pods; a deleted
pod is replaced; scaling to 10 and back to 2 follows; the status counts what is there; and
the controller never has more active pods than asked for while scaling up."""

from __future__ import annotations

import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import EVENTS, PODS, RCS, Obj, active, owned_by, ready

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


async def test_rc_creates_replaces_scales_and_reports_status(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.start_nodes("node1", "node2")
    async with (
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, RCS, namespace="default") as rcs,
    ):
        rc = await client.create(RCS, factories.rc("web", replicas=3), namespace="default")
        peak = {"active": 0}

        def mine(objs: list[Obj]) -> list[Obj]:
            return [p for p in objs if owned_by(p, rc) and active(p)]

        def note(_type: str, _obj: Obj) -> None:
            peak["active"] = max(peak["active"], len(mine(pods.objects())))

        pods.on_event = note

        await pods.wait_until(
            lambda o: len(mine(o)) == 3 and all(ready(p) for p in mine(o)),
            what="3 ready pods owned by the RC",
        )
        assert peak["active"] == 3
        for p in mine(pods.objects()):
            assert p["metadata"]["name"].startswith("web-")
            assert p["metadata"]["labels"] == {"app": "web"}
            (ref,) = p["metadata"]["ownerReferences"]
            assert ref == {
                "apiVersion": "v1",
                "kind": "ReplicationController",
                "name": "web",
                "uid": rc["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }

        victim = mine(pods.objects())[0]["metadata"]["name"]
        await client.delete(PODS, victim, namespace="default")
        await pods.wait_until(
            lambda o: len(mine(o)) == 3 and victim not in {p["metadata"]["name"] for p in o},
            what=f"a replacement for {victim}",
        )

        await client.patch(RCS, "web", {"spec": {"replicas": 10}}, namespace="default")
        await pods.wait_until(
            lambda o: len(mine(o)) == 10 and all(ready(p) for p in mine(o)),
            what="10 ready pods",
        )
        assert peak["active"] == 10, "scaling up never overshoots"

        await client.patch(RCS, "web", {"spec": {"replicas": 2}}, namespace="default")
        await pods.wait_until(
            lambda o: len(mine(o)) == 2 and len(o) == 2, what="2 pods left, the rest gone"
        )
        final = await rcs.wait_until(
            lambda o: any(
                r["status"].get("replicas") == 2
                and r["status"].get("readyReplicas") == 2
                and r["status"].get("availableReplicas") == 2
                and r["status"].get("fullyLabeledReplicas") == 2
                and r["status"].get("observedGeneration") == r["metadata"]["generation"]
                for r in o
            ),
            what="RC status 2/2 at the current generation",
        )
        assert final[0]["metadata"]["generation"] == 3

    events = (await client.list(EVENTS, namespace="default"))["items"]
    reasons = {(e["reason"], e["source"]["component"]) for e in events}
    assert ("SuccessfulCreate", "replication-controller") in reasons
    assert ("SuccessfulDelete", "replication-controller") in reasons
    assert any(e["message"].startswith("Created pod: web-") for e in events)


async def test_rc_adopts_orphans_and_releases_relabelled_pods(cluster: Cluster) -> None:
    client = cluster.client
    orphan = {
        "metadata": {"name": "stray", "labels": {"app": "db"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    }
    await client.create(PODS, orphan, namespace="default")
    async with Watcher(client, PODS, namespace="default") as pods:
        rc = await client.create(RCS, factories.rc("db", replicas=2), namespace="default")

        def mine(objs: list[Obj]) -> list[Obj]:
            return [p for p in objs if owned_by(p, rc) and active(p)]

        got = await pods.wait_until(lambda o: len(mine(o)) == 2, what="2 pods, one adopted")
        assert "stray" in {p["metadata"]["name"] for p in mine(got)}
        await pods.wait_until(lambda o: len(o) == 2, what="no third pod")

        # relabel the adopted pod out of the selector: it is released and replaced
        await client.patch(
            PODS, "stray", {"metadata": {"labels": {"app": "other"}}}, namespace="default"
        )
        got = await pods.wait_until(
            lambda o: (
                len(mine(o)) == 2
                and "stray" not in {p["metadata"]["name"] for p in mine(o)}
                and not (pods.get("default/stray") or {}).get("metadata", {}).get("ownerReferences")
            ),
            what="stray released and replaced",
        )
        assert len(got) == 3
