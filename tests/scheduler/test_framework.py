"""The framework end to end over node infos: which node wins, and the FailedScheduling words."""

from __future__ import annotations

import random

import pytest

from services.scheduler.config import SchedulerConfig, build_framework
from services.scheduler.framework import FitError, num_feasible_nodes_to_find
from services.scheduler.nodeinfo import NodeInfo
from tests.factories import node_info, pod_info


def default_framework(seed: int = 0) -> object:
    fw = build_framework(SchedulerConfig())
    fw._rng = random.Random(seed)
    return fw


def fit_error(p: object, nodes: list[NodeInfo]) -> FitError:
    fw = build_framework(SchedulerConfig())
    with pytest.raises(FitError) as excinfo:
        fw.schedule(p, nodes)  # type: ignore[arg-type]
    return excinfo.value


def test_seed_example_selector_no_node_matches() -> None:
    err = fit_error(pod_info(node_selector={"zz": "cxk"}), [node_info("node1"), node_info("node2")])
    assert (
        str(err) == "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    )
    assert err.diagnosis.unschedulable_plugins == {"NodeAffinity"}
    assert err.unresolvable


def test_reasons_are_counted_and_sorted() -> None:
    nodes = [
        node_info("a", cpu="1"),
        node_info("b", cpu="1"),
        node_info("c", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        node_info("d", unschedulable=True),
        node_info("e", ready=False),
    ]
    err = fit_error(pod_info(cpu="2"), nodes)
    assert str(err) == (
        "0/5 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, "
        "1 node(s) were not ready, 1 node(s) were unschedulable, 2 Insufficient cpu."
    )
    assert not err.unresolvable
    assert err.diagnosis.unschedulable_plugins == {
        "NodeResourcesFit",
        "TaintToleration",
        "NodeUnschedulable",
        "NodeReady",
    }


def test_all_shortfalls_of_a_node_are_counted() -> None:
    err = fit_error(pod_info(cpu="8", memory="64Gi"), [node_info("a"), node_info("b")])
    assert str(err) == "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory."


def test_no_nodes_at_all() -> None:
    assert str(fit_error(pod_info(), [])) == "no nodes available to schedule pods"


def test_selector_picks_the_labelled_node() -> None:
    fw = default_framework()
    nodes = [node_info("node1", labels={"zz": "cxk"}), node_info("node2")]
    for seed in range(5):
        fw._rng = random.Random(seed)  # type: ignore[attr-defined]
        assert fw.schedule(pod_info(node_selector={"zz": "cxk"}), nodes).node == "node1"  # type: ignore[attr-defined]


def test_emptier_node_wins() -> None:
    fw = default_framework()
    busy = node_info("busy", placed=(pod_info("x", cpu="3", node_name="busy"),))
    assert fw.schedule(pod_info(cpu="500m"), [busy, node_info("idle")]).node == "idle"  # type: ignore[attr-defined]


def test_ties_are_broken_at_random() -> None:
    fw = default_framework(seed=1)
    nodes = [node_info(f"n{i}") for i in range(4)]
    chosen = {fw.schedule(pod_info(), nodes).node for _ in range(200)}  # type: ignore[attr-defined]
    assert chosen == {"n0", "n1", "n2", "n3"}


@pytest.mark.parametrize(
    ("nodes", "percentage", "want"),
    [
        (50, 0, 50),
        (100, 0, 100),
        (1000, 0, 420),
        (5000, 0, 500),
        (20000, 0, 1000),
        (1000, 10, 100),
        (1000, 100, 1000),
        (1000, 30, 300),
    ],
)
def test_num_feasible_nodes_to_find(nodes: int, percentage: int, want: int) -> None:
    assert num_feasible_nodes_to_find(nodes, percentage) == want


def test_search_stops_early_and_rotates_over_all_nodes() -> None:
    fw = build_framework(SchedulerConfig(percentage_of_nodes_to_score=10))
    nodes = [node_info(f"n{i:04}") for i in range(1000)]
    seen: set[str] = set()
    for _ in range(10):
        result = fw.schedule(pod_info(), nodes)
        assert result.evaluated_nodes == 100
        assert result.feasible_nodes == 100
        seen.add(result.node)
    assert fw._next_start == 0  # ten searches of 100 went round the 1000 nodes once


def test_prefilter_skip_keeps_the_filter_from_running() -> None:
    fw = build_framework(SchedulerConfig())
    calls = []
    affinity = next(p for p in fw.filter_plugins if p.name == "NodeAffinity")
    original = affinity.filter
    affinity.filter = lambda *a: calls.append(a) or original(*a)  # type: ignore[method-assign]
    fw.schedule(pod_info(), [node_info("a"), node_info("b")])
    assert calls == []
    fw.schedule(pod_info(node_selector={"x": "y"}, name="sel"), [node_info("a", labels={"x": "y"})])
    assert len(calls) == 1
