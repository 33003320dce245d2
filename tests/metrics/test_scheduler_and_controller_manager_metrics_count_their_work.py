"""A real scheduler's and a real controller-manager's ``/metrics``: kube-scheduler's and
client-go's names, parsed by prometheus-client, moving as they work.

Each counter is read once the test's watch has seen what comes after it: the scheduler counts
a pod ``scheduled`` before it records the ``Scheduled`` event; a work queue counts an add and
its wait before the worker's reconcile creates anything.
"""

from __future__ import annotations

import pytest

from api.registry import REGISTRY
from client.rest import ApiClient
from kubelite.testing import Processes
from kubelite.testing.metrics import metric, samples, scrape
from kubelite.testing.waiting import Watcher
from tests.factories import node, pod, replica_set

pytestmark = pytest.mark.e2e

NODES = REGISTRY.require("", "Node")
PODS = REGISTRY.require("", "Pod")
EVENTS = REGISTRY.require("", "Event")
REPLICASETS = REGISTRY.require("apps", "ReplicaSet")


async def test_a_scheduled_pod_moves_the_attempt_and_latency_metrics(
    kubelite_processes: Processes,
) -> None:
    api = kubelite_processes.apiserver(store="memory://")
    scheduler = kubelite_processes.scheduler(api.url)
    samples(scrape(scheduler.url))  # parses before any work
    scheduled = {"result": "scheduled", "profile": "default-scheduler"}
    assert metric(scheduler.url, "scheduler_schedule_attempts_total", **scheduled) == 0

    async with ApiClient(server=api.url) as client:
        await client.create(NODES, node("node1"))
        async with Watcher(client, EVENTS, namespace="default") as events:
            await client.create(PODS, pod("placed"), namespace="default")
            await events.wait_until(
                lambda objs: any(
                    e["reason"] == "Scheduled" and e["involvedObject"]["name"] == "placed"
                    for e in objs
                ),
                what="the Scheduled event of placed",
            )

    assert metric(scheduler.url, "scheduler_schedule_attempts_total", **scheduled) == 1
    assert (
        metric(scheduler.url, "scheduler_scheduling_attempt_duration_seconds_count", **scheduled)
        == 1
    )
    assert (
        metric(scheduler.url, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1")
        == 1
    )
    assert metric(scheduler.url, "scheduler_pending_pods", queue="active") == 0
    assert metric(scheduler.url, "leader_election_master_status", name="kube-scheduler") == 1


async def test_a_replicaset_moves_its_work_queue_metrics(kubelite_processes: Processes) -> None:
    api = kubelite_processes.apiserver(store="memory://")
    manager = kubelite_processes.controller_manager(api.url)
    names = {s.name for s in samples(scrape(manager.url))}
    assert "leader_election_master_status" in names

    async with ApiClient(server=api.url) as client:
        async with Watcher(client, PODS, namespace="default") as pods:
            rs = replica_set("counted", replicas=1, labels={"app": "counted"})
            await client.create(REPLICASETS, rs, namespace="default")
            await pods.wait_until(lambda objs: len(objs) == 1, what="the ReplicaSet's pod")

    queue = {"name": "replicaset"}
    assert metric(manager.url, "workqueue_adds_total", **queue) >= 1
    assert metric(manager.url, "workqueue_queue_duration_seconds_count", **queue) >= 1
    page = samples(scrape(manager.url))
    running = {
        s.labels["name"] for s in page if s.name == "workqueue_longest_running_processor_seconds"
    }
    assert "replicaset" in running  # every live queue is listed, busy or not
    assert metric(manager.url, "leader_election_master_status", name="kube-controller-manager") == 1
