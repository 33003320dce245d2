"""An eviction's ``disruptedPods`` entry holds its pod out of the healthy count for 2 minutes.

The disruption controller runs in the test process against a real apiserver, on a clock the
test moves: the 2-minute ``DeletionTimeout`` passes without waiting for it. Each step calls
``sync`` once the controller's own caches hold what the test wrote.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from api.meta import format_time
from client.events import EventRecorder
from client.rest import ApiClient
from kubelite.testing import ComponentProcess
from kubelite.testing.waiting import Changes, Watcher
from services.controller_manager.disruption import DisruptionController
from services.controller_manager.informers import SharedInformers
from tests.controller_manager.harness import DEPLOYMENTS, EVENTS, PODS, RSS, rt
from tests.factories import controlled_by, deployment, pod, pod_disruption_budget, replica_set

Obj = dict[str, Any]

PDBS = rt("policy", "PodDisruptionBudget")
WEB = {"app": "web"}
T0 = datetime.now(UTC).replace(microsecond=0)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def client(kubelite_apiserver: ComponentProcess) -> AsyncIterator[ApiClient]:
    async with ApiClient(server=kubelite_apiserver.url) as c:
        yield c


@pytest.fixture
async def controller(client: ApiClient) -> AsyncIterator[tuple[DisruptionController, Clock]]:
    informers = SharedInformers(client)
    recorder = EventRecorder(client, component="controllermanager")
    clock = Clock()
    dc = DisruptionController(client=client, informers=informers, recorder=recorder, clock=clock)
    informers.start()
    events = recorder.start()
    await informers.wait_synced()
    try:
        yield dc, clock
    finally:
        events.cancel()
        await informers.stop()


async def cached(dc: DisruptionController, check: Callable[[], bool], *, what: str) -> None:
    await Changes(dc.pods, dc.budgets).until(check, what=what)


def budget_status(dc: DisruptionController) -> Obj:
    return dict((dc.budgets.get("default/web") or {}).get("status") or {})


def counts(status: Obj) -> tuple[int, int, int, int]:
    keys = ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")
    return tuple(int(status.get(k) or 0) for k in keys)  # type: ignore[return-value]


async def test_an_entry_expires_and_its_pod_counts_again(
    client: ApiClient, controller: tuple[DisruptionController, Clock]
) -> None:
    dc, clock = controller
    d = await client.create(DEPLOYMENTS, deployment("web", replicas=3), namespace="default")
    rs = await client.create(
        RSS, replica_set("web-1", replicas=3, labels=WEB, owner=d), namespace="default"
    )
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    for i in range(3):
        member = controlled_by(pod(f"web-1-{i}", labels=WEB), rs)
        await client.create(PODS, member, namespace="default")
        await client.patch(
            PODS, f"web-1-{i}", {"status": ready}, namespace="default", subresource="status"
        )
    await client.create(
        PDBS, pod_disruption_budget("web", selector=WEB, minAvailable=2), namespace="default"
    )
    await cached(
        dc,
        lambda: (
            dc.budgets.get("default/web") is not None
            and sum(1 for p in dc.pods.list() if (p.get("status") or {}).get("phase")) == 3
        ),
        what="the budget and three reported pods in the controller's caches",
    )
    assert await dc.sync("default/web") is None
    await cached(dc, lambda: counts(budget_status(dc)) == (1, 3, 2, 3), what="1 allowed")

    # what an eviction writes when it is granted: one spent, the pod recorded (it is never
    # deleted here, as if the deleting client went away)
    spent = {"disruptionsAllowed": 0, "disruptedPods": {"web-1-0": format_time(T0)}}
    await client.patch(PDBS, "web", {"status": spent}, namespace="default", subresource="status")
    await cached(dc, lambda: "disruptedPods" in budget_status(dc), what="the entry cached")

    clock.now = T0 + timedelta(seconds=10)
    recheck = await dc.sync("default/web")
    assert recheck == 110.0  # when the entry expires, by the controller's clock
    await cached(
        dc, lambda: counts(budget_status(dc)) == (0, 2, 2, 3), what="the evicted pod not counted"
    )
    assert budget_status(dc)["disruptedPods"] == {"web-1-0": format_time(T0)}

    clock.now = T0 + timedelta(minutes=2, seconds=1)
    assert await dc.sync("default/web") is None
    await cached(
        dc, lambda: counts(budget_status(dc)) == (1, 3, 2, 3), what="the pod counted again"
    )
    assert "disruptedPods" not in budget_status(dc)
    async with Watcher(client, EVENTS, namespace="default") as events:
        await events.wait_until(
            lambda items: any(
                e["reason"] == "NotDeleted" and e["involvedObject"]["name"] == "web-1-0"
                and e["message"] == "Pod was expected by PDB default/web to be deleted but it wasn't"
                for e in items
            ),
            what="a NotDeleted event on web-1-0",
        )  # fmt: skip
