"""A custom object is read as the version asked for, with its schema's defaults, on every path.

Against a real apiserver process with the official ``kubernetes`` client: a CRD stored as ``v1``
and also served as ``v1beta1`` (conversion ``None``) answers GET, LIST, WATCH (from a
resourceVersion, and from the current state) and DELETE on ``v1beta1`` with objects saying
``v1beta1``. Then a default is added to the schema: an object stored before it gets the default
on GET, LIST and WATCH although nothing rewrote it (its resourceVersion is unchanged) —
Kubernetes defaults when it reads from storage, not only when it writes.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client, watch

from kubelite.testing import ComponentProcess
from kubelite.testing.waiting import poll_until
from tests.factories import crd, widget

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]

GROUP, PLURAL, NS = "example.com", "widgets", "default"

SCHEMA: Obj = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {"size": {"type": "string"}, "tier": {"type": "string"}},
        }
    },
}


def _established(ext: client.ApiextensionsV1Api, name: str) -> bool:
    found = ext.read_custom_resource_definition(name)
    return any(
        c.type == "Established" and c.status == "True" for c in found.status.conditions or ()
    )


def _watched(
    objects: client.CustomObjectsApi, version: str, *names: str, **params: Any
) -> list[Obj]:
    """The events of a watch on ``version`` until it has shown every object of ``names``."""
    events: list[Obj] = []
    stream = watch.Watch()
    for event in stream.stream(
        objects.list_namespaced_custom_object, GROUP, version, NS, PLURAL, **params
    ):
        events.append(event)
        if {e["object"]["metadata"]["name"] for e in events} >= set(names):
            stream.stop()
    return events


def test_reads_convert_the_version_and_default_from_the_schema(apiserver_process) -> None:  # type: ignore[no-untyped-def]
    server: ComponentProcess = apiserver_process(store="memory://")
    api = client.ApiClient(client.Configuration(host=server.url))
    ext, objects = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    definition = crd(schema=SCHEMA)
    name = definition["metadata"]["name"]
    ext.create_custom_resource_definition(definition)
    poll_until(lambda: _established(ext, name), what="the CRD to be Established")

    a = objects.create_namespaced_custom_object(GROUP, "v1", NS, PLURAL, widget("a"))
    listed = objects.list_namespaced_custom_object(GROUP, "v1beta1", NS, PLURAL)
    assert [i["apiVersion"] for i in listed["items"]] == ["example.com/v1beta1"]
    b = objects.create_namespaced_custom_object(GROUP, "v1", NS, PLURAL, widget("b"))
    assert b["apiVersion"] == "example.com/v1"

    got = objects.get_namespaced_custom_object(GROUP, "v1beta1", NS, PLURAL, "a")
    assert got["apiVersion"] == "example.com/v1beta1"
    since_list = _watched(
        objects, "v1beta1", "b", resource_version=listed["metadata"]["resourceVersion"]
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in since_list] == [("ADDED", "b")]
    assert since_list[0]["raw_object"]["apiVersion"] == "example.com/v1beta1"
    current = _watched(objects, "v1beta1", "a", "b")
    assert {e["raw_object"]["apiVersion"] for e in current} == {"example.com/v1beta1"}
    kept = {**widget("kept"), "metadata": {"name": "kept", "finalizers": ["example.com/keep"]}}
    objects.create_namespaced_custom_object(GROUP, "v1", NS, PLURAL, kept)
    deleting = objects.delete_namespaced_custom_object(GROUP, "v1beta1", NS, PLURAL, "kept")
    assert deleting["apiVersion"] == "example.com/v1beta1"
    assert deleting["metadata"]["deletionTimestamp"]
    objects.patch_namespaced_custom_object(
        GROUP, "v1", NS, PLURAL, "kept", {"metadata": {"finalizers": None}}
    )

    # a default added to the schema reaches objects stored before it, on every read path
    stored = ext.read_custom_resource_definition(name)
    body = api.sanitize_for_serialization(stored)
    for version in body["spec"]["versions"]:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        spec["properties"]["tier"] = {"type": "string", "default": "gold"}
    ext.replace_custom_resource_definition(name, copy.deepcopy(body))

    def defaulted() -> Obj | None:
        read = objects.get_namespaced_custom_object(GROUP, "v1", NS, PLURAL, "a")
        return read if read["spec"].get("tier") == "gold" else None

    read = poll_until(defaulted, what="GET to show the new default")
    assert read["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]
    for version in ("v1", "v1beta1"):
        listed = objects.list_namespaced_custom_object(GROUP, version, NS, PLURAL)
        assert [i["spec"] for i in listed["items"]] == [{"size": "small", "tier": "gold"}] * 2
        assert {i["apiVersion"] for i in listed["items"]} == {f"example.com/{version}"}
    replayed = _watched(objects, "v1beta1", "b", resource_version=a["metadata"]["resourceVersion"])
    assert [e["raw_object"]["spec"] for e in replayed] == [{"size": "small", "tier": "gold"}]
    assert replayed[0]["raw_object"]["apiVersion"] == "example.com/v1beta1"
    current = _watched(objects, "v1beta1", "a", "b")
    assert [e["raw_object"]["spec"]["tier"] for e in current] == ["gold", "gold"]
