"""The status manager decides whether to write by ``same_normalized(wanted, stored)``, a walk
that builds nothing; it must answer exactly what comparing the two normalised copies answers
(empty values dropped, as the server drops them), or a status would be written twice or never."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from services.kubelet.status_manager import normalize, same_normalized

_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from([0.0, 1.0, "", "a", "Running"]),
)
_trees = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    ),
    max_leaves=12,
)


@given(_trees, _trees)
@settings(max_examples=1000, deadline=None)
def test_same_normalized_is_equality_of_the_normalized_copies(a: Any, b: Any) -> None:
    assert same_normalized(a, b) == (normalize(a) == normalize(b))


@given(_trees)
@settings(max_examples=300, deadline=None)
def test_a_tree_is_the_same_as_its_normalized_copy(a: Any) -> None:
    assert same_normalized(a, normalize(a))
    assert same_normalized(normalize(a), a)


def test_empty_values_are_absent_values_but_not_in_lists() -> None:
    wanted = {
        "phase": "Running",
        "containerStatuses": [{"name": "c", "lastState": {}, "state": {"running": {}}}],
        "nominatedNodeName": None,
        "podIPs": [],
    }
    stored = {"phase": "Running", "containerStatuses": [{"name": "c"}]}
    assert same_normalized(wanted, stored)
    assert not same_normalized({"conditions": [{}]}, {"conditions": []})
    assert not same_normalized({"phase": "Running"}, {"phase": "Pending"})
    assert not same_normalized({"podIP": "10.0.0.1"}, {})
