"""``Managers.decode`` keeps the field set it read from each distinct FieldsV1 tree (the stored
entries are read again on every write of their object, and many objects share a tree), keyed by
the tree's content: a tree edited in place, one with the same fields in another key order, or
with another leaf value is read again, never answered from what an older tree gave; an entry
shared by two decoded objects loses fields in one of them only; the kept trees are bounded by
their total size."""

from __future__ import annotations

import json
from typing import Any

import orjson

from api import managed_fields
from api.managed_fields import UPDATE, Managers, fields_v1, shape_for_builtin

Obj = dict[str, Any]

KEY = ("kube-controller-manager", UPDATE, "")


def managed(tree: Obj) -> list[Obj]:
    return [
        {
            "manager": KEY[0],
            "operation": UPDATE,
            "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": tree,
        }
    ]


def test_a_tree_edited_in_place_is_read_again() -> None:
    tree: Obj = {"f:spec": {"f:replicas": {}}}
    assert Managers.decode(managed(tree)).entries[KEY].fields == {("f:spec", "f:replicas")}
    tree["f:spec"]["f:paused"] = {}
    assert Managers.decode(managed(tree)).entries[KEY].fields == {
        ("f:spec", "f:paused"),
        ("f:spec", "f:replicas"),
    }


def test_the_same_fields_in_another_form_are_encoded_again() -> None:
    sorted_tree = {"f:metadata": {"f:labels": {}}, "f:spec": {"f:replicas": {}}}
    unsorted_tree = {"f:spec": {"f:replicas": {}}, "f:metadata": {"f:labels": {}}}
    null_leaf = {"f:metadata": {"f:labels": None}, "f:spec": {"f:replicas": {}}}
    for tree in (sorted_tree, unsorted_tree, null_leaf, sorted_tree):
        out = Managers.decode(managed(tree)).encode()
        assert json.dumps(out[0]["fieldsV1"]) == json.dumps(sorted_tree)
        assert (out[0]["fieldsV1"] is tree) == (tree is sorted_tree)


def test_an_entry_two_objects_share_loses_fields_in_one_of_them_only() -> None:
    tree = {"f:spec": {"f:replicas": {}, "f:paused": {}}}
    first, second = Managers.decode(managed(tree)), Managers.decode(managed(tree))
    first.update(
        shape_for_builtin("Deployment"),
        {"spec": {"replicas": 1, "paused": False}},
        {"spec": {"replicas": 2, "paused": False}},
        key=("hpa", UPDATE, ""),
        api_version="apps/v1",
        now="2026-01-02T00:00:00Z",
    )
    assert first.entries[KEY].fields == {("f:spec", "f:paused")}
    assert second.entries[KEY].fields == {("f:spec", "f:paused"), ("f:spec", "f:replicas")}
    assert Managers.decode(managed(tree)).entries[KEY].fields == second.entries[KEY].fields


def test_the_trees_kept_are_bounded_by_their_size_the_least_recently_read_out_first() -> None:
    trees = managed_fields._DecodedTrees(max_bytes=2000, max_tree_bytes=500)
    shared = {"f:spec": {"f:replicas": {}}}
    for index in range(100):
        labels = {"f:metadata": {"f:labels": {f"f:l{index}": {}}}}
        assert trees.read(labels)[0] == {("f:metadata", "f:labels", f"f:l{index}")}
        assert trees.read(shared) == ({("f:spec", "f:replicas")}, True)
        assert trees.size <= trees.max_bytes
    assert orjson.dumps(shared) in trees._trees
    assert orjson.dumps({"f:metadata": {"f:labels": {"f:l0": {}}}}) not in trees._trees


def test_a_tree_past_the_size_kept_is_read_whole_each_time() -> None:
    trees = managed_fields._DecodedTrees(max_bytes=2000, max_tree_bytes=500)
    paths = {("f:data", f"f:key-{index:03}") for index in range(100)}
    big = fields_v1(paths)
    assert len(orjson.dumps(big)) > trees.max_tree_bytes
    assert trees.read(big) == (paths, True)
    assert trees.size == 0
