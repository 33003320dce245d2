"""Score plugins, table-driven: the raw and normalised scores they give a set of nodes."""

from __future__ import annotations

from typing import Any

import pytest

from services.scheduler.framework import Code, CycleState
from services.scheduler.nodeinfo import NodeInfo, PodInfo
from services.scheduler.plugins.least_allocated import LeastAllocated
from services.scheduler.plugins.node_affinity import NodeAffinity
from services.scheduler.plugins.selector_spread import SelectorSpread
from services.scheduler.plugins.taint_toleration import TaintToleration
from tests.factories import node_info, pod_info


def run_score(plugin: Any, p: PodInfo, nodes: list[NodeInfo]) -> list[int] | None:
    """Normalised scores, or None when PreScore says the plugin has nothing to say."""
    state = CycleState()
    pre = getattr(plugin, "pre_score", None)
    if pre is not None:
        status = pre(state, p, nodes)
        if status is not None and status.code == Code.SKIP:
            return None
    scores = [plugin.score(state, p, n) for n in nodes]
    normalize = getattr(plugin, "normalize_score", None)
    if normalize is not None:
        normalize(state, p, scores)
    return scores


def preferred(weight: int, key: str, value: str) -> dict[str, Any]:
    return {
        "weight": weight,
        "preference": {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]},
    }


def with_preferences(*terms: dict[str, Any]) -> PodInfo:
    return pod_info(
        affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": list(terms)}}
    )


SCORE_CASES = [
    (
        "least allocated prefers the emptier node",
        LeastAllocated(),
        pod_info(cpu="1", memory="1Gi"),
        [node_info("a", cpu="2", memory="2Gi"), node_info("b", cpu="4", memory="4Gi")],
        [50, 75],
    ),
    (
        "least allocated counts pods already there",
        LeastAllocated(),
        pod_info(cpu="1", memory="1Gi"),
        [
            node_info(
                "a",
                cpu="4",
                memory="4Gi",
                placed=(pod_info("x", cpu="2", memory="2Gi", node_name="a"),),
            ),
            node_info("b", cpu="4", memory="4Gi"),
        ],
        [25, 75],
    ),
    (
        "request-less pods count at the defaults (100m, 200Mi)",
        LeastAllocated(),
        pod_info(),
        [node_info("a", cpu="1", memory="1000Mi"), node_info("b", cpu="2", memory="2000Mi")],
        [85, 92],
    ),
    (
        "least allocated: an overfull node scores 0",
        LeastAllocated(),
        pod_info(cpu="8"),
        [node_info("a", cpu="4")],
        [48],
    ),
    (
        "preferred affinity: weights summed, normalised to the best",
        NodeAffinity(),
        with_preferences(preferred(10, "disk", "ssd"), preferred(30, "zone", "a")),
        [
            node_info("a", labels={"disk": "ssd"}),
            node_info("b", labels={"disk": "ssd", "zone": "a"}),
            node_info("c"),
        ],
        [25, 100, 0],
    ),
    ("no preferred terms: skipped", NodeAffinity(), pod_info(), [node_info("a")], None),
    (
        "PreferNoSchedule taints: fewer is better",
        TaintToleration(),
        pod_info(),
        [
            node_info("a", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]),
            node_info("b"),
        ],
        [0, 100],
    ),
    (
        "tolerated PreferNoSchedule does not count",
        TaintToleration(),
        pod_info(tolerations=[{"key": "k", "operator": "Exists"}]),
        [
            node_info("a", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]),
            node_info("b"),
        ],
        [100, 100],
    ),
    (
        "no taints anywhere: skipped",
        TaintToleration(),
        pod_info(),
        [node_info("a"), node_info("b")],
        None,
    ),
    (
        "spread: fewer siblings is better",
        SelectorSpread(),
        pod_info("new", owner_uid="rs1"),
        [
            node_info(
                "a",
                placed=(
                    pod_info("s1", owner_uid="rs1", node_name="a"),
                    pod_info("s2", owner_uid="rs1", node_name="a"),
                ),
            ),
            node_info(
                "b",
                placed=(
                    pod_info("s3", owner_uid="rs1", node_name="b"),
                    pod_info("o", owner_uid="rs2", node_name="b"),
                ),
            ),
            node_info("c"),
        ],
        [0, 50, 100],
    ),
    (
        "spread: a pod without controller is skipped",
        SelectorSpread(),
        pod_info(),
        [node_info("a")],
        None,
    ),
]


@pytest.mark.parametrize(
    ("case", "plugin", "p", "nodes", "want"), SCORE_CASES, ids=[c[0] for c in SCORE_CASES]
)
def test_score_plugin(
    case: str, plugin: Any, p: PodInfo, nodes: list[NodeInfo], want: list[int] | None
) -> None:
    assert run_score(plugin, p, nodes) == want


def test_least_allocated_batch_form_answers_as_the_single_form() -> None:
    plugin = LeastAllocated()
    nodes = [
        node_info("a", cpu="2", memory="2Gi"),
        node_info(
            "b",
            cpu="4",
            memory="4Gi",
            placed=(pod_info("x", cpu="3", memory="1Gi", node_name="b"),),
        ),
        node_info("c", cpu="0", memory="0"),
        node_info("d", cpu="1", memory="1Gi"),
    ]
    for p in (pod_info(cpu="1", memory="1Gi"), pod_info(), pod_info(cpu="8")):
        state = CycleState()
        assert plugin.score_all(state, p, nodes) == [plugin.score(state, p, n) for n in nodes]
