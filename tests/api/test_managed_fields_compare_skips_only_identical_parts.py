"""``compare`` does not walk what old and new share, and shares only what is identical as JSON:
``1 == 1.0 == True`` in Python, yet they name different items of a ``set`` or ``map`` list, so
such a write is still a change there; the same object with its keys in another order is not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api.managed_fields import compare, shape_for_builtin

Obj = dict[str, Any]

POD = shape_for_builtin("Pod")


def pod(*, finalizers: list[Any], port: Any, label: str = "web") -> Obj:
    return {
        "metadata": {"labels": {"app": label}, "finalizers": finalizers},
        "spec": {
            "containers": [
                {"name": "main", "image": "nginx", "ports": [{"containerPort": port}]},
            ],
        },
    }


@pytest.mark.parametrize(("old", "new"), [(1, True), (1, 1.0), (0, False)])
def test_equal_values_that_are_not_the_same_json_change_a_set_item(old: Any, new: Any) -> None:
    compared = compare(POD, pod(finalizers=[old], port=80), pod(finalizers=[new], port=80))
    assert compared.removed == {("f:metadata", "f:finalizers", f"v:{json.dumps(old)}")}
    assert compared.added == {("f:metadata", "f:finalizers", f"v:{json.dumps(new)}")}


def test_a_list_key_of_another_type_names_another_item() -> None:
    compared = compare(POD, pod(finalizers=[], port=80), pod(finalizers=[], port=80.0))
    container = ("f:spec", "f:containers", 'k:{"name":"main"}', "f:ports")
    assert (*container, 'k:{"containerPort":80,"protocol":"TCP"}') in compared.removed
    assert (*container, 'k:{"containerPort":80.0,"protocol":"TCP"}') in compared.added


def test_keys_in_another_order_are_no_change() -> None:
    old = pod(finalizers=["a"], port=80)
    new = {"spec": old["spec"], "metadata": dict(reversed(list(old["metadata"].items())))}
    assert compare(POD, old, new).same()


def test_an_update_that_leaves_the_spec_alone_changes_only_the_label() -> None:
    compared = compare(
        POD, pod(finalizers=["a"], port=80), pod(finalizers=["a"], port=80, label="db")
    )
    assert (compared.added, compared.modified, compared.removed) == (
        set(),
        {("f:metadata", "f:labels", "f:app")},
        set(),
    )
