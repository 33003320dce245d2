"""Node affinity: requirement operators, ORed terms, ANDed expressions, matchFields."""

from __future__ import annotations

from typing import Any

import pytest

from api.core import NodeSelectorRequirement, NodeSelectorTerm
from api.selectors import node_selector_requirement_matches, node_selector_terms_match

NODE_LABELS = {"disk": "ssd", "zone": "a", "cores": "8", "kubernetes.io/hostname": "node1"}


@pytest.mark.parametrize(
    ("req", "matches"),
    [
        ({"key": "disk", "operator": "In", "values": ["ssd", "nvme"]}, True),
        ({"key": "disk", "operator": "In", "values": ["hdd"]}, False),
        ({"key": "missing", "operator": "In", "values": ["x"]}, False),
        ({"key": "disk", "operator": "NotIn", "values": ["hdd"]}, True),
        ({"key": "missing", "operator": "NotIn", "values": ["x"]}, True),
        ({"key": "disk", "operator": "Exists"}, True),
        ({"key": "missing", "operator": "Exists"}, False),
        ({"key": "missing", "operator": "DoesNotExist"}, True),
        ({"key": "cores", "operator": "Gt", "values": ["4"]}, True),
        ({"key": "cores", "operator": "Gt", "values": ["8"]}, False),
        ({"key": "cores", "operator": "Lt", "values": ["16"]}, True),
        ({"key": "disk", "operator": "Gt", "values": ["1"]}, False),
        ({"key": "cores", "operator": "Gt", "values": ["x"]}, False),
        ({"key": "cores", "operator": "Gt", "values": ["1", "2"]}, False),
        ({"key": "disk", "operator": "Bogus", "values": ["ssd"]}, False),
    ],
)
def test_requirement_operators(req: dict[str, Any], matches: bool) -> None:
    assert node_selector_requirement_matches(req, NODE_LABELS) is matches
    assert (
        node_selector_requirement_matches(NodeSelectorRequirement.model_validate(req), NODE_LABELS)
        is matches
    )


def test_terms_are_ored_and_expressions_anded() -> None:
    hdd_or_zone_a = [
        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["hdd"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
    ]
    assert node_selector_terms_match(hdd_or_zone_a, NODE_LABELS)
    ssd_and_zone_b = [
        {
            "matchExpressions": [
                {"key": "disk", "operator": "In", "values": ["ssd"]},
                {"key": "zone", "operator": "In", "values": ["b"]},
            ]
        }
    ]
    assert not node_selector_terms_match(ssd_and_zone_b, NODE_LABELS)


def test_empty_terms_match_nothing() -> None:
    assert not node_selector_terms_match([], NODE_LABELS)
    assert not node_selector_terms_match(None, NODE_LABELS)
    assert not node_selector_terms_match([{}], NODE_LABELS)


def test_match_fields_on_metadata_name() -> None:
    terms = [
        NodeSelectorTerm.model_validate(
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node1"]}]}
        )
    ]
    assert node_selector_terms_match(terms, NODE_LABELS, node_name="node1")
    assert not node_selector_terms_match(terms, NODE_LABELS, node_name="node2")
    not_in = [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node1"]}]}]
    assert node_selector_terms_match(not_in, NODE_LABELS, node_name="node2")
    other_field = [
        {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["node1"]}]}
    ]
    assert not node_selector_terms_match(other_field, NODE_LABELS, node_name="node1")
