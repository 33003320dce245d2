"""Each filter plugin, table-driven: which pod/node pairs it lets through, and its exact words."""

from __future__ import annotations

from typing import Any

import pytest

from services.scheduler.framework import Code, CycleState
from services.scheduler.nodeinfo import NodeInfo, PodInfo
from services.scheduler.plugins.node_affinity import NodeAffinity
from services.scheduler.plugins.node_name import NodeName
from services.scheduler.plugins.node_ready import NodeReady
from services.scheduler.plugins.node_unschedulable import NodeUnschedulable
from services.scheduler.plugins.resources_fit import NodeResourcesFit
from services.scheduler.plugins.taint_toleration import TaintToleration
from tests.factories import node_info, pod_info


def run_filter(plugin: Any, p: PodInfo, n: NodeInfo) -> tuple[Code, tuple[str, ...]]:
    state = CycleState()
    pre = getattr(plugin, "pre_filter", None)
    if pre is not None:
        status = pre(state, p)
        if status is not None and status.code == Code.SKIP:
            return Code.SUCCESS, ()
        assert status is None
    status = plugin.filter(state, p, n)
    return (Code.SUCCESS, ()) if status is None else (status.code, status.reasons)


OK = (Code.SUCCESS, ())
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    req: dict[str, Any] = {"key": key, "operator": op}
    if values:
        req["values"] = list(values)
    return {"matchExpressions": [req]}


AFFINITY_REASON = (UNRESOLVABLE, ("node(s) didn't match Pod's node affinity/selector",))

NODE_AFFINITY_CASES = [
    ("no constraints", pod_info(), node_info(), OK),
    (
        "selector matches",
        pod_info(node_selector={"zz": "cxk"}),
        node_info(labels={"zz": "cxk"}),
        OK,
    ),
    (
        "selector value differs",
        pod_info(node_selector={"zz": "cxk"}),
        node_info(labels={"zz": "x"}),
        AFFINITY_REASON,
    ),
    ("selector label missing", pod_info(node_selector={"zz": "cxk"}), node_info(), AFFINITY_REASON),
    (
        "In matches",
        pod_info(affinity=affinity(expr("disk", "In", "ssd", "nvme"))),
        node_info(labels={"disk": "nvme"}),
        OK,
    ),
    (
        "In misses",
        pod_info(affinity=affinity(expr("disk", "In", "ssd"))),
        node_info(labels={"disk": "hdd"}),
        AFFINITY_REASON,
    ),
    (
        "NotIn absent label",
        pod_info(affinity=affinity(expr("disk", "NotIn", "hdd"))),
        node_info(),
        OK,
    ),
    (
        "NotIn present",
        pod_info(affinity=affinity(expr("disk", "NotIn", "hdd"))),
        node_info(labels={"disk": "hdd"}),
        AFFINITY_REASON,
    ),
    (
        "Exists",
        pod_info(affinity=affinity(expr("gpu", "Exists"))),
        node_info(labels={"gpu": ""}),
        OK,
    ),
    (
        "Exists missing",
        pod_info(affinity=affinity(expr("gpu", "Exists"))),
        node_info(),
        AFFINITY_REASON,
    ),
    ("DoesNotExist", pod_info(affinity=affinity(expr("gpu", "DoesNotExist"))), node_info(), OK),
    (
        "DoesNotExist present",
        pod_info(affinity=affinity(expr("gpu", "DoesNotExist"))),
        node_info(labels={"gpu": "1"}),
        AFFINITY_REASON,
    ),
    (
        "Gt",
        pod_info(affinity=affinity(expr("cores", "Gt", "4"))),
        node_info(labels={"cores": "8"}),
        OK,
    ),
    (
        "Gt equal",
        pod_info(affinity=affinity(expr("cores", "Gt", "8"))),
        node_info(labels={"cores": "8"}),
        AFFINITY_REASON,
    ),
    (
        "Lt",
        pod_info(affinity=affinity(expr("cores", "Lt", "4"))),
        node_info(labels={"cores": "2"}),
        OK,
    ),
    (
        "Lt not a number",
        pod_info(affinity=affinity(expr("cores", "Lt", "4"))),
        node_info(labels={"cores": "two"}),
        AFFINITY_REASON,
    ),
    (
        "terms are ORed",
        pod_info(affinity=affinity(expr("a", "Exists"), expr("b", "Exists"))),
        node_info(labels={"b": "1"}),
        OK,
    ),
    ("empty term matches nothing", pod_info(affinity=affinity({})), node_info(), AFFINITY_REASON),
    (
        "matchFields metadata.name",
        pod_info(
            affinity=affinity(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
            )
        ),
        node_info("n2"),
        OK,
    ),
    (
        "selector and affinity both required",
        pod_info(node_selector={"zz": "cxk"}, affinity=affinity(expr("disk", "In", "ssd"))),
        node_info(labels={"zz": "cxk", "disk": "hdd"}),
        AFFINITY_REASON,
    ),
]


@pytest.mark.parametrize(
    ("case", "p", "n", "want"), NODE_AFFINITY_CASES, ids=[c[0] for c in NODE_AFFINITY_CASES]
)
def test_node_affinity_filter(
    case: str, p: PodInfo, n: NodeInfo, want: tuple[Code, tuple[str, ...]]
) -> None:
    assert run_filter(NodeAffinity(), p, n) == want


RESOURCE_CASES = [
    ("fits", pod_info(cpu="1", memory="1Gi"), node_info(cpu="2", memory="2Gi"), OK),
    ("no requests fit anywhere", pod_info(), node_info(cpu="0", memory="0"), OK),
    ("cpu exactly full", pod_info(cpu="2"), node_info(cpu="2"), OK),
    (
        "cpu short",
        pod_info(cpu="2500m"),
        node_info(cpu="2"),
        (Code.UNSCHEDULABLE, ("Insufficient cpu",)),
    ),
    (
        "cpu short after other pods",
        pod_info(cpu="1"),
        node_info(
            cpu="4", placed=tuple(pod_info(f"o{i}", cpu="1", node_name="node1") for i in range(4))
        ),
        (Code.UNSCHEDULABLE, ("Insufficient cpu",)),
    ),
    (
        "cpu and memory short, both reported",
        pod_info(cpu="8", memory="16Gi"),
        node_info(cpu="4", memory="8Gi"),
        (Code.UNSCHEDULABLE, ("Insufficient cpu", "Insufficient memory")),
    ),
    ("room for one more pod", pod_info(), node_info(pods="1"), OK),
    (
        "init container max",
        pod_info(cpu="1", init_cpu="3"),
        node_info(cpu="2"),
        (Code.UNSCHEDULABLE, ("Insufficient cpu",)),
    ),
    ("millicores", pod_info(cpu="250m"), node_info(cpu="0.25"), OK),
]


@pytest.mark.parametrize(
    ("case", "p", "n", "want"), RESOURCE_CASES, ids=[c[0] for c in RESOURCE_CASES]
)
def test_resources_fit_filter(
    case: str, p: PodInfo, n: NodeInfo, want: tuple[Code, tuple[str, ...]]
) -> None:
    assert run_filter(NodeResourcesFit(), p, n) == want


def test_resources_fit_counts_pods_against_allowed_pods() -> None:
    full = node_info(pods="1")
    full.add_pod(pod_info("already", node_name="node1"))
    assert run_filter(NodeResourcesFit(), pod_info(), full) == (
        Code.UNSCHEDULABLE,
        ("Too many pods",),
    )


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def tol(**kw: str) -> dict[str, str]:
    return kw


TAINT_CASES = [
    ("no taints", pod_info(), node_info(), OK),
    (
        "NoSchedule untolerated",
        pod_info(),
        node_info(taints=[taint("dedicated", "gpu")]),
        (UNRESOLVABLE, ("node(s) had untolerated taint {dedicated: gpu}",)),
    ),
    (
        "empty value printed as in Kubernetes",
        pod_info(),
        node_info(taints=[taint("node-role.kubernetes.io/control-plane")]),
        (
            UNRESOLVABLE,
            ("node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }",),
        ),
    ),
    (
        "NoExecute untolerated",
        pod_info(),
        node_info(taints=[taint("k", "v", "NoExecute")]),
        (UNRESOLVABLE, ("node(s) had untolerated taint {k: v}",)),
    ),
    (
        "PreferNoSchedule does not filter",
        pod_info(),
        node_info(taints=[taint("k", "v", "PreferNoSchedule")]),
        OK,
    ),
    (
        "Equal toleration",
        pod_info(
            tolerations=[tol(key="dedicated", operator="Equal", value="gpu", effect="NoSchedule")]
        ),
        node_info(taints=[taint("dedicated", "gpu")]),
        OK,
    ),
    (
        "Equal is the default operator",
        pod_info(tolerations=[tol(key="dedicated", value="gpu")]),
        node_info(taints=[taint("dedicated", "gpu")]),
        OK,
    ),
    (
        "value differs",
        pod_info(tolerations=[tol(key="dedicated", value="cpu")]),
        node_info(taints=[taint("dedicated", "gpu")]),
        (UNRESOLVABLE, ("node(s) had untolerated taint {dedicated: gpu}",)),
    ),
    (
        "Exists with key",
        pod_info(tolerations=[tol(key="dedicated", operator="Exists")]),
        node_info(taints=[taint("dedicated", "gpu")]),
        OK,
    ),
    (
        "Exists without key tolerates all",
        pod_info(tolerations=[tol(operator="Exists")]),
        node_info(taints=[taint("a"), taint("b", "c", "NoExecute")]),
        OK,
    ),
    (
        "effect must match",
        pod_info(tolerations=[tol(key="k", operator="Exists", effect="NoExecute")]),
        node_info(taints=[taint("k")]),
        (UNRESOLVABLE, ("node(s) had untolerated taint {k: }",)),
    ),
    (
        "first untolerated taint is reported",
        pod_info(tolerations=[tol(key="a", operator="Exists")]),
        node_info(taints=[taint("a"), taint("b", "2")]),
        (UNRESOLVABLE, ("node(s) had untolerated taint {b: 2}",)),
    ),
]


@pytest.mark.parametrize(("case", "p", "n", "want"), TAINT_CASES, ids=[c[0] for c in TAINT_CASES])
def test_taint_toleration_filter(
    case: str, p: PodInfo, n: NodeInfo, want: tuple[Code, tuple[str, ...]]
) -> None:
    assert run_filter(TaintToleration(), p, n) == want


UNSCHEDULABLE = (UNRESOLVABLE, ("node(s) were unschedulable",))
NOT_READY = (UNRESOLVABLE, ("node(s) were not ready",))

NODE_STATE_CASES = [
    (NodeUnschedulable(), "schedulable", pod_info(), node_info(), OK),
    (NodeUnschedulable(), "cordoned", pod_info(), node_info(unschedulable=True), UNSCHEDULABLE),
    (
        NodeUnschedulable(),
        "cordoned but tolerated",
        pod_info(
            tolerations=[
                tol(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")
            ]
        ),
        node_info(unschedulable=True),
        OK,
    ),
    (NodeReady(), "ready", pod_info(), node_info(), OK),
    (NodeReady(), "not ready", pod_info(), node_info(ready=False), NOT_READY),
    (
        NodeReady(),
        "not ready but tolerated",
        pod_info(tolerations=[tol(key="node.kubernetes.io/not-ready", operator="Exists")]),
        node_info(ready=False),
        OK,
    ),
    (NodeName(), "no nodeName", pod_info(), node_info(), OK),
    (NodeName(), "nodeName matches", pod_info(node_name="node1"), node_info("node1"), OK),
    (
        NodeName(),
        "nodeName elsewhere",
        pod_info(node_name="node2"),
        node_info("node1"),
        (UNRESOLVABLE, ("node(s) didn't match the requested node name",)),
    ),
]


@pytest.mark.parametrize(
    ("plugin", "case", "p", "n", "want"),
    NODE_STATE_CASES,
    ids=[f"{c[0].name}-{c[1]}" for c in NODE_STATE_CASES],
)
def test_node_state_filters(
    plugin: Any, case: str, p: PodInfo, n: NodeInfo, want: tuple[Code, tuple[str, ...]]
) -> None:
    assert run_filter(plugin, p, n) == want


def test_node_without_ready_condition_is_not_ready() -> None:
    n = NodeInfo("bare")
    n.set_node({"metadata": {"name": "bare"}, "status": {"allocatable": {"cpu": "1"}}})
    assert run_filter(NodeReady(), pod_info(), n) == NOT_READY


@pytest.mark.parametrize(
    ("case", "p", "n", "want"), RESOURCE_CASES, ids=[c[0] for c in RESOURCE_CASES]
)
def test_resources_fit_batch_form_answers_as_the_single_form(
    case: str, p: PodInfo, n: NodeInfo, want: tuple[Code, tuple[str, ...]]
) -> None:
    plugin = NodeResourcesFit()
    (batch,) = list(plugin.filter_each(CycleState(), p, [n]))
    assert batch == plugin.filter(CycleState(), p, n)
