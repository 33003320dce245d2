"""Binding against a real apiserver: a 409 (someone else bound the pod first) is not an error.

The scheduler here runs in-process, fed by hand with the objects the API returned, so the test
can give it a stale view: it believes a pod is pending while another binder has already bound
it. Its binding then gets 409 Conflict; it must drop its assumption, not count an error, not
retry, and not claim the pod with a Scheduled event.
"""

from __future__ import annotations

import asyncio

import pytest

from client.rest import ApiClient
from kubelite.testing import ComponentProcess
from services.scheduler.config import SchedulerConfig, build_framework
from services.scheduler.queue import SchedulingQueue
from services.scheduler.scheduler import Scheduler
from tests.factories import node, sched_pod
from tests.scheduler.cluster import NODES, PODS

pytestmark = pytest.mark.e2e


async def _drain(sched: Scheduler) -> None:
    await asyncio.gather(*sched._binds, *sched._status_writes)


async def test_conflicting_binding_is_left_to_the_watch(api: ComponentProcess) -> None:
    async with ApiClient(server=api.url) as client:
        await client.create(NODES, node("node1", cpu="4"))
        body = sched_pod("raced", cpu="1")
        del body["metadata"]["uid"]
        created = await client.create(PODS, body, namespace="default")
        # another binder wins the race
        await client.bind(namespace="default", pod="raced", node="node1")

        queue = SchedulingQueue()
        sched = Scheduler(client=client, framework=build_framework(SchedulerConfig()), queue=queue)
        sched.on_node_add(await client.get(NODES, "node1"))
        sched.on_pod_add(created)  # the stale view: still pending
        sched.schedule_one(await queue.pop())
        assert sched.cache.is_assumed("default/raced")
        await _drain(sched)

        assert sched.bound == 0
        assert not sched.cache.is_placed("default/raced")  # assumption dropped
        assert len(queue) == 0 and "default/raced" not in queue  # not retried
        assert sched.metrics.attempts_of("error") == 0
        assert sched.metrics.attempts_of("scheduled") == 0


async def test_binding_a_pod_that_is_gone_is_dropped(api: ComponentProcess) -> None:
    async with ApiClient(server=api.url) as client:
        await client.create(NODES, node("node1"))
        body = sched_pod("ghost")
        del body["metadata"]["uid"]
        created = await client.create(PODS, body, namespace="default")
        await client.delete(PODS, "ghost", namespace="default", grace_period_seconds=0)

        queue = SchedulingQueue()
        sched = Scheduler(client=client, framework=build_framework(SchedulerConfig()), queue=queue)
        sched.on_node_add(await client.get(NODES, "node1"))
        sched.on_pod_add(created)
        sched.schedule_one(await queue.pop())
        await _drain(sched)
        assert not sched.cache.is_placed("default/ghost")
        assert len(queue) == 0
