"""``Managers`` writes an entry it did not change exactly as FieldsV1 would encode its field set:
the tree it read is reused only when it is already in that form (keys sorted, ``"."`` only
beside other keys, every value an object); any other tree is re-encoded, as before; an entry
that loses fields, or one whose manager writes again, is encoded from its fields."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api.managed_fields import UPDATE, Managers, fields_v1, from_fields_v1, shape_for_builtin

Obj = dict[str, Any]

SPEC_FIELDS: Obj = {
    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
    "f:spec": {
        "f:containers": {
            'k:{"name":"main"}': {".": {}, "f:image": {}, "f:name": {}},
        },
        "f:restartPolicy": {},
    },
}


def entry(manager: str, fields: Any, *, subresource: str = "") -> Obj:
    item: Obj = {
        "manager": manager,
        "operation": UPDATE,
        "apiVersion": "v1",
        "time": "2026-01-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        item["subresource"] = subresource
    return item


def pod(status: Obj) -> Obj:
    return {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}], "restartPolicy": "Always"},
        "status": status,
    }


def status_update(managed: list[Obj], old: Obj, new: Obj) -> list[Obj]:
    managers = Managers.decode(managed)
    managers.update(
        shape_for_builtin("Pod"),
        {"status": old["status"]},
        {"status": new["status"]},
        key=("kubelet", UPDATE, "status"),
        api_version="v1",
        now="2026-01-02T00:00:00Z",
    )
    return managers.encode()


def test_an_entry_a_status_write_leaves_alone_is_the_tree_it_read() -> None:
    managed = [entry("kube-controller-manager", SPEC_FIELDS)]
    out = status_update(managed, pod({}), pod({"phase": "Running"}))
    assert out[0]["fieldsV1"] is SPEC_FIELDS
    assert out[1]["fieldsV1"] == {"f:status": {"f:phase": {}}}


@pytest.mark.parametrize(
    "tree",
    [
        {"f:spec": {"f:restartPolicy": {}}, "f:metadata": {"f:labels": {"f:app": {}}}},
        {"f:metadata": {"f:labels": {".": {}}}},
        {"f:metadata": {"f:labels": {"f:app": {}, ".": {}}}},
        {"f:metadata": {"f:labels": {".": {"x": 1}, "f:app": {}}}},
        {"f:metadata": {"f:labels": {"f:app": None}}},
        {".": {}, "f:metadata": {}},
    ],
    ids=["unsorted", "dot-alone", "dot-last", "dot-not-empty", "leaf-not-object", "dot-at-root"],
)
def test_a_tree_in_another_form_is_encoded_again(tree: Obj) -> None:
    managed = [entry("someone", json.loads(json.dumps(tree)))]
    out = status_update(managed, pod({}), pod({"phase": "Running"}))
    expected = fields_v1(from_fields_v1(tree))
    assert json.dumps(out[0]["fieldsV1"]) == json.dumps(expected)


def test_an_entry_that_loses_fields_is_encoded_from_what_it_keeps() -> None:
    other = {"f:status": {"f:message": {}, "f:phase": {}}}
    managed = [entry("kube-controller-manager", SPEC_FIELDS), entry("old", other)]
    out = status_update(
        managed, pod({"phase": "Pending", "message": "x"}), pod({"phase": "Running"})
    )
    assert [e["manager"] for e in out] == ["kube-controller-manager", "kubelet"]
    assert out[1]["fieldsV1"] == {"f:status": {"f:phase": {}}}


def test_a_manager_writing_the_same_fields_again_keeps_its_tree_with_a_new_time() -> None:
    status_fields = {"f:status": {"f:phase": {}}}
    managed = [
        entry("kube-controller-manager", SPEC_FIELDS),
        entry("kubelet", status_fields, subresource="status"),
    ]
    out = status_update(managed, pod({"phase": "Pending"}), pod({"phase": "Running"}))
    assert out[1]["fieldsV1"] is status_fields
    assert out[1]["time"] == "2026-01-02T00:00:00Z"


def test_fields_v1_is_built_with_sorted_keys_and_dots_first_whatever_the_order_given() -> None:
    paths = [
        ("f:spec", "f:containers", 'k:{"name":"main"}', "f:name"),
        ("f:metadata", "f:labels", "f:app"),
        ("f:spec", "f:containers", 'k:{"name":"main"}'),
        ("f:metadata", "f:labels"),
        ("f:spec", "f:containers", 'k:{"name":"main"}', "f:image"),
        ("f:spec", "f:restartPolicy"),
    ]
    for given in (paths, paths[::-1]):
        assert json.dumps(fields_v1(given)) == json.dumps(SPEC_FIELDS)
    assert fields_v1([]) == {}
    assert fields_v1([("f:status",)]) == {"f:status": {}}
