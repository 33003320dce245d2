"""A built-in kind served from its schema (``api.schema_kinds``: PriorityClass) is served as any
kind is: discovery and OpenAPI v3 name it as Kubernetes does, its Table prints Go's zero values,
unknown fields are pruned or refused, a watch from a resourceVersion sees its updates, its
``generation`` stays 1 as Kubernetes' strategy keeps it, and a CRD cannot take its names."""

from __future__ import annotations

from typing import Any

from tests.apiserver.conftest import Api, EventReader, crd_condition, established
from tests.factories import crd, priority_class

Obj = dict[str, Any]

GROUP_VERSION = "/apis/scheduling.k8s.io/v1"
CLASSES = f"{GROUP_VERSION}/priorityclasses"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


async def test_discovery_and_openapi_describe_it_as_kubernetes(api: Api) -> None:
    resources = (await api.ok("GET", GROUP_VERSION))["resources"]
    assert resources == [
        {
            "name": "priorityclasses",
            "singularName": "priorityclass",
            "namespaced": False,
            "kind": "PriorityClass",
            "verbs": [
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
            "shortNames": ["pc"],
        }
    ]
    index = (await api.ok("GET", "/openapi/v3"))["paths"]
    document = await api.ok("GET", index["apis/scheduling.k8s.io/v1"]["serverRelativeURL"])
    schema = document["components"]["schemas"]["io.k8s.api.scheduling.v1.PriorityClass"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "scheduling.k8s.io", "version": "v1", "kind": "PriorityClass"}
    ]
    assert schema["properties"]["value"]["format"] == "int32"
    assert set(schema["properties"]) == {
        "apiVersion",
        "kind",
        "metadata",
        "description",
        "globalDefault",
        "preemptionPolicy",
        "value",
    }


async def test_defaults_table_and_unknown_fields(api: Api) -> None:
    created = await api.ok("POST", CLASSES, priority_class("plain", 7))
    assert created["preemptionPolicy"] == "PreemptLowerPriority"
    assert created["metadata"]["generation"] == 1
    assert "globalDefault" not in created

    table = await api.ok("GET", f"{CLASSES}/plain", headers={"Accept": TABLE})
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Value",
        "Global-Default",
        "Age",
        "PreemptionPolicy",
    ]
    cells = table["rows"][0]["cells"]
    assert cells[:3] == ["plain", 7, False] and cells[4] == "PreemptLowerPriority"

    colourful = priority_class("colourful", 8, colour="red")
    status, body = await api.post(f"{CLASSES}?fieldValidation=Strict", colourful)
    assert status == 400, body
    assert body["message"] == (
        'PriorityClass in version "v1" cannot be handled as a PriorityClass: '
        'strict decoding error: unknown field "colour"'
    )
    status, body = await api.post(CLASSES, colourful)
    assert status == 201 and "colour" not in body

    status, body = await api.post(CLASSES, priority_class("wrong", "high"))
    assert status == 422, body
    assert body["details"]["causes"][0] == {
        "reason": "FieldValueTypeInvalid",
        "message": 'Invalid value: "string": value in body must be of type integer: "string"',
        "field": "value",
    }


async def test_watch_sees_updates_and_generation_stays_one(api: Api) -> None:
    created = await api.ok("POST", CLASSES, priority_class("watched", 3, description="a"))
    rv = created["metadata"]["resourceVersion"]
    async with api.watch(CLASSES, resourceVersion=rv) as resp:
        events = EventReader(resp)
        updated = await api.ok("PUT", f"{CLASSES}/watched", {**created, "description": "b"})
        patched = await api.ok(
            "PATCH",
            f"{CLASSES}/watched",
            {"globalDefault": True},
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        seen = await events.take(2)
    assert [e["type"] for e in seen] == ["MODIFIED", "MODIFIED"]
    assert seen[0]["object"]["description"] == "b"
    assert seen[1]["object"]["globalDefault"] is True
    assert updated["metadata"]["generation"] == patched["metadata"]["generation"] == 1


async def test_a_crd_cannot_take_its_names(api: Api) -> None:
    definition = crd("priorityclasses", group="scheduling.k8s.io", kind="PriorityClass")
    accepted = await crd_condition(api, definition, "NamesAccepted")
    assert (accepted["status"], accepted["reason"], accepted["message"]) == (
        "False",
        "PluralConflict",
        '"priorityclasses" is already in use',
    )
    listed = await api.ok("GET", CLASSES)
    assert {"system-node-critical", "system-cluster-critical"} <= {
        item["metadata"]["name"] for item in listed["items"]
    }


async def test_a_group_version_of_both_sorts_is_one_openapi_document(api: Api) -> None:
    """A kind described by a schema beside kinds described by models (here a CRD's kind in
    storage.k8s.io/v1, beside StorageClass) shares their group-version's document."""
    gadgets = crd("gadgets", group="storage.k8s.io", kind="Gadget", short_names=())
    gadgets["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, testing"}
    await established(api, gadgets)
    index = (await api.ok("GET", "/openapi/v3"))["paths"]
    document = await api.ok("GET", index["apis/storage.k8s.io/v1"]["serverRelativeURL"])
    schemas = document["components"]["schemas"]
    assert "io.k8s.api.storage.v1.StorageClass" in schemas
    assert "io.k8s.storage.v1.Gadget" in schemas
    assert "/apis/storage.k8s.io/v1/storageclasses" in document["paths"]
    assert "/apis/storage.k8s.io/v1/namespaces/{namespace}/gadgets" in document["paths"]
