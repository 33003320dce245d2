"""Create, get, list, update, patch and delete work for every kind at its Kubernetes path."""

from __future__ import annotations

import pytest

from tests.apiserver.conftest import Api
from tests.apiserver.kinds import KINDS
from tests.factories import pod


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_crud_round_trip(api: Api, kind: str) -> None:
    collection, body = KINDS[kind]
    created = await api.ok("POST", collection, body)
    meta = created["metadata"]
    assert created["kind"] == kind
    assert meta["name"] == "x"
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) > 0

    got = await api.ok("GET", f"{collection}/x")
    assert got == created

    listed = await api.ok("GET", collection)
    assert listed["kind"] == f"{kind}List"
    assert int(listed["metadata"]["resourceVersion"]) >= int(meta["resourceVersion"])
    assert [i["metadata"]["name"] for i in listed["items"] if i["metadata"]["name"] == "x"] == ["x"]
    assert all(i["kind"] == kind for i in listed["items"])

    updated = dict(got, metadata={**got["metadata"], "labels": {"changed": "yes"}})
    after_put = await api.ok("PUT", f"{collection}/x", updated)
    assert after_put["metadata"]["labels"] == {"changed": "yes"}
    assert int(after_put["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    assert after_put["metadata"]["uid"] == meta["uid"]

    patched = await api.ok(
        "PATCH",
        f"{collection}/x",
        None,
        raw=b'{"metadata":{"annotations":{"a":"b"}}}',
        content_type="application/merge-patch+json",
    )
    assert patched["metadata"]["annotations"] == {"a": "b"}
    assert patched["metadata"]["labels"] == {"changed": "yes"}

    status, out = await api.delete(f"{collection}/x")
    assert status == 200, out
    if kind == "Namespace":
        assert out["status"]["phase"] == "Terminating"  # the namespace controller finishes it
    else:
        status, out = await api.get(f"{collection}/x")
        assert status == 404
        assert out["reason"] == "NotFound"


async def test_create_fills_server_fields_and_defaults(api: Api) -> None:
    created = await api.create_pod("p")
    assert created["apiVersion"] == "v1" and created["kind"] == "Pod"
    assert created["metadata"]["namespace"] == "default"
    assert created["metadata"]["generation"] == 1
    spec = created["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert created["status"]["phase"] == "Pending"


async def test_generate_name_makes_unique_names(api: Api) -> None:
    body = pod("")
    body["metadata"] = {"generateName": "web-"}
    names = set()
    for _ in range(5):
        created = await api.ok("POST", "/api/v1/namespaces/default/pods", body)
        name = created["metadata"]["name"]
        assert name.startswith("web-") and len(name) == len("web-") + 5
        names.add(name)
    assert len(names) == 5


async def test_namespace_in_body_must_match_url(api: Api) -> None:
    body = pod("p")
    body["metadata"]["namespace"] = "kube-system"
    status, out = await api.post("/api/v1/namespaces/default/pods", body)
    assert status == 400
    assert out["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request"
    )


async def test_stale_resource_version_on_update_is_a_conflict(api: Api) -> None:
    created = await api.create_pod("p")
    first = dict(created, metadata={**created["metadata"], "labels": {"v": "1"}})
    await api.ok("PUT", "/api/v1/namespaces/default/pods/p", first)
    stale = dict(created, metadata={**created["metadata"], "labels": {"v": "2"}})
    status, out = await api.put("/api/v1/namespaces/default/pods/p", stale)
    assert status == 409
    assert out["reason"] == "Conflict"
    assert out["message"] == (
        'Operation cannot be fulfilled on pods "p": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


async def test_update_ignores_status_and_bumps_generation_on_spec_change(api: Api) -> None:
    created = await api.ok(
        "POST",
        "/api/v1/namespaces/default/replicationcontrollers",
        KINDS["ReplicationController"][1],
    )
    body = dict(created, status={"replicas": 99}, spec={**created["spec"], "replicas": 5})
    updated = await api.ok("PUT", "/api/v1/namespaces/default/replicationcontrollers/x", body)
    assert updated["spec"]["replicas"] == 5
    assert updated["status"] == created["status"]
    assert updated["metadata"]["generation"] == 2
    label_only = dict(updated, metadata={**updated["metadata"], "labels": {"a": "b"}})
    again = await api.ok("PUT", "/api/v1/namespaces/default/replicationcontrollers/x", label_only)
    assert again["metadata"]["generation"] == 2


async def test_three_patch_types(api: Api) -> None:
    await api.create_pod("p", labels={"a": "1"})
    path = "/api/v1/namespaces/default/pods/p"
    out = await api.ok(
        "PATCH",
        path,
        None,
        raw=b'[{"op":"add","path":"/metadata/labels/b","value":"2"}]',
        content_type="application/json-patch+json",
    )
    assert out["metadata"]["labels"] == {"a": "1", "b": "2"}
    status, out = await api.patch(path, {"metadata": {"labels": {"a": None}}}, kind="merge")
    assert status == 200 and out["metadata"]["labels"] == {"b": "2"}
    status, out = await api.patch(
        path, {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}, kind="strategic"
    )
    assert status == 200, out
    assert [c["image"] for c in out["spec"]["containers"]] == ["nginx:2"]


async def test_all_namespaces_list_and_cluster_paths(api: Api) -> None:
    await api.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "other"}})
    await api.create_pod("a")
    await api.create_pod("b", ns="other")
    listed = await api.ok("GET", "/api/v1/pods")
    assert sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in listed["items"]) == [
        ("default", "a"),
        ("other", "b"),
    ]
    in_other = await api.ok("GET", "/api/v1/namespaces/other/pods")
    assert [p["metadata"]["name"] for p in in_other["items"]] == ["b"]


async def test_yaml_bodies_are_accepted(api: Api) -> None:
    yaml_body = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: y\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
    status, out = await api.post(
        "/api/v1/namespaces/default/pods", raw=yaml_body, content_type="application/yaml"
    )
    assert status == 201, out
    assert out["spec"]["containers"][0]["image"] == "busybox"


async def test_put_creates_leases_and_events_but_not_pods(api: Api) -> None:
    lease = dict(KINDS["Lease"][1], metadata={"name": "node1"})
    status, out = await api.put(
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1", lease
    )
    assert status == 201, out
    status, out = await api.put("/api/v1/namespaces/default/pods/nope", pod("nope"))
    assert status == 404


async def test_deletecollection_with_label_selector(api: Api) -> None:
    await api.create_pod("a", labels={"app": "x"})
    await api.create_pod("b", labels={"app": "y"})
    status, out = await api.delete("/api/v1/namespaces/default/pods?labelSelector=app%3Dx")
    assert status == 200, out
    assert [i["metadata"]["name"] for i in out["items"]] == ["a"]
    left = await api.ok("GET", "/api/v1/namespaces/default/pods")
    assert [i["metadata"]["name"] for i in left["items"]] == ["b"]


async def test_dry_run_does_not_write(api: Api) -> None:
    status, out = await api.post("/api/v1/namespaces/default/pods?dryRun=All", pod("dry"))
    assert status == 201 and out["metadata"]["name"] == "dry"
    status, _ = await api.get("/api/v1/namespaces/default/pods/dry")
    assert status == 404
