"""Pods no node can take stay Pending and say why — then get scheduled when the cluster changes.

Real apiserver, real scheduler process; the tests await watch events, never sleep.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubelite.testing import ComponentProcess
from kubelite.testing.metrics import metric
from tests.scheduler.cluster import cluster_at

pytestmark = pytest.mark.e2e

SELECTOR_MESSAGE = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."


async def test_unmatched_selector_is_pending_with_reason_until_a_node_is_labelled(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess]
) -> None:
    sched = start_scheduler()
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node1")
        await cluster.add_node("node2")
        await cluster.add_pod("picky", node_selector={"zz": "cxk"})

        await cluster.until(
            lambda: bool(cluster.pod_events("picky", "FailedScheduling")),
            within=20,
            what="FailedScheduling event",
        )
        (event,) = cluster.pod_events("picky", "FailedScheduling")
        assert event["type"] == "Warning"
        assert event["message"] == SELECTOR_MESSAGE
        await cluster.until(
            lambda: cluster.condition("picky", "PodScheduled") is not None,
            within=20,
            what="PodScheduled condition",
        )
        condition = cluster.condition("picky", "PodScheduled")
        assert condition is not None
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "False",
            "Unschedulable",
            SELECTOR_MESSAGE,
        )
        assert cluster.node_of("picky") == ""
        # parked, not retried in a loop: our own status write did not wake it up
        assert metric(sched.url, "scheduler_pending_pods", queue="unschedulable") == 1

        await cluster.label_node("node2", {"zz": "cxk"})
        await cluster.until(lambda: bool(cluster.node_of("picky")), within=20, what="picky bound")
        assert cluster.node_of("picky") == "node2"
        await cluster.until(
            lambda: bool(cluster.pod_events("picky", "Scheduled")), within=20, what="Scheduled"
        )


async def test_ten_one_cpu_pods_onto_two_four_cpu_nodes(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess]
) -> None:
    sched = start_scheduler()
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node1", cpu="4")
        await cluster.add_node("node2", cpu="4")
        names = [f"cpu-{i}" for i in range(10)]
        await cluster.add_pods(names, cpu="1")

        def settled() -> bool:
            pending = [n for n in names if not cluster.node_of(n)]
            return len(cluster.bound()) == 8 and all(
                cluster.pod_events(n, "FailedScheduling") for n in pending
            )

        await cluster.until(settled, within=30, what="8 bound and 2 FailedScheduling")
        placed = cluster.bound()
        assert sorted(placed.values()) == ["node1"] * 4 + ["node2"] * 4
        pending = [n for n in names if not cluster.node_of(n)]
        assert len(pending) == 2
        for name in pending:
            messages = {e["message"] for e in cluster.pod_events(name, "FailedScheduling")}
            assert messages == {"0/2 nodes are available: 2 Insufficient cpu."}
        assert (
            metric(sched.url, "scheduler_pending_pods", queue="unschedulable")
            + metric(sched.url, "scheduler_pending_pods", queue="backoff")
            == 2
        )

        # freeing a node's cpu (deleting a bound pod) lets one of the two in
        victim = next(k for k in placed)
        await cluster.client.delete(
            cluster.pods.rt, victim.split("/")[1], namespace="default", grace_period_seconds=0
        )
        await cluster.until(
            lambda: sum(1 for n in pending if cluster.node_of(n)) == 1,
            within=30,
            what="one more bound",
        )
