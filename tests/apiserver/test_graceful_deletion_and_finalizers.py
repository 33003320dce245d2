"""Deleting follows Kubernetes' protocol: grace periods, finalizers, preconditions, namespaces."""

from __future__ import annotations

from tests.apiserver.conftest import Api, EventReader, summary

PODS = "/api/v1/namespaces/default/pods"
RCS = "/api/v1/namespaces/default/replicationcontrollers"


async def bound_pod(api: Api, name: str, **spec: object) -> dict:
    await api.create_pod(name, **spec)
    await api.ok(
        "POST",
        f"{PODS}/{name}/binding",
        {"metadata": {"name": name}, "target": {"kind": "Node", "name": "node1"}},
    )
    return await api.ok("GET", f"{PODS}/{name}")


async def test_unbound_pod_is_removed_at_once(api: Api) -> None:
    await api.create_pod("p")
    status, out = await api.delete(f"{PODS}/p")
    assert status == 200 and out["kind"] == "Pod"
    assert (await api.get(f"{PODS}/p"))[0] == 404


async def test_bound_pod_gets_a_deletion_timestamp_then_the_kubelet_finishes_it(api: Api) -> None:
    pod = await bound_pod(api, "p", terminationGracePeriodSeconds=20)
    async with api.watch(PODS, resourceVersion=pod["metadata"]["resourceVersion"]) as resp:
        events = EventReader(resp)
        status, out = await api.delete(f"{PODS}/p")
        assert status == 200
        assert out["metadata"]["deletionGracePeriodSeconds"] == 20
        assert out["metadata"]["deletionTimestamp"]
        [modified] = await events.take(1)
        assert modified["type"] == "MODIFIED"
        assert modified["object"]["metadata"]["deletionTimestamp"]
        # still readable while terminating
        assert (await api.get(f"{PODS}/p"))[0] == 200
        # the kubelet confirms with grace 0
        status, out = await api.delete(f"{PODS}/p", {"gracePeriodSeconds": 0})
        assert status == 200
        assert summary(await events.take(1)) == [("DELETED", "p")]
    assert (await api.get(f"{PODS}/p"))[0] == 404


async def test_delete_options_grace_period_and_shortening(api: Api) -> None:
    await bound_pod(api, "p")
    _, out = await api.delete(f"{PODS}/p?gracePeriodSeconds=60")
    assert out["metadata"]["deletionGracePeriodSeconds"] == 60
    _, out = await api.delete(f"{PODS}/p?gracePeriodSeconds=120")  # never lengthened
    assert out["metadata"]["deletionGracePeriodSeconds"] == 60
    _, out = await api.delete(f"{PODS}/p?gracePeriodSeconds=5")
    assert out["metadata"]["deletionGracePeriodSeconds"] == 5


async def test_terminal_pod_is_removed_at_once(api: Api) -> None:
    await bound_pod(api, "p")
    await api.ok(
        "PATCH",
        f"{PODS}/p/status",
        None,
        raw=b'{"status":{"phase":"Succeeded"}}',
        content_type="application/merge-patch+json",
    )
    await api.delete(f"{PODS}/p")
    assert (await api.get(f"{PODS}/p"))[0] == 404


async def test_finalizers_block_removal_until_emptied(api: Api) -> None:
    body = {
        "metadata": {"name": "cm", "finalizers": ["example.com/hold"]},
        "spec": {
            "replicas": 0,
            "selector": {"app": "x"},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    await api.ok("POST", RCS, body)
    status, out = await api.delete(f"{RCS}/cm")
    assert status == 200
    assert out["kind"] == "ReplicationController"  # pending: the object, not a Status
    assert out["metadata"]["deletionTimestamp"]
    assert out["metadata"]["deletionGracePeriodSeconds"] == 0
    # new finalizers may not be added while terminating
    status, _ = await api.patch(
        f"{RCS}/cm", {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}
    )
    assert status == 422
    status, out = await api.patch(f"{RCS}/cm", {"metadata": {"finalizers": None}})
    assert status == 200, out
    assert (await api.get(f"{RCS}/cm"))[0] == 404


async def test_deleted_non_pod_answers_a_success_status(api: Api) -> None:
    body = {
        "metadata": {"name": "rc"},
        "spec": {
            "selector": {"app": "x"},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    created = await api.ok("POST", RCS, body)
    status, out = await api.delete(f"{RCS}/rc")
    assert status == 200
    assert out["kind"] == "Status" and out["status"] == "Success"
    assert out["details"] == {
        "name": "rc",
        "kind": "replicationcontrollers",
        "uid": created["metadata"]["uid"],
    }


async def test_propagation_policies_add_gc_finalizers(api: Api) -> None:
    for name, policy, finalizer in (
        ("f", "Foreground", "foregroundDeletion"),
        ("o", "Orphan", "orphan"),
    ):
        body = {
            "metadata": {"name": name},
            "spec": {
                "selector": {"app": name},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        }
        await api.ok("POST", RCS, body)
        status, out = await api.delete(f"{RCS}/{name}", {"propagationPolicy": policy})
        assert status == 200
        assert out["metadata"]["finalizers"] == [finalizer]
        assert out["metadata"]["deletionTimestamp"]


async def test_preconditions_mismatch_is_a_conflict(api: Api) -> None:
    created = await api.create_pod("p")
    status, out = await api.delete(f"{PODS}/p", {"preconditions": {"uid": "not-it"}})
    assert status == 409 and "Precondition failed: UID in precondition: not-it" in out["message"]
    status, out = await api.delete(f"{PODS}/p", {"preconditions": {"resourceVersion": "1"}})
    assert status == 409
    status, _ = await api.delete(
        f"{PODS}/p", {"preconditions": {"uid": created["metadata"]["uid"]}}
    )
    assert status == 200


async def test_delete_missing_object_is_404(api: Api) -> None:
    status, out = await api.delete(f"{PODS}/nope")
    assert status == 404 and out["message"] == 'pods "nope" not found'


async def test_namespace_lifecycle_by_hand(make_api) -> None:
    """The protocol a namespace controller follows (the in-process one is off here)."""
    api = await make_api("memory")
    await api.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
    await api.create_pod("p", ns="team")
    status, out = await api.delete("/api/v1/namespaces/team")
    assert status == 200 and out["status"]["phase"] == "Terminating"
    assert out["spec"]["finalizers"] == ["kubernetes"]
    status, out = await api.post(
        "/api/v1/namespaces/team/pods",
        {"metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
    )
    assert status == 403
    assert out["message"] == (
        'pods "q" is forbidden: unable to create new content in namespace team because it is being terminated'
    )
    # a second delete while content remains is a conflict; the namespace controller finalizes
    status, out = await api.delete("/api/v1/namespaces/team")
    assert status == 409
    await api.delete("/api/v1/namespaces/team/pods/p")
    ns = await api.ok("GET", "/api/v1/namespaces/team")
    ns["spec"]["finalizers"] = []
    out = await api.ok("PUT", "/api/v1/namespaces/team/finalize", ns)
    assert out["spec"]["finalizers"] == []
    # finalized while terminating: gone, as Kubernetes deletes it during that update
    assert (await api.get("/api/v1/namespaces/team"))[0] == 404


async def test_missing_namespace_and_system_namespaces(api: Api) -> None:
    status, out = await api.post(
        "/api/v1/namespaces/ghost/pods",
        {"metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
    )
    assert status == 404 and out["message"] == 'namespaces "ghost" not found'
    listed = await api.ok("GET", "/api/v1/namespaces")
    names = {n["metadata"]["name"] for n in listed["items"]}
    assert {"default", "kube-system", "kube-node-lease"} <= names
    status, out = await api.delete("/api/v1/namespaces/default")
    assert (
        status == 403
        and out["message"] == 'namespaces "default" is forbidden: this namespace may not be deleted'
    )
