"""The CronJob controller: creates a Job from ``jobTemplate`` at each activation of
``schedule`` — Kubernetes' cronjob controller v2 (``pkg/controller/cronjob``).

How a sync of one CronJob goes (level-triggered, from the caches; one status write at the end):

* **Its Jobs** are those whose controller reference is this CronJob (the owner-uid index).
  A running Job missing from ``status.active`` is checked against a fresh read of the CronJob
  and, if still missing, reported (``UnexpectedJob``: a Job made by hand, e.g. ``kubectl create
  job --from=cronjob/x``). A finished Job (``Complete`` or ``Failed`` condition) leaves
  ``active`` (``SawCompletedJob`` "Saw completed job: NAME, condition: Complete");
  a succeeded one moves ``lastSuccessfulTime`` to its ``completionTime``. An ``active`` entry
  whose Job is gone from the cache and from a fresh read leaves too (``MissingJob``).
* **History**: finished Jobs beyond ``successfulJobsHistoryLimit`` / ``failedJobsHistoryLimit``
  are deleted oldest start first, with background propagation (``SuccessfulDelete`` "Deleted
  job NAME").
* **Nothing more** while the CronJob is being deleted, its ``timeZone`` is unknown
  (``UnknownTimeZone``), it is ``suspend``-ed, or its schedule does not parse
  (``UnparseableSchedule``) or cannot be followed (``InvalidSchedule``).
* **The activation to run** is the most recent one since ``lastScheduleTime`` (or creation)
  and no older than ``startingDeadlineSeconds`` (``cronjob_schedule.most_recent``); earlier
  missed ones are never run. More than 100 missed: ``TooManyMissedTimes``. A most recent
  activation the deadline excluded is reported (``MissSchedule`` "Missed scheduled time to start
  a job: <RFC1123Z>") and not run. One already run (same ``lastScheduleTime``, or its Job in
  ``active``) is not run again.
* **Concurrency**: ``Forbid`` skips the activation while any Job is active (``JobAlreadyActive``);
  ``Replace`` deletes the active Jobs (background propagation) and then creates; ``Allow`` just
  creates. The Job is named ``<cronjob>-<minutes since the epoch>``, so creating it twice is
  ``AlreadyExists``: ours (a crash between create and status write) is put back in ``active``,
  someone else's is left alone. ``SuccessfulCreate`` "Created job NAME"; the status gets the Job
  in ``active`` and the activation as ``lastScheduleTime``.
* **Next wake-up** at the next activation (+100 ms), through the injected ``Clock``
  (``services.controller_manager.clock``), so tests move through hours of schedule in virtual
  time. A changed ``schedule``/``timeZone`` re-arms it; any other change syncs at once.

Events come from ``cronjob-controller`` with Kubernetes' reasons and wording.

Limits: the status write is a compare-and-swap on the cached CronJob, so a stale cache costs a
retry, never a lost update; with ``Forbid``, a Job whose creation the caches have not yet seen
can (as in Kubernetes) let a second one start — the deterministic names make that rare and
never a duplicate of the same activation. Schedules without ``timeZone`` run in UTC
(``cronjob_schedule``).
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from api.errors import AlreadyExists, Forbidden, NotFound, StatusError
from api.meta import format_time, parse_time
from api.registry import REGISTRY
from client.cache import object_key
from client.controller import Controller
from client.events import EventRecorder
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.clock import Clock, SystemClock
from services.controller_manager.controller_ref import (
    controller_ref,
    is_being_deleted,
    resolve_controller_ref,
)
from services.controller_manager.cronjob_schedule import (
    InvalidSchedule,
    cron_schedule,
    format_rfc1123z,
    job_from_template,
    job_name,
    load_zone,
    most_recent,
    next_wake,
)
from services.controller_manager.informers import OWNER_UID_INDEX, SharedInformers

__all__ = ["CRONJOBS", "JOBS", "CronJobController", "finished_condition"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CRONJOBS = REGISTRY.require("batch", "CronJob")
JOBS = REGISTRY.require("batch", "Job")


def finished_condition(job: Obj) -> str | None:
    """``Complete`` or ``Failed`` if the Job has finished (that condition is True), else None."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def _start_order(job: Obj) -> tuple[bool, str, str]:
    """Kubernetes' ``byJobStartTime``: by start time, never-started last, then by name."""
    start = (job.get("status") or {}).get("startTime")
    return (start is None, str(start or ""), str(job["metadata"]["name"]))


def _job_ref(job: Obj) -> Obj:
    meta = job["metadata"]
    return {
        "kind": "Job",
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "uid": meta.get("uid"),
        "apiVersion": JOBS.api_version,
        "resourceVersion": meta.get("resourceVersion"),
    }


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, StatusError) else str(exc)


@dataclass(slots=True)
class _Sync:
    """One sync's working copy of the CronJob, whether its status changed, when to wake."""

    cronjob: Obj
    changed: bool = False
    wake: datetime | None = None

    @property
    def status(self) -> Obj:
        status: Obj = self.cronjob.setdefault("status", {})
        return status

    def active(self) -> list[Obj]:
        return list(self.status.get("active") or [])

    def has_active(self, uid: str | None = None, *, name: str | None = None) -> bool:
        return any(
            (uid is not None and ref.get("uid") == uid)
            or (name is not None and ref.get("name") == name)
            for ref in self.active()
        )

    def drop_active(self, uid: str | None) -> None:
        kept = [ref for ref in self.active() if ref.get("uid") != uid]
        if len(kept) == len(self.active()):
            return
        if kept:
            self.status["active"] = kept
        else:
            self.status.pop("active", None)
        self.changed = True


class CronJobController:
    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        clock: Clock | None = None,
        workers: int = 5,
    ) -> None:
        self.name = "cronjob"
        self.client = client
        self.recorder = recorder
        self.clock: Clock = clock or SystemClock()
        self.workers = workers
        self.cronjobs = informers.get(CRONJOBS)
        self.jobs = informers.get(JOBS)
        self.queue: WorkQueue[str] = WorkQueue(name="cronjob")
        self._wakes: dict[str, datetime] = {}
        self.cronjobs.add_handler(
            on_add=self._enqueue, on_update=self._cronjob_updated, on_delete=self._enqueue
        )
        self.jobs.add_handler(
            on_add=self._job_added, on_update=self._job_updated, on_delete=self._job_deleted
        )

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.cronjobs, self.jobs],
        ).run()

    # -- wake-ups on the clock ------------------------------------------------------------

    def _wake_at(self, key: str, when: datetime) -> None:
        """Sync ``key`` once the clock reads ``when``; an earlier pending wake-up wins."""
        pending = self._wakes.get(key)
        if pending is not None and pending <= when:
            return
        delay = (when - self.clock.now()).total_seconds()
        if delay <= 0:
            self._wakes.pop(key, None)
            self.queue.add(key)
            return
        self._wakes[key] = when

        def fire() -> None:
            if self._wakes.get(key) == when:
                del self._wakes[key]
                self.queue.add(key)

        self.clock.call_later(delay, fire)

    # -- event handlers: events -> CronJob keys -------------------------------------------

    def _enqueue(self, cronjob: Obj) -> None:
        self.queue.add(object_key(cronjob))

    def _cronjob_updated(self, old: Obj, new: Obj) -> None:
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if (old_spec.get("schedule"), old_spec.get("timeZone")) == (
            new_spec.get("schedule"),
            new_spec.get("timeZone"),
        ):
            self._enqueue(new)
            return
        # A new schedule: look again at its next activation, not now.
        try:
            schedule, zone = cron_schedule(new)
        except ValueError:
            self.recorder.event(
                new, "Warning", "UnParseableCronJobSchedule",
                f"unparseable schedule for cronjob: {new_spec.get('schedule')}",
            )  # fmt: skip
            return
        wake = next_wake(new, self.clock.now(), schedule=schedule, zone=zone)
        if wake is not None:
            self._wake_at(object_key(new), wake)

    def _owner_of(self, job: Obj) -> Obj | None:
        namespace = job["metadata"].get("namespace") or ""
        return resolve_controller_ref(
            controller_ref(job), namespace=namespace, rt=CRONJOBS, owners=self.cronjobs
        )

    def _job_added(self, job: Obj) -> None:
        owner = self._owner_of(job)
        if owner is not None:
            self._enqueue(owner)

    def _job_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return  # a resync replay
        if controller_ref(old) != controller_ref(new):
            self._job_added(old)
        self._job_added(new)

    def _job_deleted(self, job: Obj) -> None:
        self._job_added(job)

    # -- reconcile ------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        cached = self.cronjobs.get(key)
        if cached is None:
            self._wakes.pop(key, None)
            return
        uid = cached["metadata"].get("uid")
        jobs = [
            j
            for j in self.jobs.by_index(OWNER_UID_INDEX, str(uid))
            if (controller_ref(j) or {}).get("uid") == uid
        ]
        sync = _Sync(copy.deepcopy(cached))
        error: Exception | None = None
        try:
            await self._adopt_fresh_status(sync, jobs)
            self._observe_finished(sync, jobs)
            await self._drop_missing(sync, jobs)
            await self._cleanup_history(sync, jobs)
            await self._schedule(sync)
        except (ConnectionError, StatusError) as exc:
            error = exc
        if sync.changed:
            await self.client.update_status(CRONJOBS, sync.cronjob)
        if error is not None:
            raise error
        if sync.wake is not None:
            self._wake_at(key, sync.wake)

    async def _adopt_fresh_status(self, sync: _Sync, jobs: list[Obj]) -> None:
        """A running Job not in ``active``: our cache of the CronJob may lag our own status
        write; read it fresh before calling the Job unexpected."""
        for job in jobs:
            meta = job["metadata"]
            if finished_condition(job) or sync.has_active(meta.get("uid")):
                continue
            cmeta = sync.cronjob["metadata"]
            fresh = await self.client.get(CRONJOBS, cmeta["name"], namespace=cmeta["namespace"])
            if fresh["metadata"].get("uid") == cmeta.get("uid"):
                sync.cronjob = fresh
            if not sync.has_active(meta.get("uid")):
                self.recorder.event(
                    sync.cronjob, "Warning", "UnexpectedJob",
                    f"Saw a job that the controller did not create or forgot: {meta['name']}",
                )  # fmt: skip

    def _observe_finished(self, sync: _Sync, jobs: list[Obj]) -> None:
        for job in jobs:
            condition = finished_condition(job)
            if condition is None:
                continue
            meta = job["metadata"]
            if sync.has_active(meta.get("uid")):
                sync.drop_active(meta.get("uid"))
                self.recorder.event(
                    sync.cronjob, "Normal", "SawCompletedJob",
                    f"Saw completed job: {meta['name']}, condition: {condition}",
                )  # fmt: skip
            completed = (job.get("status") or {}).get("completionTime")
            if condition != "Complete" or not completed:
                continue
            last = sync.status.get("lastSuccessfulTime")
            if last is None or parse_time(completed) > parse_time(last):
                sync.status["lastSuccessfulTime"] = completed
                sync.changed = True

    async def _drop_missing(self, sync: _Sync, jobs: list[Obj]) -> None:
        """An ``active`` entry whose Job the cache lacks: gone for real only if a read says so."""
        seen = {j["metadata"].get("uid") for j in jobs}
        for ref in sync.active():
            if ref.get("uid") in seen:
                continue
            try:
                await self.client.get(JOBS, str(ref["name"]), namespace=ref.get("namespace"))
            except NotFound:
                self.recorder.event(
                    sync.cronjob, "Normal", "MissingJob", f"Active job went missing: {ref['name']}"
                )
                sync.drop_active(ref.get("uid"))

    async def _cleanup_history(self, sync: _Sync, jobs: list[Obj]) -> None:
        spec = sync.cronjob.get("spec") or {}
        for condition, limit_field in (
            ("Complete", "successfulJobsHistoryLimit"),
            ("Failed", "failedJobsHistoryLimit"),
        ):
            limit = spec.get(limit_field)
            if limit is None:
                continue
            finished = sorted((j for j in jobs if finished_condition(j) == condition),
                              key=_start_order)  # fmt: skip
            for job in finished[: max(0, len(finished) - int(limit))]:
                await self._delete_job(sync, job)

    async def _delete_job(self, sync: _Sync, job: Obj) -> None:
        meta = job["metadata"]
        try:
            await self.client.delete(
                JOBS, meta["name"], namespace=meta.get("namespace"), propagation_policy="Background"
            )
        except NotFound:
            pass  # already gone: what we wanted
        except (ConnectionError, StatusError) as exc:
            self.recorder.event(
                sync.cronjob, "Warning", "FailedDelete", f"Deleted job: {_message(exc)}"
            )
            raise
        sync.drop_active(meta.get("uid"))
        self.recorder.event(
            sync.cronjob, "Normal", "SuccessfulDelete", f"Deleted job {meta['name']}"
        )

    async def _schedule(self, sync: _Sync) -> None:
        """Start the Job for the most recent activation, if it is due and allowed."""
        cronjob = sync.cronjob
        spec = cronjob.get("spec") or {}
        if is_being_deleted(cronjob):
            return
        zone_name = spec.get("timeZone")
        try:
            load_zone(zone_name)
        except ValueError as exc:
            self.recorder.event(
                cronjob, "Warning", "UnknownTimeZone", f'invalid timeZone: "{zone_name}": {exc}'
            )
            return
        if spec.get("suspend"):
            return
        try:
            schedule, zone = cron_schedule(cronjob)
        except ValueError as exc:
            self.recorder.event(
                cronjob, "Warning", "UnparseableSchedule",
                f'unparseable schedule: "{spec.get("schedule")}" : {exc}',
            )  # fmt: skip
            return
        now = self.clock.now()
        try:
            recent = most_recent(cronjob, now, schedule=schedule, zone=zone, with_deadline=True)
        except InvalidSchedule as exc:
            self.recorder.event(
                cronjob, "Warning", "InvalidSchedule",
                f"invalid schedule: {spec.get('schedule')} : {exc}",
            )  # fmt: skip
            return
        sync.wake = next_wake(cronjob, now, schedule=schedule, zone=zone)
        if recent.time is None:
            self._report_missed(cronjob, now, schedule=schedule, zone=zone)
            return
        if recent.many:
            self.recorder.event(
                cronjob, "Warning", "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds "
                "or check clock skew",
            )  # fmt: skip
        scheduled = recent.time
        name = job_name(cronjob["metadata"]["name"], scheduled)
        last = sync.status.get("lastScheduleTime")
        if sync.has_active(name=name) or (last and parse_time(last) == scheduled):
            return  # this activation already ran
        policy = spec.get("concurrencyPolicy") or "Allow"
        if policy == "Forbid" and sync.active():
            self.recorder.event(
                cronjob, "Normal", "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy "
                "is Forbid",
            )  # fmt: skip
            return
        if policy == "Replace":
            await self._replace_active(sync)
        await self._create_job(sync, scheduled)

    def _report_missed(self, cronjob: Obj, now: datetime, **how: Any) -> None:
        """The deadline hid the most recent activation: say so (``MissSchedule``)."""
        if (cronjob.get("spec") or {}).get("startingDeadlineSeconds") is None:
            return
        try:
            missed = most_recent(cronjob, now, with_deadline=False, **how).time
        except InvalidSchedule:
            return
        last = (cronjob.get("status") or {}).get("lastScheduleTime")
        if missed is None or (last and parse_time(last) == missed):
            return
        self.recorder.event(
            cronjob, "Warning", "MissSchedule",
            f"Missed scheduled time to start a job: {format_rfc1123z(missed)}",
        )  # fmt: skip

    async def _replace_active(self, sync: _Sync) -> None:
        for ref in sync.active():
            try:
                job = await self.client.get(JOBS, str(ref["name"]), namespace=ref.get("namespace"))
            except (ConnectionError, StatusError) as exc:
                self.recorder.event(
                    sync.cronjob, "Warning", "FailedGet", f"Get job: {_message(exc)}"
                )
                raise
            await self._delete_job(sync, job)

    async def _create_job(self, sync: _Sync, scheduled: datetime) -> None:
        cronjob = sync.cronjob
        body = job_from_template(cronjob, scheduled, cronjob_rt=CRONJOBS)
        namespace = cronjob["metadata"]["namespace"]
        try:
            job = await self.client.create(JOBS, body, namespace=namespace)
        except AlreadyExists:
            job = await self.client.get(JOBS, body["metadata"]["name"], namespace=namespace)
            ours = (controller_ref(job) or {}).get("uid") == cronjob["metadata"].get("uid")
            if not ours or sync.has_active(job["metadata"].get("uid")):
                return  # someone else's Job, or already recorded
            log.info("cronjob %s/%s: job %s already exists; recording it as active",
                     namespace, cronjob["metadata"]["name"], job["metadata"]["name"])  # fmt: skip
        except Forbidden as exc:
            if not any(c.get("reason") == "NamespaceTerminating" for c in exc.causes):
                self.recorder.event(
                    cronjob, "Warning", "FailedCreate", f"Error creating job: {_message(exc)}"
                )
            raise
        except (ConnectionError, StatusError) as exc:
            self.recorder.event(
                cronjob, "Warning", "FailedCreate", f"Error creating job: {_message(exc)}"
            )
            raise
        else:
            self.recorder.event(
                cronjob, "Normal", "SuccessfulCreate", f"Created job {job['metadata']['name']}"
            )
        sync.status["active"] = [*sync.active(), _job_ref(job)]
        sync.status["lastScheduleTime"] = format_time(scheduled)
        sync.changed = True
