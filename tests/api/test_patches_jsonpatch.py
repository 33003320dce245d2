"""JSON patch (RFC 6902) — the RFC's appendix examples, and the statuses Kubernetes answers with."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from api.errors import BadRequest, Invalid, RequestEntityTooLarge
from api.patches import apply_json_patch
from api.patches.jsonpatch import MAX_OPERATIONS, REJECTED, JSONPatchError

# RFC 6902, Appendix A: the examples that succeed (document, patch, result).
RFC_6902_EXAMPLES: list[tuple[Any, list[dict[str, Any]], Any]] = [
    # A.1 adding an object member
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"}),
    # A.2 adding an array element
    (
        {"foo": ["bar", "baz"]},
        [{"op": "add", "path": "/foo/1", "value": "qux"}],
        {"foo": ["bar", "qux", "baz"]},
    ),
    # A.3 removing an object member
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    # A.4 removing an array element
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
    # A.5 replacing a value
    (
        {"baz": "qux", "foo": "bar"},
        [{"op": "replace", "path": "/baz", "value": "boo"}],
        {"baz": "boo", "foo": "bar"},
    ),
    # A.6 moving a value
    (
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
        {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
    ),
    # A.7 moving an array element
    (
        {"foo": ["all", "grass", "cows", "eat"]},
        [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
        {"foo": ["all", "cows", "eat", "grass"]},
    ),
    # A.8 testing a value: success
    (
        {"baz": "qux", "foo": ["a", 2, "c"]},
        [
            {"op": "test", "path": "/baz", "value": "qux"},
            {"op": "test", "path": "/foo/1", "value": 2},
        ],
        {"baz": "qux", "foo": ["a", 2, "c"]},
    ),
    # A.10 adding a nested member object
    (
        {"foo": "bar"},
        [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
        {"foo": "bar", "child": {"grandchild": {}}},
    ),
    # A.11 ignoring unrecognized elements
    (
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
        {"foo": "bar", "baz": "qux"},
    ),
    # A.14 ~ escape ordering
    (
        {"/": 9, "~1": 10},
        [{"op": "test", "path": "/~01", "value": 10}],
        {"/": 9, "~1": 10},
    ),
    # A.16 adding an array value
    (
        {"foo": ["bar"]},
        [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
        {"foo": ["bar", ["abc", "def"]]},
    ),
]


@pytest.mark.parametrize(("doc", "ops", "expected"), RFC_6902_EXAMPLES)
def test_rfc6902_appendix_examples(doc: Any, ops: list[dict[str, Any]], expected: Any) -> None:
    assert apply_json_patch(doc, ops) == expected


# RFC 6902 Appendix A examples that must fail, plus pointer/op errors; Kubernetes answers each
# of these with 422 Invalid and its generic message.
FAILING: list[tuple[str, Any, list[dict[str, Any]]]] = [
    (
        "A.9 test fails",
        {"baz": "qux", "foo": ["a", 2, "c"]},
        [{"op": "test", "path": "/baz", "value": "bar"}],
    ),
    (
        "A.12 add to a nonexistent target",
        {"foo": "bar"},
        [{"op": "add", "path": "/baz/bat", "value": "qux"}],
    ),
    (
        "A.15 comparing strings and numbers",
        {"/": 9, "~1": 10},
        [{"op": "test", "path": "/~01", "value": "10"}],
    ),
    ("test: true is not 1", {"a": 1}, [{"op": "test", "path": "/a", "value": True}]),
    ("unknown op", {"a": 1}, [{"op": "frobnicate", "path": "/a"}]),
    ("missing op", {"a": 1}, [{"path": "/a"}]),
    ("missing path", {"a": 1}, [{"op": "remove"}]),
    ("missing value", {"a": 1}, [{"op": "add", "path": "/b"}]),
    ("missing from", {"a": 1}, [{"op": "move", "path": "/b"}]),
    ("pointer without a leading slash", {"a": 1}, [{"op": "remove", "path": "a"}]),
    ("bad escape", {"a~2": 1}, [{"op": "remove", "path": "/a~2"}]),
    ("remove a missing member", {"a": 1}, [{"op": "remove", "path": "/b"}]),
    ("replace a missing member", {"a": 1}, [{"op": "replace", "path": "/b", "value": 2}]),
    ("index past the end", {"a": [1]}, [{"op": "add", "path": "/a/2", "value": 2}]),
    ("leading zero index", {"a": [1, 2]}, [{"op": "replace", "path": "/a/01", "value": 3}]),
    ("dash is not an element", {"a": [1]}, [{"op": "remove", "path": "/a/-"}]),
    ("move into own child", {"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}]),
    ("remove the whole document", {"a": 1}, [{"op": "remove", "path": ""}]),
]


@pytest.mark.parametrize(("doc", "ops"), [c[1:] for c in FAILING], ids=[c[0] for c in FAILING])
def test_failed_operations_answer_422_invalid_like_kubernetes(doc: Any, ops: Any) -> None:
    with pytest.raises(Invalid) as caught:
        apply_json_patch(doc, ops)
    status = caught.value.to_status()
    assert (status["code"], status["reason"], status["message"]) == (422, "Invalid", REJECTED)
    assert isinstance(caught.value.__cause__, JSONPatchError)


def test_failed_test_keeps_its_detail_for_the_logs() -> None:
    with pytest.raises(Invalid) as caught:
        apply_json_patch(
            {"metadata": {"name": "p"}}, [{"op": "test", "path": "/metadata/name", "value": "q"}]
        )
    assert "testing value /metadata/name failed" in str(caught.value.__cause__)


@pytest.mark.parametrize(
    "ops",
    [
        {"op": "add"},
        "[]",
        None,
        [1],
        [{"op": 1, "path": "/a"}],
        [{"op": "add", "path": ["a"], "value": 1}],
    ],
)
def test_a_document_that_is_not_a_list_of_operations_is_a_bad_request(ops: Any) -> None:
    with pytest.raises(BadRequest):
        apply_json_patch({"a": 1}, ops)


def test_too_many_operations_is_413() -> None:
    ops = [{"op": "test", "path": "/a", "value": 1}] * (MAX_OPERATIONS + 1)
    with pytest.raises(RequestEntityTooLarge):
        apply_json_patch({"a": 1}, ops)


def test_a_failing_operation_leaves_nothing_half_applied() -> None:
    doc = {"metadata": {"labels": {"a": "1"}}}
    with pytest.raises(Invalid):
        apply_json_patch(
            doc,
            [
                {"op": "add", "path": "/metadata/labels/b", "value": "2"},
                {"op": "test", "path": "/metadata/labels/a", "value": "nope"},
            ],
        )
    assert doc == {"metadata": {"labels": {"a": "1"}}}


def test_pointer_escapes_address_keys_with_slash_and_tilde() -> None:
    doc = {"metadata": {"labels": {"app.kubernetes.io/name": "x", "a~b": "y"}}}
    out = apply_json_patch(
        doc,
        [
            {"op": "replace", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "z"},
            {"op": "remove", "path": "/metadata/labels/a~0b"},
        ],
    )
    assert out["metadata"]["labels"] == {"app.kubernetes.io/name": "z"}


def test_negative_indices_count_from_the_end_as_in_the_apiserver() -> None:
    doc = {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    out = apply_json_patch(
        doc, [{"op": "replace", "path": "/spec/containers/-1/name", "value": "z"}]
    )
    assert [c["name"] for c in out["spec"]["containers"]] == ["a", "z"]


def test_copy_and_replace_of_the_root() -> None:
    doc = {"a": {"b": [1]}}
    copied = apply_json_patch(doc, [{"op": "copy", "from": "/a", "path": "/c"}])
    assert copied == {"a": {"b": [1]}, "c": {"b": [1]}}
    assert copied["a"] is not copied["c"]
    assert apply_json_patch(doc, [{"op": "replace", "path": "", "value": {"x": 1}}]) == {"x": 1}


def test_inputs_are_untouched_and_result_shares_nothing() -> None:
    doc = {"spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a"}]}}}}
    value = {"name": "b", "env": [{"name": "E"}]}
    ops = [{"op": "add", "path": "/spec/template/spec/containers/-", "value": value}]
    before_doc, before_ops = copy.deepcopy(doc), copy.deepcopy(ops)
    out = apply_json_patch(doc, ops)
    out["spec"]["template"]["spec"]["containers"][1]["env"][0]["name"] = "changed"
    out["spec"]["template"]["spec"]["containers"][0]["name"] = "changed"
    assert doc == before_doc and ops == before_ops
