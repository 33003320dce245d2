"""JSON merge patch (RFC 7386) — the RFC's appendix examples and what ``kubectl label`` sends."""

from __future__ import annotations

import copy

import pytest

from api.patches import apply_merge_patch

# RFC 7386, Appendix A: (original, patch, result)
RFC_7386_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "expected"), RFC_7386_EXAMPLES)
def test_rfc7386_appendix_examples(original: object, patch: object, expected: object) -> None:
    assert apply_merge_patch(original, patch) == expected  # type: ignore[arg-type]


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node1", "labels": {"kubernetes.io/hostname": "node1"}},
    "status": {"capacity": {"cpu": "2"}},
}


def test_label_add_overwrite_remove_as_kubectl_label_sends_them() -> None:
    added = apply_merge_patch(NODE, {"metadata": {"labels": {"zz": "cxk"}}})
    assert added["metadata"]["labels"] == {"kubernetes.io/hostname": "node1", "zz": "cxk"}
    overwritten = apply_merge_patch(added, {"metadata": {"labels": {"zz": "cxk2"}}})
    assert overwritten["metadata"]["labels"]["zz"] == "cxk2"
    removed = apply_merge_patch(overwritten, {"metadata": {"labels": {"zz": None}}})
    assert removed["metadata"]["labels"] == {"kubernetes.io/hostname": "node1"}
    assert removed == NODE


def test_empty_patch_changes_nothing() -> None:
    assert apply_merge_patch(NODE, {}) == NODE


def test_scale_patch_sets_replicas() -> None:
    rc = {"kind": "ReplicationController", "spec": {"replicas": 1, "selector": {"app": "web"}}}
    assert apply_merge_patch(rc, {"spec": {"replicas": 3}})["spec"] == {
        "replicas": 3,
        "selector": {"app": "web"},
    }


def test_arrays_in_the_patch_are_taken_verbatim() -> None:
    result = apply_merge_patch({"a": [1]}, {"a": [{"b": None}, None]})
    assert result == {"a": [{"b": None}, None]}


def test_inputs_are_untouched_and_result_shares_nothing() -> None:
    target = copy.deepcopy(NODE)
    patch = {"metadata": {"labels": {"zz": "cxk"}}, "spec": {"taints": [{"key": "k"}]}}
    before_target, before_patch = copy.deepcopy(target), copy.deepcopy(patch)
    result = apply_merge_patch(target, patch)
    assert target == before_target and patch == before_patch
    result["status"]["capacity"]["cpu"] = "64"
    result["spec"]["taints"][0]["key"] = "changed"
    assert target == before_target and patch == before_patch
