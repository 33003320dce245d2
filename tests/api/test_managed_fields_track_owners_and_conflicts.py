"""``api.managed_fields`` alone: the field set of a configuration (structs, granular and atomic
maps, ``set`` and ``map`` lists with their keys and key defaults), the FieldsV1 round trip,
paths printed as Kubernetes prints them, merge by the schema's list semantics, conflicts between
managers (refused unless forced, then taken over), and removal of the fields an applier drops."""

from __future__ import annotations

from typing import Any

import pytest

from api.managed_fields import (
    APPLY,
    UPDATE,
    ApplyConflicts,
    Managers,
    compare,
    field_set,
    fields_v1,
    from_fields_v1,
    merge,
    path_string,
    shape_for_builtin,
    shape_from_schema,
)

Obj = dict[str, Any]

SCHEMA: Obj = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer"},
                "tags": {
                    "type": "array",
                    "x-kubernetes-list-type": "set",
                    "items": {"type": "string"},
                },
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
                "settings": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                },
                "selector": {
                    "type": "object",
                    "x-kubernetes-map-type": "atomic",
                    "additionalProperties": {"type": "string"},
                },
            },
        }
    },
}
SHAPE = shape_from_schema(SCHEMA)

APPLIER = ("kubectl", APPLY, "")
OTHER = ("hpa", APPLY, "")
UPDATER = ("controller", UPDATE, "")
NOW = "2026-12-01T00:00:00Z"


def _config(**spec: Any) -> Obj:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "spec": spec}


def test_field_set_of_a_configuration_follows_the_schema() -> None:
    config = _config(
        replicas=2,
        tags=["a", "b"],
        args=["x", "y"],
        ports=[{"port": 80, "name": "http"}],
        settings={"k": "v"},
        selector={"app": "w"},
    )
    assert field_set(SHAPE, config) == {
        ("f:apiVersion",),
        ("f:kind",),
        ("f:spec", "f:replicas"),
        ("f:spec", "f:tags", 'v:"a"'),
        ("f:spec", "f:tags", 'v:"b"'),
        ("f:spec", "f:args"),
        ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}'),
        ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}', "f:port"),
        ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}', "f:name"),
        ("f:spec", "f:settings", "f:k"),
        ("f:spec", "f:selector"),
    }


def test_builtin_shape_keys_container_ports_by_port_and_protocol() -> None:
    pod = {"spec": {"containers": [{"name": "app", "ports": [{"containerPort": 80}]}]}}
    paths = field_set(shape_for_builtin("Pod"), pod)
    port = (
        "f:spec",
        "f:containers",
        'k:{"name":"app"}',
        "f:ports",
        'k:{"containerPort":80,"protocol":"TCP"}',
    )
    assert port in paths
    assert (
        path_string(port) == '.spec.containers[name="app"].ports[containerPort=80,protocol="TCP"]'
    )


def test_fields_v1_round_trips_and_marks_owned_parents() -> None:
    paths = field_set(SHAPE, _config(ports=[{"port": 80, "name": "http"}], tags=["a"]))
    tree = fields_v1(paths)
    assert tree["f:spec"]["f:ports"] == {
        'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:name": {}, "f:port": {}}
    }
    assert tree["f:spec"]["f:tags"] == {'v:"a"': {}}
    assert from_fields_v1(tree) == paths


def test_path_string_prints_every_element_kind() -> None:
    assert path_string(("f:spec", "f:tags", 'v:"a"')) == '.spec.tags[="a"]'
    assert path_string(("f:spec", "f:args", "i:2")) == ".spec.args[2]"


def test_merge_follows_list_and_map_semantics() -> None:
    live = _config(
        tags=["a"],
        args=["x"],
        ports=[{"port": 80, "name": "http"}],
        selector={"app": "w", "tier": "web"},
    )
    config = _config(
        tags=["b"], args=["y"], ports=[{"port": 80, "name": "web"}], selector={"app": "v"}
    )
    merged = merge(SHAPE, live, config)
    assert merged["spec"] == {
        "tags": ["a", "b"],
        "args": ["y"],
        "ports": [{"port": 80, "name": "web"}],
        "selector": {"app": "v"},
    }


def test_compare_names_added_modified_and_removed_fields() -> None:
    compared = compare(SHAPE, _config(replicas=1, tags=["a"]), _config(replicas=2, tags=["b"]))
    assert compared.modified == {("f:spec", "f:replicas")}
    assert compared.added == {("f:spec", "f:tags", 'v:"b"')}
    assert compared.removed == {("f:spec", "f:tags", 'v:"a"')}


def test_second_applier_conflicts_then_takes_over_when_forced() -> None:
    managers = Managers()
    live = managers.apply(
        SHAPE, {}, _config(replicas=1), key=APPLIER, api_version="v1", now=NOW, force=False
    )
    with pytest.raises(ApplyConflicts) as refused:
        managers.apply(
            SHAPE, live, _config(replicas=5), key=OTHER, api_version="v1", now=NOW, force=False
        )
    assert str(refused.value) == (
        'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas'
    )

    live = managers.apply(
        SHAPE, live, _config(replicas=5), key=OTHER, api_version="v1", now=NOW, force=True
    )
    assert live["spec"]["replicas"] == 5
    assert ("f:spec", "f:replicas") in managers.entries[OTHER].fields
    assert ("f:spec", "f:replicas") not in managers.entries[APPLIER].fields


def test_same_value_from_two_appliers_is_shared_not_a_conflict() -> None:
    managers = Managers()
    live = managers.apply(
        SHAPE, {}, _config(replicas=1), key=APPLIER, api_version="v1", now=NOW, force=False
    )
    managers.apply(
        SHAPE, live, _config(replicas=1), key=OTHER, api_version="v1", now=NOW, force=False
    )
    replicas = ("f:spec", "f:replicas")
    assert replicas in managers.entries[APPLIER].fields
    assert replicas in managers.entries[OTHER].fields


def test_conflict_with_an_updater_names_its_api_version() -> None:
    managers = Managers()
    managers.update(
        SHAPE,
        {},
        _config(replicas=1, tags=["a"]),
        key=UPDATER,
        api_version="example.com/v1",
        now=NOW,
    )
    with pytest.raises(ApplyConflicts) as refused:
        managers.apply(
            SHAPE,
            _config(replicas=1, tags=["a"]),
            _config(replicas=3, tags=["a"]),
            key=APPLIER,
            api_version="v1",
            now=NOW,
            force=False,
        )
    assert str(refused.value) == (
        'Apply failed with 1 conflict: conflict with "controller" using example.com/v1: '
        ".spec.replicas"
    )


def test_fields_an_applier_drops_are_removed_unless_another_manager_owns_them() -> None:
    managers = Managers()
    first = _config(replicas=1, tags=["a", "b"], settings={"k": "v", "j": "w"})
    live = managers.apply(SHAPE, {}, first, key=APPLIER, api_version="v1", now=NOW, force=False)
    live = managers.apply(
        SHAPE, live, _config(settings={"j": "w"}), key=OTHER, api_version="v1", now=NOW,
        force=False,
    )  # fmt: skip

    live = managers.apply(
        SHAPE, live, _config(tags=["a"]), key=APPLIER, api_version="v1", now=NOW, force=False
    )
    assert live["spec"] == {"tags": ["a"], "settings": {"j": "w"}}
    assert managers.entries[APPLIER].fields == {
        ("f:apiVersion",),
        ("f:kind",),
        ("f:spec", "f:tags", 'v:"a"'),
    }


def test_managers_encode_and_decode_managed_fields() -> None:
    managers = Managers()
    managers.update(
        SHAPE, {}, _config(replicas=1), key=UPDATER, api_version="example.com/v1", now=NOW
    )
    managers.apply(
        SHAPE,
        _config(replicas=1),
        _config(tags=["a"]),
        key=APPLIER,
        api_version="example.com/v1",
        now=NOW,
        force=False,
    )
    encoded = managers.encode()
    assert [(m["manager"], m["operation"]) for m in encoded] == [
        ("kubectl", "Apply"),
        ("controller", "Update"),
    ]
    assert encoded[0]["fieldsType"] == "FieldsV1"
    decoded = Managers.decode(encoded)
    assert decoded.entries.keys() == managers.entries.keys()
    for key, entry in managers.entries.items():
        assert decoded.entries[key].fields == entry.fields
