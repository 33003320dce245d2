"""``created_fields_v1`` (a create's managedFields, built in one walk of the object) gives the
very tree the general path gives — ``fields_v1`` of what ``compare`` finds changed from
nothing — for built-in kinds and for a custom kind's schema: structs, granular and atomic maps,
``set`` and ``map`` lists (key defaults, repeated keys), empty and null values."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api.managed_fields import (
    Shape,
    compare,
    created_fields_v1,
    fields_v1,
    shape_for_builtin,
    shape_from_schema,
)
from tests import factories

Obj = dict[str, Any]

SCHEMA: Obj = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {}},
                "args": {"type": "array", "items": {"type": "string"}},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "port": {"type": "integer"},
                            "protocol": {"type": "string", "default": "TCP"},
                            "name": {"type": "string"},
                        },
                    },
                },
                "settings": {"type": "object", "additionalProperties": {"type": "object"}},
                "selector": {
                    "type": "object",
                    "x-kubernetes-map-type": "atomic",
                    "additionalProperties": {"type": "string"},
                },
            },
        }
    },
}


def _from_nothing(shape: Shape, value: Obj) -> Obj:
    return fields_v1(compare(shape, {}, value).changed)


def _tracked(obj: Obj) -> Obj:
    """What an Update's managers own of a new object: no apiVersion/kind, no server metadata."""
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    out["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in ("name", "namespace")}
    return out


BUILTIN: list[tuple[str, Obj]] = [
    ("Pod", factories.pod("p", labels={"app": "web", "tier": "1"}, node_name="n1")),
    ("Pod", factories.pod("p", factories.echo_server(), factories.sh("sleep 1", name="side"))),
    ("ReplicationController", factories.nginx_rc("web", replicas=3)),
    ("Deployment", factories.deployment("web", replicas=2)),
    ("Service", factories.service("svc", selector={"app": "web"}, ports=[{"port": 80}])),
    ("ConfigMap", {"metadata": {"name": "c", "annotations": {"a": ""}}, "data": {"k": "v"}}),
    ("ConfigMap", {"metadata": {"name": "c", "labels": {}}, "data": {}, "immutable": None}),
    ("Node", factories.node("n1")),
]


@pytest.mark.parametrize(
    ("kind", "obj"), BUILTIN, ids=[f"{k}-{i}" for i, (k, _) in enumerate(BUILTIN)]
)
def test_builtin_kinds_get_the_tree_of_an_update_from_nothing(kind: str, obj: Obj) -> None:
    shape = shape_for_builtin(kind)
    value = _tracked(obj)
    assert json.dumps(created_fields_v1(shape, value)) == json.dumps(_from_nothing(shape, value))


CUSTOM: list[Obj] = [
    {"spec": {"tags": ["b", "a", {"x": 1}], "args": ["x"], "selector": {"app": "w"}}},
    {"spec": {"ports": [{"port": 80, "name": "h"}, {"port": 80, "protocol": "UDP"}, {"port": 80}]}},
    {"spec": {"settings": {"one": {"deep": {"er": 1}}, "two": {}, "three": None}}},
    {"spec": {"ports": [], "tags": [], "settings": {}, "unknown": {"a": [1, {"b": None}]}}},
    {"metadata": {"labels": {"a": "1"}, "finalizers": ["f"]}, "spec": None},
    {},
]


@pytest.mark.parametrize("value", CUSTOM)
def test_a_custom_schema_gets_the_tree_of_an_update_from_nothing(value: Obj) -> None:
    shape = shape_from_schema(SCHEMA)
    assert json.dumps(created_fields_v1(shape, value)) == json.dumps(_from_nothing(shape, value))
