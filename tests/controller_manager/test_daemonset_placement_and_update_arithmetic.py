"""The DaemonSet rules on their own: which nodes should run a daemon pod (and may keep one),
the pod built for a node, and one RollingUpdate step's deletions and surges."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.controller_manager.daemonset import FailedPodBackoff
from services.controller_manager.daemonset_placement import (
    daemon_pod,
    node_should_run,
    target_node,
)
from services.controller_manager.daemonset_update import budgets, plan
from tests import factories
from tests.controller_manager.harness import Obj, rt

DAEMONSETS = rt("apps", "DaemonSet")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def ds(**pod_spec: object) -> Obj:
    out = factories.daemon_set("agent")
    out["metadata"].update(namespace="default", uid="u", annotations={"deprecated.daemonset.template.generation": "2"})  # fmt: skip
    out["spec"]["template"]["spec"].update(pod_spec)
    return out


def taint(key: str, effect: str) -> Obj:
    return {"key": key, "effect": effect}


@pytest.mark.parametrize(
    ("node", "spec", "expected"),
    [
        (factories.node("n"), {}, (True, True)),
        (
            factories.node("n", labels={"disk": "hdd"}),
            {"nodeSelector": {"disk": "ssd"}},
            (False, False),
        ),
        (factories.node("n", taints=[taint("dedicated", "NoSchedule")]), {}, (False, True)),
        (factories.node("n", taints=[taint("dedicated", "NoExecute")]), {}, (False, False)),
        (
            factories.node("n", taints=[taint("node.kubernetes.io/unreachable", "NoExecute")]),
            {},
            (True, True),
        ),
        (
            factories.node("n", taints=[taint("node.kubernetes.io/not-ready", "NoExecute")]),
            {},
            (True, True),
        ),
        (
            factories.node("n", taints=[taint("node.kubernetes.io/unschedulable", "NoSchedule")]),
            {},
            (True, True),
        ),
        (
            factories.node(
                "n", taints=[taint("node.kubernetes.io/network-unavailable", "NoSchedule")]
            ),
            {},
            (False, True),
        ),
        (
            factories.node(
                "n", taints=[taint("node.kubernetes.io/network-unavailable", "NoSchedule")]
            ),
            {"hostNetwork": True},
            (True, True),
        ),
        (factories.node("n"), {"nodeName": "other"}, (False, False)),
        (
            factories.node("n", labels={"zone": "a"}),
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["b"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            (False, False),
        ),
    ],
)
def test_node_should_run(node: Obj, spec: dict[str, object], expected: tuple[bool, bool]) -> None:
    assert node_should_run(node, ds(**spec)) == expected


def test_daemon_pod_is_pinned_labelled_and_tolerant() -> None:
    zone = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}
    owner = ds(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": zone}})
    pod = daemon_pod(owner, DAEMONSETS, node="n1", hash_="abc")
    assert pod["metadata"]["generateName"] == "agent-"
    assert pod["metadata"]["labels"] == {"app": "agent", "controller-revision-hash": "abc", "pod-template-generation": "2"}  # fmt: skip
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}  # fmt: skip
    assert target_node(pod) == "n1"
    assert len(pod["spec"]["tolerations"]) == 6
    assert owner["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == zone  # fmt: skip


def pod(name: str, *, node: str, hash_: str, ready: bool = True) -> Obj:
    return {
        "metadata": {"name": name, "labels": {"controller-revision-hash": hash_}},
        "spec": {"nodeName": node},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def rolling(**rolling_update: object) -> Obj:
    out = ds()
    out["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": rolling_update}
    return out


def test_budgets_round_percentages_up_and_never_both_zero() -> None:
    assert budgets(rolling(maxUnavailable="25%"), 10) == (3, 0)
    assert budgets(rolling(maxUnavailable=0, maxSurge="10%"), 10) == (0, 1)
    assert budgets(rolling(maxUnavailable=0, maxSurge=0), 4) == (1, 0)


def test_without_surge_old_pods_go_within_max_unavailable() -> None:
    nodes = {f"n{i}": [pod(f"p{i}", node=f"n{i}", hash_="old")] for i in range(4)}
    nodes["n3"] = [pod("p3", node="n3", hash_="old", ready=False)]
    to_delete, to_create = plan(rolling(maxUnavailable=2), nodes, should_run=set(nodes), hash_="new", generation=None, now=NOW)  # fmt: skip
    # the unavailable old pod is replaced at once, and two available ones may go
    assert [p["metadata"]["name"] for p in to_delete] == ["p3", "p0", "p1"]
    assert to_create == []
    nodes["n0"] = [pod("q0", node="n0", hash_="new", ready=False)]
    to_delete, _ = plan(rolling(maxUnavailable=1), nodes, should_run=set(nodes), hash_="new", generation=None, now=NOW)  # fmt: skip
    assert [p["metadata"]["name"] for p in to_delete] == ["p3"], (
        "a new pod starting uses the budget"
    )


def test_with_surge_new_pods_come_first_and_old_ones_go_once_new_ones_are_available() -> None:
    nodes = {
        "a": [pod("old-a", node="a", hash_="old"), pod("new-a", node="a", hash_="new")],
        "b": [
            pod("old-b", node="b", hash_="old"),
            pod("new-b", node="b", hash_="new", ready=False),
        ],
        "c": [pod("old-c", node="c", hash_="old")],
        "d": [pod("old-d", node="d", hash_="old", ready=False)],
    }
    strategy = rolling(maxUnavailable=0, maxSurge=1)
    to_delete, to_create = plan(strategy, nodes, should_run=set(nodes), hash_="new", generation=None, now=NOW)  # fmt: skip
    assert [p["metadata"]["name"] for p in to_delete] == ["old-a"]
    assert to_create == ["d"], "b is surging already (budget 1); d's old pod is unavailable anyway"
    to_delete, to_create = plan(rolling(maxUnavailable=0, maxSurge=2), nodes, should_run=set(nodes), hash_="new", generation=None, now=NOW)  # fmt: skip
    assert to_create == ["d", "c"]


def test_failed_pod_backoff_doubles_up_to_its_cap() -> None:
    backoff = FailedPodBackoff(initial=1.0, cap=4.0)
    assert backoff.in_backoff("k", 0.0) is None
    backoff.step("k", 0.0)
    assert backoff.in_backoff("k", 0.5) == 0.5
    assert backoff.in_backoff("k", 1.0) is None
    for now in (1.0, 3.0, 7.0):
        backoff.step("k", now)
    assert backoff.in_backoff("k", 10.0) == 1.0, "capped at 4 s"
