"""The CronJob controller against a real apiserver process, run in the test's process on a
virtual clock: hours of schedule pass in milliseconds, and every step waits for what the
controller did (a Job, a status, an event, the wake-up it armed) — never for time.

No Job controller runs here: the test finishes Jobs itself by writing their status
(``Complete``/``Failed`` conditions), which is all the CronJob controller reads of them.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from api.meta import format_time, parse_time
from client.events import EventRecorder
from client.rest import ApiClient
from kubelite.testing import ComponentProcess
from kubelite.testing.waiting import WITHIN, Watcher
from services.controller_manager.cronjob import CRONJOBS, JOBS, CronJobController
from services.controller_manager.cronjob_schedule import (
    SCHEDULED_TIMESTAMP_ANNOTATION,
    job_name,
)
from services.controller_manager.informers import SharedInformers
from tests.controller_manager.harness import EVENTS
from tests.factories import cron_job, job

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

Obj = dict[str, Any]
NS = "default"
PAD = timedelta(milliseconds=100)
"""The controller wakes 100 ms after an activation (Kubernetes' nextScheduleDelta)."""


class VirtualClock:
    """The controller's ``Clock`` in virtual time: stands still until the test advances it, and
    tells the test which wake-ups the controller has armed."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._timers: list[tuple[datetime, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._armed = asyncio.Event()

    def now(self) -> datetime:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        due = self._now + timedelta(seconds=max(0.0, delay))
        heapq.heappush(self._timers, (due, next(self._seq), callback))
        self._armed.set()

    async def armed_for(self, when: datetime) -> None:
        """Return once a wake-up is armed for ``when`` (the controller decided to wait)."""
        async with asyncio.timeout(WITHIN):
            while all(due != when for due, _, _ in self._timers):
                self._armed.clear()
                await self._armed.wait()

    def advance_to(self, instant: datetime) -> None:
        """Move on to ``instant``, firing every wake-up that came due, in order."""
        assert instant >= self._now, "virtual time does not go back"
        self._now = instant
        while self._timers and self._timers[0][0] <= instant:
            _, _, callback = heapq.heappop(self._timers)
            callback()


@dataclass
class Rig:
    client: ApiClient
    clock: VirtualClock
    _running: list[Any] = field(default_factory=list)

    async def start_controller(self) -> None:
        informers = SharedInformers(self.client)
        recorder = EventRecorder(self.client, component="cronjob-controller")
        controller = CronJobController(
            client=self.client, informers=informers, recorder=recorder, clock=self.clock
        )
        informers.start()
        tasks = [recorder.start(), asyncio.create_task(controller.run(), name="cronjob")]
        self._running = [informers, recorder, tasks]

    async def stop_controller(self) -> None:
        informers, recorder, tasks = self._running
        await recorder.flush()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await informers.stop()
        self._running = []

    async def create(self, body: Obj) -> tuple[Obj, datetime]:
        """Create the CronJob; it and its first activation after creation (minute schedules)."""
        cj = await self.client.create(CRONJOBS, body, namespace=NS)
        created = parse_time(cj["metadata"]["creationTimestamp"])
        return cj, created.replace(second=0) + timedelta(minutes=1)

    async def finish(self, name: str, condition: str = "Complete") -> None:
        """Do the Job controller's part: the Job ran and finished."""
        j = await self.client.get(JOBS, name, namespace=NS)
        start = parse_time(j["metadata"]["creationTimestamp"])
        status = j.setdefault("status", {})
        status["startTime"] = format_time(start)
        status["conditions"] = [{"type": condition, "status": "True"}]
        if condition == "Complete":
            status["completionTime"] = format_time(start + timedelta(seconds=5))
            status["succeeded"] = 1
        else:
            status["failed"] = 1
        await self.client.update_status(JOBS, j, namespace=NS)


@pytest.fixture
async def rig(kubelite_apiserver: ComponentProcess) -> AsyncIterator[Rig]:
    client = ApiClient(server=kubelite_apiserver.url)
    rig = Rig(client, VirtualClock(datetime.now(UTC)))
    await rig.start_controller()
    try:
        yield rig
    finally:
        if rig._running:
            await rig.stop_controller()
        await client.close()


def names(jobs: list[Obj]) -> set[str]:
    return {j["metadata"]["name"] for j in jobs}


def event_count(events: list[Obj], reason: str) -> int:
    return sum(int(e.get("count") or 1) for e in events if e.get("reason") == reason)


def status_of(cronjobs: Watcher, name: str = "c") -> Obj:
    return (cronjobs.get(f"{NS}/{name}") or {}).get("status") or {}


def active_names(cronjobs: Watcher, name: str = "c") -> list[str]:
    return [ref["name"] for ref in status_of(cronjobs, name).get("active") or []]


async def test_forbid_skips_activations_while_a_job_runs_then_runs_the_next(rig: Rig) -> None:
    running_at_once: list[int] = []

    def track(_type: str, _job: Obj) -> None:
        unfinished = [j for j in jobs.objects() if not (j.get("status") or {}).get("conditions")]
        running_at_once.append(len(unfinished))

    async with (
        Watcher(rig.client, JOBS, namespace=NS, on_event=track) as jobs,
        Watcher(rig.client, CRONJOBS, namespace=NS) as cronjobs,
        Watcher(rig.client, EVENTS, namespace=NS) as events,
    ):
        _, m1 = await rig.create(cron_job("c", schedule="*/1 * * * *", concurrencyPolicy="Forbid"))
        first = job_name("c", m1)
        await rig.clock.armed_for(m1 + PAD)
        rig.clock.advance_to(m1 + timedelta(seconds=1))
        await cronjobs.wait_until(lambda _o: active_names(cronjobs) == [first], what="c-M1 active")
        assert status_of(cronjobs)["lastScheduleTime"] == format_time(m1)

        for skipped in (1, 2, 3):  # three activations pass while the first Job runs
            at = m1 + timedelta(minutes=skipped)
            await rig.clock.armed_for(at + PAD)
            rig.clock.advance_to(at + timedelta(seconds=1))
            await events.wait_until(
                lambda o, n=skipped: event_count(o, "JobAlreadyActive") >= n,
                what=f"JobAlreadyActive x{skipped}",
            )
        assert names(jobs.objects()) == {first}

        await rig.finish(first)
        latest = job_name("c", m1 + timedelta(minutes=3))
        await cronjobs.wait_until(
            lambda _o: active_names(cronjobs) == [latest], what="the latest activation started"
        )
    assert names(jobs.objects()) == {first, latest}  # the skipped minutes never ran
    assert max(running_at_once) == 1
    assert status_of(cronjobs)["lastSuccessfulTime"]
    messages = {e["reason"]: e["message"] for e in events.objects()}
    assert messages["JobAlreadyActive"] == (
        "Not starting job because prior execution is running and concurrency policy is Forbid"
    )
    assert messages["SawCompletedJob"] == f"Saw completed job: {first}, condition: Complete"


async def test_replace_deletes_the_running_job_and_starts_the_new_one(rig: Rig) -> None:
    async with (
        Watcher(rig.client, JOBS, namespace=NS) as jobs,
        Watcher(rig.client, CRONJOBS, namespace=NS) as cronjobs,
        Watcher(rig.client, EVENTS, namespace=NS) as events,
    ):
        body = cron_job("c", schedule="*/1 * * * *", concurrencyPolicy="Replace")
        _, m1 = await rig.create(body)
        await rig.clock.armed_for(m1 + PAD)
        rig.clock.advance_to(m1 + timedelta(seconds=1))
        first, second = job_name("c", m1), job_name("c", m1 + timedelta(minutes=1))
        await cronjobs.wait_until(lambda _o: active_names(cronjobs) == [first], what="c-M1")

        await rig.clock.armed_for(m1 + timedelta(minutes=1) + PAD)
        rig.clock.advance_to(m1 + timedelta(minutes=1, seconds=1))
        await cronjobs.wait_until(lambda _o: active_names(cronjobs) == [second], what="c-M2")
        await jobs.wait_until(lambda o: names(o) == {second}, what="c-M1 deleted")
        wanted = {
            f"Created job {first}": "SuccessfulCreate",
            f"Deleted job {first}": "SuccessfulDelete",
            f"Created job {second}": "SuccessfulCreate",
        }
        await events.wait_until(
            lambda o: wanted.items() <= {e["message"]: e["reason"] for e in o}.items(),
            what="the create, delete, create events",
        )


async def test_allow_runs_jobs_side_by_side(rig: Rig) -> None:
    async with Watcher(rig.client, CRONJOBS, namespace=NS) as cronjobs:
        _, m1 = await rig.create(cron_job("c", schedule="*/1 * * * *"))  # Allow by default
        expected: list[str] = []
        for k in range(3):
            at = m1 + timedelta(minutes=k)
            expected.append(job_name("c", at))
            await rig.clock.armed_for(at + PAD)
            rig.clock.advance_to(at + timedelta(seconds=1))
            await cronjobs.wait_until(
                lambda _o, want=list(expected): active_names(cronjobs) == want,
                what=f"{len(expected)} jobs active",
            )
    listed = await rig.client.list(JOBS, namespace=NS)
    assert names(listed["items"]) == set(expected)
    job_ = next(j for j in listed["items"] if j["metadata"]["name"] == expected[0])
    assert job_["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert job_["metadata"]["ownerReferences"][0]["controller"] is True
    assert job_["metadata"]["annotations"][SCHEDULED_TIMESTAMP_ANNOTATION] == format_time(m1)


async def test_starting_deadline_skips_a_late_activation_and_runs_the_next(rig: Rig) -> None:
    async with (
        Watcher(rig.client, JOBS, namespace=NS) as jobs,
        Watcher(rig.client, EVENTS, namespace=NS) as events,
    ):
        body = cron_job("c", schedule="*/1 * * * *", startingDeadlineSeconds=20)
        _, m1 = await rig.create(body)
        await rig.clock.armed_for(m1 + PAD)
        rig.clock.advance_to(m1 + timedelta(seconds=45))  # the controller "was away" 45 s
        missed = await events.wait_until(
            lambda o: event_count(o, "MissSchedule") >= 1, what="MissSchedule"
        )
        message = next(e["message"] for e in missed if e["reason"] == "MissSchedule")
        assert message == (
            "Missed scheduled time to start a job: " + m1.strftime("%a, %d %b %Y %H:%M:%S +0000")
        )
        assert jobs.objects() == []

        m2 = m1 + timedelta(minutes=1)
        await rig.clock.armed_for(m2 + PAD)
        rig.clock.advance_to(m2 + timedelta(seconds=10))  # within the deadline
        await jobs.wait_until(lambda o: names(o) == {job_name("c", m2)}, what="c-M2 only")


async def test_suspended_cronjob_starts_nothing_until_resumed(rig: Rig) -> None:
    async with (
        Watcher(rig.client, JOBS, namespace=NS) as jobs,
        Watcher(rig.client, CRONJOBS, namespace=NS) as cronjobs,
    ):
        cj, m1 = await rig.create(cron_job("c", schedule="*/1 * * * *", suspend=True))
        rig.clock.advance_to(m1 + timedelta(minutes=2, seconds=1))  # M1, M2, M3 pass
        # A Job run by hand (kubectl create job --from=cronjob/c) finishing makes the controller
        # sync and write status while suspended: that one write would carry any Job it started.
        manual = job("manual")
        manual["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "CronJob", "name": "c",
             "uid": cj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True},
        ]  # fmt: skip
        await rig.client.create(JOBS, manual, namespace=NS)
        await rig.finish("manual")
        await cronjobs.wait_until(
            lambda _o: status_of(cronjobs).get("lastSuccessfulTime") is not None,
            what="the suspended CronJob saw the manual Job succeed",
        )
        assert "lastScheduleTime" not in status_of(cronjobs)
        assert names(jobs.objects()) == {"manual"}

        await rig.client.patch(CRONJOBS, "c", {"spec": {"suspend": False}}, namespace=NS)
        latest = job_name("c", m1 + timedelta(minutes=2))
        await cronjobs.wait_until(
            lambda _o: active_names(cronjobs) == [latest], what="resumed: the latest activation"
        )
    assert names(jobs.objects()) == {"manual", latest}


async def test_history_limits_keep_the_newest_finished_jobs(rig: Rig) -> None:
    async with (
        Watcher(rig.client, JOBS, namespace=NS) as jobs,
        Watcher(rig.client, CRONJOBS, namespace=NS) as cronjobs,
    ):
        body = cron_job(
            "c", schedule="*/1 * * * *", successfulJobsHistoryLimit=1, failedJobsHistoryLimit=1
        )
        _, m1 = await rig.create(body)
        runs = [job_name("c", m1 + timedelta(minutes=k)) for k in range(4)]
        for k, outcome in enumerate(("Complete", "Complete", "Failed", "Failed")):
            at = m1 + timedelta(minutes=k)
            await rig.clock.armed_for(at + PAD)
            rig.clock.advance_to(at + timedelta(seconds=1))
            await cronjobs.wait_until(
                lambda _o, n=runs[k]: active_names(cronjobs) == [n], what=f"{runs[k]} active"
            )
            await rig.finish(runs[k], outcome)
            await cronjobs.wait_until(lambda _o: active_names(cronjobs) == [], what="finished")
        await jobs.wait_until(
            lambda o: names(o) == {runs[1], runs[3]},
            what="the newest succeeded and the newest failed job kept",
        )


async def test_time_zone_tokyo_nine_oclock_is_midnight_utc(rig: Rig) -> None:
    async with Watcher(rig.client, CRONJOBS, namespace=NS) as cronjobs:
        cj, _ = await rig.create(cron_job("c", schedule="0 9 * * *", timeZone="Asia/Tokyo"))
        created = parse_time(cj["metadata"]["creationTimestamp"])
        midnight = created.replace(hour=0, minute=0, second=0) + timedelta(days=1)
        await rig.clock.armed_for(midnight + PAD)  # not 09:00 UTC
        rig.clock.advance_to(midnight + timedelta(seconds=1))
        run = job_name("c", midnight)
        await cronjobs.wait_until(lambda _o: active_names(cronjobs) == [run], what="09:00 JST")
    created_job = await rig.client.get(JOBS, run, namespace=NS)
    stamp = created_job["metadata"]["annotations"][SCHEDULED_TIMESTAMP_ANNOTATION]
    assert stamp == (midnight + timedelta(hours=9)).strftime("%Y-%m-%dT09:00:00+09:00")
    assert status_of(cronjobs)["lastScheduleTime"] == format_time(midnight)


async def test_restarted_controller_does_not_create_the_same_run_twice(rig: Rig) -> None:
    async with (
        Watcher(rig.client, JOBS, namespace=NS) as jobs,
        Watcher(rig.client, CRONJOBS, namespace=NS) as cronjobs,
        Watcher(rig.client, EVENTS, namespace=NS) as events,
    ):
        cj, m1 = await rig.create(cron_job("c", schedule="*/1 * * * *"))
        await rig.clock.armed_for(m1 + PAD)
        await rig.stop_controller()
        # The old controller "crashed" right after creating the M1 Job, before its status write.
        run_name = job_name("c", m1)
        run = job(run_name)
        run["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "CronJob", "name": "c",
             "uid": cj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True},
        ]  # fmt: skip
        made = await rig.client.create(JOBS, run, namespace=NS)

        rig.clock.advance_to(m1 + timedelta(seconds=1))
        await rig.start_controller()
        await cronjobs.wait_until(
            lambda _o: active_names(cronjobs) == [made["metadata"]["name"]],
            what="the existing M1 Job recorded as active",
        )
        assert status_of(cronjobs)["active"][0]["uid"] == made["metadata"]["uid"]
        assert status_of(cronjobs)["lastScheduleTime"] == format_time(m1)

        # and once more, now that the status is written: a new controller leaves it alone
        await rig.stop_controller()
        await rig.start_controller()
        m2 = m1 + timedelta(minutes=1)
        await rig.clock.armed_for(m2 + PAD)
        rig.clock.advance_to(m2 + timedelta(seconds=1))
        await cronjobs.wait_until(lambda _o: len(active_names(cronjobs)) == 2, what="c-M2")
        # Events are written in order, and the controllers before were flushed when stopped.
        await events.wait_until(
            lambda o: any(e["message"] == f"Created job {job_name('c', m2)}" for e in o),
            what="SuccessfulCreate for M2",
        )
    assert names(jobs.objects()) == {job_name("c", m1), job_name("c", m2)}
    messages = [e["message"] for e in events.objects()]
    assert f"Created job {job_name('c', m1)}" not in messages
    assert f"Saw a job that the controller did not create or forgot: {run_name}" in messages
