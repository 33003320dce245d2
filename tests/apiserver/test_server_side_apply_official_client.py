"""Server-side apply through the official ``kubernetes`` client against a real apiserver process:
``patch_namespaced_config_map(..., field_manager=..., _content_type=apply-patch+yaml)`` creates
then updates, managedFields come back as ``V1ManagedFieldsEntry`` models, a missing fieldManager
is Kubernetes' 422, and a custom resource whose schema makes a list a map keyed by ``name`` is
applied by two managers who each own their own items."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubelite.testing import ComponentProcess
from kubelite.testing.waiting import poll_until
from tests import factories

APPLY = "application/apply-patch+yaml"
NS = "default"

GADGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                    },
                }
            },
        }
    },
}


async def test_official_client_applies_server_side(apiserver_process) -> None:  # type: ignore[no-untyped-def]
    server: ComponentProcess = await asyncio.to_thread(apiserver_process, store="memory://")
    await asyncio.to_thread(_config_map, server.url)
    await asyncio.to_thread(_custom_list_map, server.url)


def _config_map(url: str) -> None:
    v1 = client.CoreV1Api(client.ApiClient(client.Configuration(host=url)))
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ssa"},
        "data": {"a": "1"},
    }
    created = v1.patch_namespaced_config_map(
        "ssa", NS, body, field_manager="tool", _content_type=APPLY
    )
    assert created.data == {"a": "1"}
    [entry] = created.metadata.managed_fields
    assert isinstance(entry, client.V1ManagedFieldsEntry)
    assert (entry.manager, entry.operation, entry.fields_type) == ("tool", "Apply", "FieldsV1")
    assert entry.api_version == "v1" and entry.time is not None
    assert entry.fields_v1 == {"f:data": {"f:a": {}}}

    body["data"] = {"b": "2"}
    updated = v1.patch_namespaced_config_map(
        "ssa", NS, body, field_manager="tool", _content_type=APPLY
    )
    assert updated.data == {"b": "2"}

    with pytest.raises(ApiException) as missing:
        v1.patch_namespaced_config_map("ssa", NS, body, _content_type=APPLY)
    assert missing.value.status == 422
    assert json.loads(missing.value.body)["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
        "is required for apply patch"
    )

    with pytest.raises(ApiException) as conflict:
        v1.patch_namespaced_config_map(
            "ssa", NS, {**body, "data": {"b": "3"}}, field_manager="other", _content_type=APPLY
        )
    status = json.loads(conflict.value.body)
    assert conflict.value.status == 409
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "tool": .data.b'
    assert status["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "tool"', "field": ".data.b"}
    ]


def _custom_list_map(url: str) -> None:
    api_client = client.ApiClient(client.Configuration(host=url))
    ext = client.ApiextensionsV1Api(api_client)
    definition = factories.crd(
        "gadgets", kind="Gadget", short_names=("gd",), versions=("v1",), schema=GADGET_SCHEMA
    )
    ext.create_custom_resource_definition(definition)

    def established() -> bool:
        crd = ext.read_custom_resource_definition("gadgets.example.com")
        return any(
            c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
        )

    poll_until(established, what="the gadgets CRD is established")
    objects = client.CustomObjectsApi(api_client)

    def apply(manager: str, ports: list[dict[str, Any]]) -> dict[str, Any]:
        body = {
            "apiVersion": "example.com/v1",
            "kind": "Gadget",
            "metadata": {"name": "g"},
            "spec": {"ports": ports},
        }
        result: dict[str, Any] = objects.patch_namespaced_custom_object(
            "example.com",
            "v1",
            NS,
            "gadgets",
            "g",
            body,
            field_manager=manager,
            _content_type=APPLY,
        )
        return result

    apply("a", [{"name": "http", "port": 80}])
    both = apply("b", [{"name": "metrics", "port": 9090}])
    assert both["spec"]["ports"] == [
        {"name": "http", "port": 80},
        {"name": "metrics", "port": 9090},
    ]
    owners = {e["manager"]: e["fieldsV1"] for e in both["metadata"]["managedFields"]}
    assert owners["b"] == {
        "f:spec": {"f:ports": {'k:{"name":"metrics"}': {".": {}, "f:name": {}, "f:port": {}}}}
    }
    # a drops its item: only its own goes, b's stays
    left = apply("a", [])
    assert left["spec"]["ports"] == [{"name": "metrics", "port": 9090}]
    read = objects.get_namespaced_custom_object("example.com", "v1", NS, "gadgets", "g")
    assert read["spec"]["ports"] == [{"name": "metrics", "port": 9090}]
