"""The scheduling queue: ordering, backoff, parking unschedulable pods and releasing them.

Virtual time (looptime): backoffs of seconds pass instantly, and ``loop.time()`` shows exactly
when a pod came back.
"""

from __future__ import annotations

import asyncio

import pytest

from services.scheduler.queue import (
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    ClusterEvent,
    SchedulingQueue,
)
from tests.factories import pod_info

pytestmark = pytest.mark.looptime


async def test_pops_by_priority_then_age() -> None:
    q = SchedulingQueue()
    q.add(pod_info("old"))
    q.add(pod_info("young"))
    q.add(pod_info("vip", priority=1000))
    order = [(await q.pop()).key for _ in range(3)]
    assert order == ["default/vip", "default/old", "default/young"]


async def test_pop_waits_for_a_pod() -> None:
    q = SchedulingQueue()
    popper = asyncio.create_task(q.pop(), name="pop")
    await asyncio.sleep(5)
    assert not popper.done()
    q.add(pod_info("late"))
    assert (await popper).key == "default/late"


async def test_adding_twice_queues_once() -> None:
    q = SchedulingQueue()
    q.add(pod_info("a"))
    q.add(pod_info("a"))
    assert q.lengths() == {"active": 1, "backoff": 0, "unschedulable": 0}


async def test_unschedulable_pod_waits_for_a_relevant_event_and_never_busy_loops() -> None:
    q = SchedulingQueue()
    runner = asyncio.create_task(q.run(), name="queue-timers")
    q.add(pod_info("p"))
    qp = await q.pop()
    q.requeue_unschedulable(qp, plugins=frozenset({"NodeAffinity"}))
    assert q.lengths()["unschedulable"] == 1

    # nothing happens for a long while: no retry at all (no busy loop), well before 5 minutes
    popper = asyncio.create_task(q.pop(), name="pop")
    await asyncio.sleep(200)
    assert not popper.done()

    # an event that cannot help (a pod freed resources) leaves it parked
    assert q.on_event(ASSIGNED_POD_DELETE) == 0
    await asyncio.sleep(1)
    assert not popper.done()

    # a node relabelled: it may help NodeAffinity -> back to active (its 1 s backoff is long over)
    loop = asyncio.get_running_loop()
    released_at = loop.time()
    assert q.on_event(ClusterEvent("NodeUpdate", frozenset({"NodeAffinity"}))) == 1
    again = await popper
    assert again.key == "default/p"
    assert again.attempts == 2
    assert loop.time() == pytest.approx(released_at)
    runner.cancel()


async def test_event_soon_after_failure_respects_the_backoff() -> None:
    q = SchedulingQueue(initial_backoff=1, max_backoff=10)
    runner = asyncio.create_task(q.run(), name="queue-timers")
    loop = asyncio.get_running_loop()
    q.add(pod_info("p"))
    qp = await q.pop()
    q.requeue_backoff(qp)  # first failure: 1 s
    qp = await q.pop()
    failed_at = loop.time()
    q.requeue_unschedulable(qp, plugins=frozenset({"NodeResourcesFit"}))  # second: 2 s
    await asyncio.sleep(0.5)
    assert q.on_event(NODE_ADD) == 1  # released at once, but into backoff
    assert q.lengths() == {"active": 0, "backoff": 1, "unschedulable": 0}
    qp = await q.pop()
    assert loop.time() - failed_at == pytest.approx(2)  # counted from the failure, not the event
    runner.cancel()


async def test_backoff_doubles_up_to_the_cap() -> None:
    q = SchedulingQueue(initial_backoff=1, max_backoff=10)
    runner = asyncio.create_task(q.run(), name="queue-timers")
    loop = asyncio.get_running_loop()
    q.add(pod_info("p"))
    waits = []
    qp = await q.pop()
    for _ in range(6):
        failed_at = loop.time()
        q.requeue_backoff(qp)
        qp = await q.pop()
        waits.append(round(loop.time() - failed_at, 3))
    assert waits == [1, 2, 4, 8, 10, 10]
    runner.cancel()


async def test_event_during_the_cycle_sends_the_pod_to_backoff_not_parking() -> None:
    q = SchedulingQueue()
    runner = asyncio.create_task(q.run(), name="queue-timers")
    loop = asyncio.get_running_loop()
    q.add(pod_info("p"))
    qp = await q.pop()
    q.on_event(NODE_ADD)  # a node arrived after this cycle read the cache
    failed_at = loop.time()
    q.requeue_unschedulable(qp, plugins=frozenset({"NodeResourcesFit"}))
    assert q.lengths() == {"active": 0, "backoff": 1, "unschedulable": 0}
    await q.pop()
    assert loop.time() - failed_at == pytest.approx(1)
    runner.cancel()


async def test_parked_pod_is_retried_after_five_minutes_anyway() -> None:
    q = SchedulingQueue()
    runner = asyncio.create_task(q.run(), name="queue-timers")
    loop = asyncio.get_running_loop()
    q.add(pod_info("p"))
    qp = await q.pop()
    parked_at = loop.time()
    q.requeue_unschedulable(qp, plugins=frozenset({"NodeAffinity"}))
    await q.pop()
    assert loop.time() - parked_at == pytest.approx(300)
    runner.cancel()


async def test_pod_update_releases_a_parked_pod() -> None:
    q = SchedulingQueue()
    runner = asyncio.create_task(q.run(), name="queue-timers")
    q.add(pod_info("p", node_selector={"zz": "cxk"}))
    qp = await q.pop()
    q.requeue_unschedulable(qp, plugins=frozenset({"NodeAffinity"}))
    await asyncio.sleep(30)
    q.update(pod_info("p"))  # the user dropped the selector
    again = await q.pop()
    assert not again.pod.node_selector
    runner.cancel()


async def test_deleted_pods_leave_every_sub_queue() -> None:
    q = SchedulingQueue()
    q.add(pod_info("active"))
    q.add(pod_info("flying"))
    q.add(pod_info("parked"))
    first = await q.pop()
    second = await q.pop()
    third = await q.pop()
    assert [first.key, second.key, third.key] == [
        "default/active",
        "default/flying",
        "default/parked",
    ]
    q.requeue_unschedulable(third, plugins=frozenset({"NodeAffinity"}))
    q.requeue_backoff(first)
    for key in ("default/active", "default/flying", "default/parked"):
        q.delete(key)
    q.requeue_unschedulable(second, plugins=frozenset({"NodeAffinity"}))  # deleted while in flight
    assert len(q) == 0
    assert "default/flying" not in q


async def test_status_only_update_keeps_the_pod_parked() -> None:
    q = SchedulingQueue()
    runner = asyncio.create_task(q.run(), name="queue-timers")
    q.add(pod_info("p", node_selector={"zz": "cxk"}))
    qp = await q.pop()
    q.requeue_unschedulable(qp, plugins=frozenset({"NodeAffinity"}))
    q.update(
        pod_info("p", node_selector={"zz": "cxk"}), changed=False
    )  # e.g. our PodScheduled=False
    await asyncio.sleep(60)
    assert q.lengths() == {"active": 0, "backoff": 0, "unschedulable": 1}
    runner.cancel()
