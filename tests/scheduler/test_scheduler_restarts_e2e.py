"""Killing and restarting schedulers: every pod is bound exactly once, and only a leader binds.

* SIGKILL mid-burst (bindings cut off in flight, no lease release), start a new process: it
  lists, finds what is already bound, and binds every remaining pod — no pod ever changes node.
* Two replicas: only the Lease holder schedules; SIGKILL it and the standby takes over within
  the lease duration (shortened here by flags so the test stays quick).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.apiserver_process import ApiServerProcess
from tests.scheduler.cluster import PODS, cluster_at
from tests.scheduler.scheduler_process import SchedulerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FAST_LEASE = (
    "--leader-elect-lease-duration", "3",
    "--leader-elect-renew-deadline", "2",
    "--leader-elect-retry-period", "0.5",
)  # fmt: skip


async def test_scheduler_killed_mid_burst_and_restarted_binds_every_pod_exactly_once(
    api: ApiServerProcess, start_scheduler: Callable[..., SchedulerProcess]
) -> None:
    async with cluster_at(api.url) as cluster:
        for i in range(4):
            await cluster.add_node(f"node{i}", cpu="100", pods="500")
        names = [f"burst-{i:03}" for i in range(300)]
        await cluster.add_pods(names, cpu="100m")

        first = start_scheduler(*FAST_LEASE)
        await cluster.until(lambda: len(cluster.bound()) >= 60, within=60, what="60 bound")
        first.kill()
        # count from a fresh read of the server, not from our own (possibly lagging) watch
        listed = await cluster.client.list(PODS, namespace="default")
        at_kill = sum(1 for p in listed["items"] if p["spec"].get("nodeName"))

        second = start_scheduler(*FAST_LEASE)
        await cluster.until(lambda: len(cluster.bound()) == 300, within=90, what="all 300 bound")
        assert at_kill < 300, "the burst finished before the kill; the test proved nothing"
        # exactly once: no pod ever had a second node, and the second process did the rest
        rebound = {k: v for k, v in cluster.node_history.items() if len(v) > 1}
        assert rebound == {}
        assert set(cluster.bound()) == {f"default/{n}" for n in names}
        scheduled = second.metric(
            "scheduler_schedule_attempts_total", profile="default-scheduler", result="scheduled"
        )
        # the killed process may have landed a few more bindings (at most its in-flight ones)
        # after that read; the new one binds the rest and nothing twice
        assert 300 - at_kill - 32 <= scheduled <= 300 - at_kill
        # the per-node spread stays sane: every node took part
        assert set(cluster.bound().values()) == {f"node{i}" for i in range(4)}


async def test_only_the_leader_schedules_and_the_standby_takes_over(
    api: ApiServerProcess, start_scheduler: Callable[..., SchedulerProcess]
) -> None:
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node1")
        a = start_scheduler(*FAST_LEASE, "--identity", "replica-a")
        b = start_scheduler(*FAST_LEASE, "--identity", "replica-b")
        await cluster.add_pods([f"one-{i}" for i in range(5)])
        await cluster.until(lambda: len(cluster.bound()) == 5, within=30, what="5 bound")

        def attempts(s: SchedulerProcess) -> float:
            return s.metric(
                "scheduler_schedule_attempts_total", profile="default-scheduler", result="scheduled"
            )

        leaders = [
            s
            for s in (a, b)
            if s.metric("leader_election_master_status", name="kube-scheduler") == 1
        ]
        assert len(leaders) == 1
        leader = leaders[0]
        standby = b if leader is a else a
        assert attempts(leader) == 5
        assert attempts(standby) == 0

        leader.kill()  # no release: the standby must wait out the lease
        await cluster.add_pods([f"two-{i}" for i in range(5)])
        await cluster.until(lambda: len(cluster.bound()) == 10, within=30, what="standby binds")
        assert attempts(standby) == 5
        assert standby.metric("leader_election_master_status", name="kube-scheduler") == 1
        assert standby.stop() == 0  # SIGTERM: clean exit
