"""A template whose every pod the apiserver refuses (here: an exceeded quota, injected by a
proxy in front of the real apiserver) does not flood it: one create in flight at a time, retried
with backoff, a ``FailedCreate`` event and ``ReplicaFailure`` condition saying why; once the
refusal stops, the RC gets its pods and the condition goes."""

from __future__ import annotations

import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.fault_proxy import FaultProxy
from tests.controller_manager.harness import EVENTS, PODS, RCS, active

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

QUOTA = (
    'pods "quota-" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=0, '
    "limited: pods=0"
)


async def test_refused_creates_go_one_at_a_time_then_recover(cluster: Cluster) -> None:
    client = cluster.client
    cluster.cm.stop()
    async with FaultProxy(cluster.api.url) as proxy:
        rule = proxy.refuse(
            "POST",
            r"/api/v1/namespaces/default/pods",
            {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": QUOTA,
             "reason": "Forbidden", "code": 403},
        )  # fmt: skip
        cm = cluster.new_cm("--controllers", "replicationcontroller", server=proxy.url).start()
        async with (
            Watcher(client, EVENTS, namespace="default") as events,
            Watcher(client, RCS, namespace="default") as rcs,
            Watcher(client, PODS, namespace="default") as pods,
        ):
            await client.create(RCS, factories.rc("quota", replicas=5), namespace="default")
            got = await events.wait_until(
                lambda o: any(e["reason"] == "FailedCreate" and e.get("count", 1) >= 4 for e in o),
                what="repeated FailedCreate events",
            )
            event = next(e for e in got if e["reason"] == "FailedCreate")
            assert event["type"] == "Warning"
            assert event["message"] == f"Error creating: {QUOTA}"
            assert event["source"]["component"] == "replication-controller"
            assert rule.max_in_flight == 1, "slow start: the first batch is a single create"
            got = await rcs.wait_until(
                lambda o: any(
                    c["type"] == "ReplicaFailure"
                    for c in (o[0].get("status") or {}).get("conditions") or []
                ),
                what="a ReplicaFailure condition",
            )
            (cond,) = got[0]["status"]["conditions"]
            assert (cond["status"], cond["reason"], cond["message"]) == (
                "True",
                "FailedCreate",
                QUOTA,
            )

            proxy.lift(rule)
            await pods.wait_until(
                lambda o: sum(1 for p in o if active(p)) == 5, what="5 pods", within=60
            )
            await rcs.wait_until(
                lambda o: (
                    not (o[0].get("status") or {}).get("conditions")
                    and o[0]["status"].get("replicas") == 5
                ),
                what="condition cleared, 5 replicas",
            )
        cm.stop()  # before the proxy goes away under it
