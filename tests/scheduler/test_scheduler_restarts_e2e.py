"""Killing and restarting schedulers: every pod is bound exactly once, and only a leader binds.

* SIGKILL mid-burst (bindings cut off in flight), start a new process: it lists, finds what is
  already bound, and binds every remaining pod — no pod ever changes node. Some pods can only be
  bound after the kill (they select a label the nodes get then), so the new process always has
  work left, however fast the first one was.
* Two replicas: only the Lease holder schedules; SIGKILL it (no release) and the standby takes
  over once the lease runs out.

Timings: the first test does not exercise leader election and runs without it. The second does;
its renew deadline (8 s, renewed every 1 s) is long enough that a loaded machine does not lose
the lease while the test looks, and its lease (10 s) is what the takeover waits out.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubelite.testing import ComponentProcess
from kubelite.testing.metrics import metric
from tests.scheduler.cluster import PODS, cluster_at

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LEASE = (
    "--leader-elect-lease-duration", "10",
    "--leader-elect-renew-deadline", "8",
    "--leader-elect-retry-period", "1",
)  # fmt: skip
# bindings in flight at once: how many more the killed process can land after it is read
BIND_CONCURRENCY = 32


async def test_scheduler_killed_mid_burst_and_restarted_binds_every_pod_exactly_once(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess]
) -> None:
    async with cluster_at(api.url) as cluster:
        for i in range(4):
            await cluster.add_node(f"node{i}", cpu="100", pods="500")
        names = [f"burst-{i:03}" for i in range(300)]
        late = [f"late-{i:02}" for i in range(40)]
        await cluster.add_pods(names, cpu="100m")
        await cluster.add_pods(late, cpu="100m", node_selector={"wave": "two"})

        first = start_scheduler("--no-leader-elect", "--bind-concurrency", str(BIND_CONCURRENCY))
        await cluster.until(lambda: len(cluster.bound()) >= 60, within=60, what="60 bound")
        first.kill()  # returns once the process is gone
        # count from a fresh read of the server, not from our own (possibly lagging) watch
        listed = await cluster.client.list(PODS, namespace="default")
        at_kill = sum(1 for p in listed["items"] if p["spec"].get("nodeName"))
        for i in range(4):
            await cluster.label_node(f"node{i}", {"wave": "two"})

        second = start_scheduler("--no-leader-elect")
        total = len(names) + len(late)
        await cluster.until(lambda: len(cluster.bound()) == total, within=90, what="all bound")
        # exactly once: no pod ever had a second node, and the second process did the rest
        rebound = {k: v for k, v in cluster.node_history.items() if len(v) > 1}
        assert rebound == {}
        assert set(cluster.bound()) == {f"default/{n}" for n in names + late}
        scheduled = metric(
            second.url,
            "scheduler_schedule_attempts_total",
            profile="default-scheduler",
            result="scheduled",
        )
        # the killed process may have landed its in-flight bindings after that read; the new
        # one binds the rest (the late pods at least) and nothing twice
        assert total - at_kill - BIND_CONCURRENCY <= scheduled <= total - at_kill
        assert scheduled >= len(late)
        # the per-node spread stays sane: every node took part
        assert set(cluster.bound().values()) == {f"node{i}" for i in range(4)}


async def test_only_the_leader_schedules_and_the_standby_takes_over(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess]
) -> None:
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node1")
        a = start_scheduler(*LEASE, "--identity", "replica-a")
        b = start_scheduler(*LEASE, "--identity", "replica-b")
        await cluster.add_pods([f"one-{i}" for i in range(5)])
        await cluster.until(lambda: len(cluster.bound()) == 5, within=30, what="5 bound")

        def attempts(s: ComponentProcess) -> float:
            return metric(
                s.url,
                "scheduler_schedule_attempts_total",
                profile="default-scheduler",
                result="scheduled",
            )

        leaders = [
            s
            for s in (a, b)
            if metric(s.url, "leader_election_master_status", name="kube-scheduler") == 1
        ]
        assert len(leaders) == 1
        leader = leaders[0]
        standby = b if leader is a else a
        assert attempts(leader) == 5
        assert attempts(standby) == 0

        leader.kill()  # no release: the standby must wait out the lease
        await cluster.add_pods([f"two-{i}" for i in range(5)])
        # the standby waits out the 10 s lease, then binds: awaited on the pods' watch
        await cluster.until(lambda: len(cluster.bound()) == 10, within=60, what="standby binds")
        assert attempts(standby) == 5
        assert metric(standby.url, "leader_election_master_status", name="kube-scheduler") == 1
        assert standby.stop() == 0  # SIGTERM: clean exit
