"""The Job rules that wait — pod-failure back-off, ``activeDeadlineSeconds``, suspend/resume and
``ttlSecondsAfterFinished`` — on a clock the test moves instead of waiting.

The job and TTL-after-finished controllers run in the test process with a ``ManualClock``
against real apiserver, scheduler, sim-kubelet and controller-manager processes (the latter
with every other controller, the garbage collector included). A controller that decides to
wait sets a timer on the clock; the test sees it pending, checks nothing happened early, and
jumps the clock to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from api.meta import parse_time
from client.events import EventRecorder
from kubelite.testing.waiting import WITHIN, Watcher
from services.controller_manager.clock import ManualClock
from services.controller_manager.informers import SharedInformers
from services.controller_manager.job import JobController
from services.controller_manager.ttl_after_finished import TTLAfterFinishedController
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import EVENTS, PODS, Obj, owned_by, rt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

JOBS = rt("batch", "Job")


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--controllers=*,-job,-ttl-after-finished",)


@pytest.fixture
async def clock(cluster: Cluster) -> AsyncIterator[ManualClock]:
    """The job and TTL controllers, in this process, on a clock only the test moves."""
    await cluster.start_nodes("node1")
    clock = ManualClock()
    informers = SharedInformers(cluster.client)
    recorder = EventRecorder(cluster.client, component="job-controller")
    jobs = JobController(client=cluster.client, informers=informers, recorder=recorder, clock=clock)
    ttl = TTLAfterFinishedController(client=cluster.client, informers=informers, clock=clock)
    informers.start()
    tasks = [
        recorder.start(),
        asyncio.create_task(jobs.run(), name="job controller"),
        asyncio.create_task(ttl.run(), name="ttl controller"),
    ]
    try:
        yield clock
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await informers.stop()


async def a_timer(clock: ManualClock) -> float:
    """Await a controller's decision to wait; the seconds it waits."""
    await asyncio.wait_for(clock.timers_pending.wait(), WITHIN)
    delay = clock.next_delay()
    assert delay is not None
    return delay


async def a_back_off(clock: ManualClock) -> float:
    """Await the job controller's decision to wait out a pod's back-off; the seconds it waits.

    Each sync of the job while a back-off runs arms a timer for its end again, each computed
    from a fresh reading of the clock, so the same end is queued several times microseconds
    apart; the clock's jump fires the first, and the others stay pending. Timers due within a
    second are such repeats (no rule here waits that little): they are fired, and the wait
    goes on for a real one."""
    while True:
        delay = await a_timer(clock)
        if delay > 1.0:
            return delay
        clock.advance(max(delay, 0.0))


def condition(job: Obj | None, type_: str) -> Obj | None:
    for cond in ((job or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == type_:
            return dict(cond)
    return None


def finished_at(pod: Obj) -> str:
    return str(pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"])


def first(objects: list[Obj]) -> Obj | None:
    return objects[0] if objects else None


async def job_pods(cluster: Cluster, job: Obj) -> list[Obj]:
    items = (await cluster.client.list(PODS, namespace="default"))["items"]
    return [p for p in items if owned_by(p, job)]


async def test_backoff_limit_with_doubling_pod_backoff(
    cluster: Cluster, clock: ManualClock
) -> None:
    client = cluster.client
    body = factories.job("flaky", factories.sim_exit(1), backoffLimit=2)
    async with Watcher(client, JOBS, namespace="default") as jobs:
        job = await client.create(JOBS, body, namespace="default")
        for failures, backoff in ((1, 10), (2, 20)):
            wait = await a_back_off(clock)
            due = clock.now() + timedelta(seconds=wait)
            # waiting out the back-off: the failed pod is not replaced yet
            pods = await job_pods(cluster, job)
            assert len(pods) == failures
            assert all(p["status"]["phase"] == "Failed" for p in pods)
            last_failure = max(parse_time(finished_at(p)) for p in pods)
            # 10 s after the first failure, doubled after the second
            assert abs((due - last_failure) / timedelta(seconds=1) - backoff) < 0.5
            clock.advance_to_next()
        done = await jobs.wait_until(
            lambda o: (condition(first(o), "Failed") or {}).get("status") == "True",
            what="flaky Failed",
        )
    failed = condition(done[0], "Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    )
    assert condition(done[0], "FailureTarget")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
    assert done[0]["status"]["failed"] == 3 and "succeeded" not in done[0]["status"]
    assert len(await job_pods(cluster, job)) == 3
    events = (await client.list(EVENTS, namespace="default"))["items"]
    assert any(
        e["reason"] == "BackoffLimitExceeded"
        and e["type"] == "Warning"
        and e["message"] == "Job has reached the specified backoff limit"
        for e in events
    )


async def test_active_deadline_fails_the_job(cluster: Cluster, clock: ManualClock) -> None:
    client = cluster.client
    body = factories.job(
        "slow", factories.container("main", "busybox"), activeDeadlineSeconds=30, parallelism=2
    )
    async with (
        Watcher(client, JOBS, namespace="default") as jobs,
        Watcher(client, PODS, namespace="default") as pods,
    ):
        job = await client.create(JOBS, body, namespace="default")
        await pods.wait_until(
            lambda o: sum(1 for p in o if p.get("status", {}).get("phase") == "Running") == 2,
            what="2 running pods",
        )
        wait = await a_timer(clock)
        assert 0 < wait <= 30
        clock.advance_to_next()
        done = await jobs.wait_until(
            lambda o: (condition(first(o), "Failed") or {}).get("status") == "True",
            what="slow Failed",
        )
    failed = condition(done[0], "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"
    assert failed["message"] == "Job was active longer than specified deadline"
    assert "active" not in done[0]["status"] and done[0]["status"]["terminating"] == 0
    assert done[0]["status"]["failed"] == 2  # the pods it deleted count as failed
    for pod in await job_pods(cluster, job):
        assert pod["status"]["phase"] == "Failed"
        assert "batch.kubernetes.io/job-tracking" not in (pod["metadata"].get("finalizers") or [])


async def test_suspend_deletes_pods_and_resume_restarts_the_clock(
    cluster: Cluster, clock: ManualClock
) -> None:
    client = cluster.client
    body = factories.job(
        "paused", factories.container("main", "busybox"), parallelism=2, completions=4,
        suspend=True,
    )  # fmt: skip

    def running(objects: list[Obj]) -> int:
        return sum(
            1
            for p in objects
            if p.get("status", {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        )

    async with (
        Watcher(client, JOBS, namespace="default") as jobs,
        Watcher(client, PODS, namespace="default") as pods,
    ):
        await client.create(JOBS, body, namespace="default")
        got = await jobs.wait_until(
            lambda o: (condition(first(o), "Suspended") or {}).get("status") == "True",
            what="Suspended",
        )
        assert condition(got[0], "Suspended")["reason"] == "JobSuspended"  # type: ignore[index]
        assert "startTime" not in got[0]["status"] and not pods.objects()

        await client.patch(JOBS, "paused", {"spec": {"suspend": False}}, namespace="default")
        got = await jobs.wait_until(
            lambda o: (condition(first(o), "Suspended") or {}).get("status") == "False",
            what="resumed",
        )
        resumed = condition(got[0], "Suspended")
        assert resumed is not None and resumed["reason"] == "JobResumed"
        first_start = got[0]["status"]["startTime"]
        await pods.wait_until(lambda o: running(o) == 2, what="2 running pods")

        await client.patch(JOBS, "paused", {"spec": {"suspend": True}}, namespace="default")
        got = await jobs.wait_until(
            lambda o: (
                (condition(first(o), "Suspended") or {}).get("status") == "True"
                and "active" not in first(o)["status"]
            ),  # type: ignore[index]
            what="suspended again with no active pods",
        )
        await pods.wait_until(lambda o: running(o) == 0, what="no running pods")

        clock.advance(60)  # resuming a minute later (virtually) restarts the active clock
        await client.patch(JOBS, "paused", {"spec": {"suspend": False}}, namespace="default")
        got = await jobs.wait_until(
            lambda o: (condition(first(o), "Suspended") or {}).get("status") == "False",
            what="resumed again",
        )
        assert got[0]["status"]["startTime"] > first_start
        # the minute passed also outlasted the back-off the two deleted (failed) pods started
        await pods.wait_until(lambda o: running(o) == 2, what="2 running pods after resume")
        await jobs.wait_until(
            lambda o: (first(o) or {}).get("status", {}).get("failed") == 2,
            what="the two deleted pods counted as failed",
        )
    events = (await client.list(EVENTS, namespace="default"))["items"]
    reasons = {e["reason"] for e in events if e["involvedObject"]["name"] == "paused"}
    assert {"Suspended", "Resumed", "SuccessfulDelete"} <= reasons


async def test_ttl_deletes_a_finished_job_and_its_pods(
    cluster: Cluster, clock: ManualClock
) -> None:
    client = cluster.client
    body = factories.job("brief", factories.sim_exit(0), ttlSecondsAfterFinished=100)
    async with (
        Watcher(client, JOBS, namespace="default") as jobs,
        Watcher(client, PODS, namespace="default") as pods,
    ):
        await client.create(JOBS, body, namespace="default")
        await jobs.wait_until(
            lambda o: (condition(first(o), "Complete") or {}).get("status") == "True",
            what="brief Complete",
        )
        wait = await a_timer(clock)
        assert 90 < wait <= 100
        assert jobs.objects() and pods.objects()  # still there before its time
        clock.advance_to_next()
        await jobs.wait_until(lambda o: not o, what="the job deleted")
        await pods.wait_until(lambda o: not o, what="its pod deleted")
