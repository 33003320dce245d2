"""A CustomResourceDefinition becomes a served kind: validated, defaulted, pruned, listed, watched,
patched, printed, discovered and described by OpenAPI, with status and scale subresources, two
versions (one deprecated), and its objects deleted with it."""

from __future__ import annotations

import copy
from typing import Any

from tests.apiserver.conftest import CRDS, Api, EventReader, established
from tests.factories import crd, widget

Obj = dict[str, Any]

WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def _condition(obj: Obj, type_: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return c
    return None


async def test_crd_is_validated_with_kubernetes_messages(api: Api) -> None:
    bad = crd(group="example")
    bad["metadata"]["name"] = "widgets.example"
    bad["spec"]["versions"][1]["storage"] = True
    bad["spec"]["names"]["kind"] = "Wid get"
    status, body = await api.post(CRDS, bad)
    assert status == 422, body
    causes = {(c["field"], c["message"]) for c in body["details"]["causes"]}
    assert (
        "spec.group",
        'Invalid value: "example": should be a domain with at least one dot',
    ) in causes
    assert (
        "spec.names.kind",
        'Invalid value: "Wid get": may have mixed case, but should otherwise match: '
        "[a-z]([-a-z0-9]*[a-z0-9])?",
    ) in causes
    assert any(
        f == "spec.versions"
        and m.endswith("must have exactly one version marked as storage version")
        for f, m in causes
    )
    wrong_name = crd()
    wrong_name["metadata"]["name"] = "gadgets.example.com"
    status, body = await api.post(CRDS, wrong_name)
    assert status == 422
    assert body["details"]["causes"][0] == {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group',
        "field": "metadata.name",
    }


async def test_established_crd_serves_its_kind_with_schema_rules(api: Api) -> None:
    definition = await established(api, crd())
    assert _condition(definition, "NamesAccepted")["reason"] == "NoConflicts"  # type: ignore[index]
    assert definition["status"]["acceptedNames"]["kind"] == "Widget"
    assert definition["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]

    # 422 with Kubernetes' causes
    status, body = await api.post(
        WIDGETS, widget("bad", replicas="three", color="Red!", size="huge")
    )
    assert status == 422, body
    assert body["reason"] == "Invalid"
    causes = {c["field"]: c for c in body["details"]["causes"]}
    assert causes["spec.replicas"] == {
        "reason": "FieldValueTypeInvalid",
        "message": 'Invalid value: "string": spec.replicas in body must be of type integer: "string"',
        "field": "spec.replicas",
    }
    assert causes["spec.size"]["message"] == (
        'Unsupported value: "huge": supported values: "small", "large"'
    )
    assert causes["spec.color"]["message"] == (
        "Invalid value: \"Red!\": spec.color in body should match '^[a-z]+$'"
    )
    status, body = await api.post(WIDGETS, {**widget("nosize"), "spec": {}})
    assert status == 422
    assert body["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.size"}
    ]
    status, body = await api.post(
        WIDGETS, widget("dup", ports=[{"name": "a", "port": 1}, {"name": "a", "port": 2}])
    )
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.ports[1]"
    assert body["details"]["causes"][0]["reason"] == "FieldValueDuplicate"

    # defaults filled, unknown fields pruned (with a warning), open fields kept
    body = widget("w1", extra={"anything": {"goes": 1}})
    body["spec"]["unknown"] = "dropped"
    body["topLevel"] = "dropped"
    async with api.client.post(WIDGETS, json=body) as resp:
        assert resp.status == 201, await resp.text()
        warnings = resp.headers.getall("Warning", [])
        created = await resp.json()
    assert created["spec"] == {
        "size": "small",
        "replicas": 1,
        "color": "blue",
        "extra": {"anything": {"goes": 1}},
    }
    assert "topLevel" not in created
    assert '299 - "unknown field \\"spec.unknown\\""' in warnings
    assert created["metadata"]["generation"] == 1
    assert "status" not in created

    # fieldValidation=Strict refuses the unknown field instead
    status, body = await api.post(WIDGETS + "?fieldValidation=Strict", {**widget("w2"), "bogus": 1})
    assert status == 400
    assert 'strict decoding error: unknown field "bogus"' in body["message"]


async def test_patches_status_scale_and_versions(api: Api) -> None:
    await established(api, crd())
    await api.ok("POST", WIDGETS, widget("w", selector="app=w"))
    path = f"{WIDGETS}/w"

    patched = await api.ok(
        "PATCH", path, {"spec": {"replicas": 3}}, content_type="application/merge-patch+json"
    )
    assert patched["spec"]["replicas"] == 3
    assert patched["metadata"]["generation"] == 2
    patched = await api.ok(
        "PATCH",
        path,
        [{"op": "replace", "path": "/spec/size", "value": "large"}],
        content_type="application/json-patch+json",
    )
    assert patched["spec"]["size"] == "large"
    status, body = await api.patch(path, {"spec": {"size": "small"}}, kind="strategic")
    assert status == 415, body
    status, body = await api.patch(path, {"spec": {"replicas": -1}})
    assert status == 422
    assert body["details"]["causes"][0]["message"] == (
        "Invalid value: -1: spec.replicas in body should be greater than or equal to 0"
    )

    # status: its own subresource; the main resource ignores status, status ignores spec
    current = await api.ok("GET", path)
    current["status"] = {"ready": True, "replicas": 3}
    current["spec"]["replicas"] = 9
    updated = await api.ok("PUT", f"{path}/status", current)
    assert updated["status"] == {"ready": True, "replicas": 3}
    assert updated["spec"]["replicas"] == 3
    assert updated["metadata"]["generation"] == 3
    ignored = await api.ok(
        "PATCH", path, {"status": {"ready": False}}, content_type="application/merge-patch+json"
    )
    assert ignored["status"]["ready"] is True
    assert ignored["metadata"]["generation"] == 3

    # scale: autoscaling/v1 from the CRD's paths
    scale = await api.ok("GET", f"{path}/scale")
    assert scale["kind"] == "Scale"
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"] == {"replicas": 3, "selector": "app=w"}
    await api.ok(
        "PATCH",
        f"{path}/scale",
        {"spec": {"replicas": 5}},
        content_type="application/merge-patch+json",
    )
    assert (await api.ok("GET", path))["spec"]["replicas"] == 5

    # the deprecated v1beta1 serves the same object under its apiVersion, with a warning
    async with api.client.get("/apis/example.com/v1beta1/namespaces/default/widgets/w") as resp:
        assert resp.status == 200
        assert resp.headers.getall("Warning") == [
            '299 - "example.com/v1beta1 Widget is deprecated"'
        ]
        old = await resp.json()
    assert old["apiVersion"] == "example.com/v1beta1"
    listed = await api.ok("GET", "/apis/example.com/v1beta1/widgets")
    assert [i["apiVersion"] for i in listed["items"]] == ["example.com/v1beta1"]
    stored = await api.ok("GET", path)
    assert stored["apiVersion"] == "example.com/v1"


async def test_list_watch_and_table(api: Api) -> None:
    await established(api, crd())
    first = await api.ok("POST", WIDGETS, widget("a"))
    await api.ok(
        "POST", WIDGETS, {**widget("b"), "metadata": {"name": "b", "labels": {"tier": "x"}}}
    )
    listed = await api.ok("GET", WIDGETS + "?labelSelector=tier=x")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["b"]
    listed = await api.ok("GET", "/apis/example.com/v1/widgets?fieldSelector=metadata.name=a")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]

    async with api.watch(WIDGETS, resourceVersion=first["metadata"]["resourceVersion"]) as resp:
        events = await EventReader(resp).take(1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b")]

    table = await api.ok("GET", WIDGETS, headers={"Accept": TABLE})
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Size",
        "Replicas",
        "Ready",
        "Age",
    ]
    assert [c["priority"] for c in table["columnDefinitions"]] == [0, 0, 0, 1, 0]
    assert [r["cells"][:4] for r in table["rows"]] == [
        ["a", "small", 1, None],
        ["b", "small", 1, None],
    ]


async def test_discovery_and_openapi_follow_the_crd(api: Api) -> None:
    async with api.client.get("/apis", headers={"Accept": AGGREGATED}) as resp:
        before = resp.headers["ETag"]
    await established(api, crd())
    async with api.client.get("/apis", headers={"Accept": AGGREGATED}) as resp:
        assert resp.headers["ETag"] != before
        doc = await resp.json()
    group = next(g for g in doc["items"] if g["metadata"]["name"] == "example.com")
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    resource = group["versions"][0]["resources"][0]
    assert (resource["resource"], resource["scope"], resource["shortNames"]) == (
        "widgets",
        "Namespaced",
        ["wd"],
    )
    legacy = await api.ok("GET", "/apis/example.com/v1")
    names = {r["name"] for r in legacy["resources"]}
    assert names == {"widgets", "widgets/status", "widgets/scale"}

    root = await api.ok("GET", "/openapi/v3")
    url = root["paths"]["apis/example.com/v1"]["serverRelativeURL"]
    spec = await api.ok("GET", url)
    schema = spec["components"]["schemas"]["com.example.v1.Widget"]
    assert schema["properties"]["spec"]["properties"]["size"]["enum"] == ["small", "large"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "example.com", "version": "v1", "kind": "Widget"}
    ]
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in spec["components"]["schemas"]


async def test_names_conflict_is_not_accepted(api: Api) -> None:
    await established(api, crd())
    clash = crd(plural="gizmos", kind="Widget", short_names=())
    clash["spec"]["names"]["singular"] = "gizmo"
    created = await api.ok("POST", CRDS, clash)
    name = created["metadata"]["name"]
    async with api.watch(CRDS, fieldSelector=f"metadata.name={name}") as resp:
        events = EventReader(resp)
        while True:
            event = await events.next()
            assert event is not None
            cond = _condition(event["object"], "NamesAccepted")
            if cond is not None:
                break
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False",
        "KindConflict",
        '"Widget" is already in use',
    )
    status, _ = await api.get("/apis/example.com/v1/gizmos")
    assert status == 404


async def test_deleting_a_crd_deletes_its_objects_first(api: Api) -> None:
    await established(api, crd())
    for name in ("a", "b"):
        await api.ok("POST", WIDGETS, widget(name))
    async with api.watch(CRDS, fieldSelector="metadata.name=widgets.example.com") as resp:
        events = EventReader(resp)
        await events.take(1)
        await api.ok("DELETE", f"{CRDS}/widgets.example.com")
        seen: list[Obj] = []
        while True:
            event = await events.next()
            assert event is not None
            seen.append(event)
            if event["type"] == "DELETED":
                break
    terminating = [_condition(e["object"], "Terminating") for e in seen]
    assert any(c is not None and c["status"] == "True" for c in terminating)
    status, _ = await api.get(WIDGETS)
    assert status == 404
    # the objects are gone from storage too: a new CRD of the same kind starts empty
    await established(api, copy.deepcopy(crd()))
    assert (await api.ok("GET", WIDGETS))["items"] == []
