"""The job controller: runs a batch/v1 Job's pods to completion, as ``pkg/controller/job`` does.

Why: a Job is the other half of the workload API — pods that are meant to *end*. Kubernetes'
controller decides how many pods run, when the Job is done or has failed, and counts every
finished pod exactly once even across its own crashes; kubelite's follows it rule for rule.

Per sync (level-triggered from the informer caches, one key per Job):

* **Pods** are the ones the Job controls (``controller_ref.claim`` by the Job's selector,
  terminal pods included). New pods come from the template with the tracking finalizer
  (``job_tracking``), a controller reference, ``generateName: <job>-``; at most
  ``parallelism`` run, never more than the completions still missing; creations go in slow-start
  batches (1, 2, 4, ...) under expectations, as the replica-set controller's do.
* **Indexed** (``completionMode: Indexed``): each pod gets an index (annotation and label
  ``batch.kubernetes.io/job-completion-index``, ``hostname: <job>-<index>``,
  ``generateName: <job>-<index>-``, and env ``JOB_COMPLETION_INDEX`` from the annotation by
  ``fieldRef``); the lowest indexes neither succeeded nor running are started first, and
  ``status.completedIndexes`` records the succeeded ones ("0-2,5"). ``backoffLimitPerIndex``
  counts failures per index (annotation ``batch.kubernetes.io/job-index-failure-count`` on the
  replacement pod); a failed index is in ``status.failedIndexes`` and more than
  ``maxFailedIndexes`` of them fail the Job.
* **Failure**: more than ``backoffLimit`` failed pods → ``BackoffLimitExceeded``; past
  ``activeDeadlineSeconds`` since ``startTime`` → ``DeadlineExceeded``; a ``podFailurePolicy``
  ``FailJob`` rule → ``PodFailurePolicy``. The Job first gets ``FailureTarget``, its active pods
  are deleted, and ``Failed`` follows once no pod is terminating or uncounted. A failed pod's
  replacement waits the back-off (``job_failure_policy.BackoffStore``: 10 s doubling, 10 min cap).
* **Success**: ``completions`` succeeded (or, without completions, one succeeded and none
  active) → ``SuccessCriteriaMet`` (reason ``CompletionsReached``), then ``Complete`` with
  ``completionTime``; a ``successPolicy`` rule met (Indexed) → the same with reason
  ``SuccessPolicy``, its remaining pods deleted.
* **Suspend**: active pods are deleted, condition ``Suspended`` (``JobSuspended``); resuming
  sets it False (``JobResumed``) and resets ``startTime``.
* ``podReplacementPolicy: Failed`` (or a ``podFailurePolicy``): a terminating pod is replaced
  only once it is ``Failed``; ``status.terminating`` counts pods being deleted.
* **Status**: ``active``, ``ready``, ``terminating``, ``succeeded``, ``failed``, ``startTime``,
  ``uncountedTerminatedPods``, conditions — written with the Job's resourceVersion (a stale
  cache gets a Conflict and the key is retried).
* **Orphans**: a pod with the tracking finalizer whose Job is gone or finished gets its
  finalizer removed (a second queue), so deleting a Job never leaves pods stuck.

Events (component ``job-controller``): ``SuccessfulCreate`` "Created pod: NAME",
``FailedCreate``, ``SuccessfulDelete`` "Deleted pod: NAME", ``Completed`` "Job completed",
``BackoffLimitExceeded`` "Job has reached the specified backoff limit", ``DeadlineExceeded``
"Job was active longer than specified deadline", ``PodFailurePolicy``, ``Suspended``,
``Resumed``.

Limits: pod events are batched for one second per Job (Kubernetes' syncJobBatchPeriod);
``managedBy`` other than the built-in controller is not honoured; per-index back-off delays and
the delayed finalizer removal that carries the failure count to the replacement pod are
simplified: the count is read from the index's newest failed pod, which stays with the Job.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from datetime import timedelta
from typing import Any

from api.errors import NotFound, StatusError
from api.meta import format_time, parse_time
from api.selectors import label_selector_from_dict
from client.cache import object_key, split_key
from client.controller import Controller
from client.events import EventRecorder
from client.expectations import Expectations
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.clock import Clock, SystemClock
from services.controller_manager.controller_ref import (
    OwnerGone,
    claim,
    controller_ref,
    is_being_deleted,
    new_controller_ref,
    resolve_controller_ref,
)
from services.controller_manager.informers import SharedInformers
from services.controller_manager.job_failure_policy import (
    BackoffStore,
    fail_job_message,
    finished_time,
    is_pod_failed,
    match_pod_failure_policy,
    only_replace_failed_pods,
    past_backoff_limit_on_failure,
)
from services.controller_manager.job_indexes import (
    COMPLETION_INDEX_KEY,
    completion_index,
    parse_indexes,
)
from services.controller_manager.job_tracking import (
    JOB_TRACKING_FINALIZER,
    JOBS,
    FinalizerExpectations,
    JobSync,
    StatusTracker,
    ensure_condition,
    has_tracking_finalizer,
    new_condition,
)
from services.controller_manager.pod_state import is_active, is_ready
from services.controller_manager.replication import PODS, slow_start_batch

__all__ = ["JobController", "is_finished"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

SYNC_JOB_BATCH_PERIOD = 1.0
"""Kubernetes' syncJobBatchPeriod: pod events for one Job within a second make one sync."""
MAX_POD_CREATE_DELETE_PER_SYNC = 500
"""Kubernetes' MaxPodCreateDeletePerSync."""
INDEX_FAILURE_COUNT_KEY = "batch.kubernetes.io/job-index-failure-count"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"


def is_finished(job: Obj) -> bool:
    """Complete or Failed (True): the Job will never run another pod."""
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _spec(job: Obj) -> Obj:
    spec: Obj = job.get("spec") or {}
    return spec


def _suspended(job: Obj) -> bool:
    return bool(_spec(job).get("suspend"))


def _true_condition(job: Obj, type_: str) -> Obj | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


def _is_terminating(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return is_being_deleted(pod) and phase not in ("Succeeded", "Failed")


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, StatusError) else str(exc)


class JobController:
    """``await run()`` until cancelled."""

    name = "job"

    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        workers: int = 5,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.workers = workers
        self.clock = clock or SystemClock()
        self.pods = informers.get(PODS)
        self.jobs = informers.get(JOBS)
        self.queue: WorkQueue[str] = WorkQueue(name="job")
        self.orphans: WorkQueue[str] = WorkQueue(name="job-orphan-pod")
        self.expectations = Expectations()
        self.finalizers = FinalizerExpectations()
        self.backoffs = BackoffStore()
        self.tracker = StatusTracker(
            client=client,
            recorder=recorder,
            clock=self.clock,
            finalizers=self.finalizers,
            backoffs=self.backoffs,
        )
        self.jobs.add_handler(
            on_add=self._job_added, on_update=self._job_updated, on_delete=self._job_deleted
        )
        self.pods.add_handler(
            on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted
        )

    async def run(self) -> None:
        jobs = Controller(
            name="job",
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.pods, self.jobs],
        )
        orphans = Controller(
            name="job-orphan-pod",
            queue=self.orphans,
            reconcile=self.sync_orphan_pod,
            workers=1,
            wait_for=[self.pods, self.jobs],
        )
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(jobs.run(), name="job-controller")
            tasks.create_task(orphans.run(), name="job-orphan-pods")

    def requeue_after(self, key: str, delay: float) -> None:
        """Sync ``key`` again once ``delay`` seconds of the controller's clock have passed."""
        self.clock.call_later(delay, lambda: self.queue.add(key))

    # -- event handlers -------------------------------------------------------------------

    def _job_added(self, job: Obj) -> None:
        self.queue.add(object_key(job))

    def _job_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("uid") != new["metadata"].get("uid"):
            self._job_deleted(old)
        key = object_key(new)
        if is_finished(new):
            self._release_finished_pods(new)
        self.queue.add(key)

    def _job_deleted(self, job: Obj) -> None:
        key = object_key(job)
        self.expectations.forget(key)
        self.finalizers.forget(key)
        self.backoffs.forget(key)
        self._release_finished_pods(job)

    def _release_finished_pods(self, job: Obj) -> None:
        """A gone or finished Job's pods that still hold the finalizer go to the orphan queue."""
        uid = job["metadata"].get("uid")
        for pod in self.pods.by_index("namespace", job["metadata"].get("namespace") or ""):
            ref = controller_ref(pod)
            if ref is not None and ref.get("uid") == uid and has_tracking_finalizer(pod):
                self.orphans.add(object_key(pod))

    def _job_of(self, pod: Obj) -> Obj | None:
        namespace = pod["metadata"].get("namespace") or ""
        return resolve_controller_ref(
            controller_ref(pod), namespace=namespace, rt=JOBS, owners=self.jobs
        )

    def _is_job_pod(self, pod: Obj) -> bool:
        ref = controller_ref(pod)
        return ref is not None and ref.get("kind") == "Job" and ref.get("apiVersion") == "batch/v1"

    def _pod_added(self, pod: Obj) -> None:
        job = self._job_of(pod)
        if job is None:
            if self._is_job_pod(pod) and has_tracking_finalizer(pod):
                self.orphans.add(object_key(pod))
            return
        key = object_key(job)
        if is_being_deleted(pod):
            self.expectations.deletion_observed(key, object_key(pod))
        else:
            self.expectations.creation_observed(key)
        self.queue.add_after(key, SYNC_JOB_BATCH_PERIOD)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        job = self._job_of(new)
        if job is None:
            if self._is_job_pod(new) and has_tracking_finalizer(new):
                self.orphans.add(object_key(new))
            previous = self._job_of(old)
            if previous is not None:
                self.queue.add_after(object_key(previous), SYNC_JOB_BATCH_PERIOD)
            return
        key = object_key(job)
        if is_being_deleted(new) and not is_being_deleted(old):
            self.expectations.deletion_observed(key, object_key(new))
        if has_tracking_finalizer(old) and not has_tracking_finalizer(new):
            self.finalizers.observed(key, str(new["metadata"]["uid"]))
        if is_finished(job) and has_tracking_finalizer(new):
            self.orphans.add(object_key(new))
        self.queue.add_after(key, SYNC_JOB_BATCH_PERIOD)

    def _pod_deleted(self, pod: Obj) -> None:
        job = self._job_of(pod)
        if job is None:
            return
        key = object_key(job)
        self.expectations.deletion_observed(key, object_key(pod))
        self.finalizers.observed(key, str(pod["metadata"]["uid"]))
        self.queue.add_after(key, SYNC_JOB_BATCH_PERIOD)

    # -- orphan pods ----------------------------------------------------------------------

    async def sync_orphan_pod(self, key: str) -> None:
        """Remove the tracking finalizer of a pod whose Job is gone or finished."""
        pod = self.pods.get(key)
        if pod is None or not has_tracking_finalizer(pod):
            return
        if not self._is_job_pod(pod) and controller_ref(pod) is not None:
            return  # controlled by something else: not ours to touch
        job = self._job_of(pod)
        if job is not None and not is_finished(job):
            return  # its Job still counts it
        namespace, name = split_key(key)
        patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}
        try:
            await self.client.patch(PODS, name, patch, namespace=namespace, patch_type="strategic")
        except NotFound:
            return

    # -- reconcile ------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        cached = self.jobs.get(key)
        if cached is None:
            self.expectations.forget(key)
            self.finalizers.forget(key)
            self.backoffs.forget(key)
            return
        if is_finished(cached):
            self.backoffs.forget(key)
            return
        job = copy.deepcopy(cached)
        satisfied = self.expectations.satisfied(key)
        pods = await self._pods_for(job)
        if pods is None:
            return
        ctx = self._context(key, job, pods)
        active_pods = [p for p in pods if is_active(p)]
        active = len(active_pods)
        status = ctx.status
        new_succeeded, new_failed = self._new_finished_pods(ctx)
        succeeded = (
            int(status.get("succeeded") or 0) + len(new_succeeded) + len(ctx.uncounted_succeeded)
        )
        counted_failures = [p for p in new_failed if match_pod_failure_policy(job, p).counts]
        failed = int(status.get("failed") or 0) + len(counted_failures) + len(ctx.uncounted_failed)
        ready = sum(1 for p in active_pods if is_ready(p))
        now = self.clock.now()
        if not status.get("startTime") and not _suspended(job):
            status["startTime"] = format_time(now)
        ctx.new_backoff = self.backoffs.next_record(
            key,
            succeeded=[finished_time(p, default=now) for p in new_succeeded],
            failed=[finished_time(p, default=now) for p in new_failed],
        )
        self._judge_failure(ctx, failed=failed)
        if ctx.indexed:
            self._judge_indexes(ctx)
            succeeded = len(ctx.succeeded_indexes)
        suspend_changed = False
        manage_error: BaseException | None = None
        if ctx.finished_condition is not None:
            deleted, manage_error = await self._delete_pods(key, job, active_pods)
            if deleted != active or not satisfied:
                # pods may still hold finalizers or be missing from the cache: finish later
                ctx.finished_condition = None
            active -= deleted
            # the pods just deleted are terminating now: the finished condition waits for them
            ctx.terminating += deleted
        else:
            managed = False
            if satisfied and not is_being_deleted(job):
                active, manage_error = await self._manage(ctx, active_pods, succeeded=succeeded)
                managed = True
            completions = ctx.completions
            if completions is None:
                complete = succeeded > 0 and active == 0
            else:
                complete = succeeded >= completions and active == 0
            if complete:
                ctx.finished_condition = new_condition(
                    "SuccessCriteriaMet",
                    "True",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                    now,
                )
            elif managed:
                suspend_changed = self._note_suspension(ctx)
        needs_flush = suspend_changed or _differs(status, "active", active)
        needs_flush = needs_flush or status.get("ready") != ready
        needs_flush = needs_flush or status.get("terminating") != ctx.terminating
        _set_count(status, "active", active)
        status["ready"] = ready
        status["terminating"] = ctx.terminating
        await self.tracker.track(ctx, needs_flush=needs_flush)
        if manage_error is not None:
            raise manage_error

    async def _pods_for(self, job: Obj) -> list[Obj] | None:
        namespace = job["metadata"].get("namespace") or ""
        try:
            return await claim(
                self.client,
                owner=job,
                owner_rt=JOBS,
                child_rt=PODS,
                selector=label_selector_from_dict(_spec(job).get("selector")),
                candidates=self.pods.by_index("namespace", namespace),
                can_adopt=lambda: self._can_adopt(job),
            )
        except OwnerGone:
            return None

    async def _can_adopt(self, job: Obj) -> None:
        meta = job["metadata"]
        try:
            fresh = await self.client.get(JOBS, meta["name"], namespace=meta["namespace"])
        except NotFound:
            raise OwnerGone(meta["name"]) from None
        if fresh["metadata"].get("uid") != meta.get("uid") or is_being_deleted(fresh):
            raise OwnerGone(meta["name"])

    def _context(self, key: str, job: Obj, pods: list[Obj]) -> JobSync:
        status = job.setdefault("status", {})
        uncounted = status.setdefault("uncountedTerminatedPods", {})
        ctx = JobSync(
            key=key,
            job=job,
            pods=pods,
            expected_rm_finalizers=self.finalizers.expected(key),
            uncounted_succeeded=set(uncounted.get("succeeded") or []),
            uncounted_failed=set(uncounted.get("failed") or []),
            terminating=sum(1 for p in pods if _is_terminating(p)),
        )
        return ctx

    def _new_finished_pods(self, ctx: JobSync) -> tuple[list[Obj], list[Obj]]:
        """Finished pods still holding the finalizer and not yet recorded (valid index only)."""
        succeeded: list[Obj] = []
        failed: list[Obj] = []
        for pod in ctx.pods:
            uid = str(pod["metadata"]["uid"])
            if not has_tracking_finalizer(pod) or uid in ctx.expected_rm_finalizers:
                continue
            if ctx.indexed:
                ix = completion_index(pod)
                if ix is None or ix >= (ctx.completions or 0):
                    continue
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Succeeded" and uid not in ctx.uncounted_succeeded:
                succeeded.append(pod)
            elif is_pod_failed(pod, ctx.job) and uid not in ctx.uncounted_failed:
                failed.append(pod)
        return succeeded, failed

    def _judge_failure(self, ctx: JobSync, *, failed: int) -> None:
        """Set ``ctx.finished_condition`` when the Job has failed (or already met success)."""
        job, now = ctx.job, self.clock.now()
        met = _true_condition(job, "SuccessCriteriaMet")
        target = _true_condition(job, "FailureTarget")
        if met is not None:
            ctx.finished_condition = met
            return
        if target is not None:
            ctx.finished_condition = new_condition(
                "Failed", "True", target["reason"], target["message"], now
            )
            return
        message = fail_job_message(job, ctx.pods)
        if message is not None:
            ctx.finished_condition = new_condition(
                "FailureTarget", "True", "PodFailurePolicy", message, now
            )
            return
        backoff_limit = int(_spec(job).get("backoffLimit", 6))
        per_index = _spec(job).get("backoffLimitPerIndex") is not None
        if (not per_index and failed > backoff_limit) or past_backoff_limit_on_failure(
            job, ctx.pods
        ):
            ctx.finished_condition = new_condition(
                "FailureTarget",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
                now,
            )
            return
        deadline = _spec(job).get("activeDeadlineSeconds")
        start = (job.get("status") or {}).get("startTime")
        if deadline is None or not start or _suspended(job):
            return
        elapsed = (now - parse_time(str(start))) / timedelta(seconds=1)
        if elapsed >= int(deadline):
            ctx.finished_condition = new_condition(
                "FailureTarget",
                "True",
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
                now,
            )
        else:
            self.requeue_after(ctx.key, int(deadline) - elapsed)

    def _judge_indexes(self, ctx: JobSync) -> None:
        """Succeeded and failed indexes; the failures they imply; a met success policy."""
        job, completions = ctx.job, ctx.completions or 0
        status = ctx.status
        ctx.prev_succeeded_indexes = parse_indexes(status.get("completedIndexes"), completions)
        ctx.succeeded_indexes = set(ctx.prev_succeeded_indexes)
        for pod in ctx.pods:
            ix = completion_index(pod)
            phase = (pod.get("status") or {}).get("phase")
            if ix is not None and ix < completions and phase == "Succeeded":
                if has_tracking_finalizer(pod):
                    ctx.succeeded_indexes.add(ix)
        now = self.clock.now()
        if _spec(job).get("backoffLimitPerIndex") is not None:
            ctx.failed_indexes = self._failed_indexes(ctx)
            if ctx.finished_condition is None:
                max_failed = _spec(job).get("maxFailedIndexes")
                total_failed = len(ctx.failed_indexes)
                if max_failed is not None and total_failed > int(max_failed):
                    ctx.finished_condition = new_condition(
                        "FailureTarget",
                        "True",
                        "MaxFailedIndexesExceeded",
                        "Job has exceeded the specified maximal number of failed indexes",
                        now,
                    )
                elif total_failed and total_failed + len(ctx.succeeded_indexes) >= completions:
                    ctx.finished_condition = new_condition(
                        "FailureTarget", "True", "FailedIndexes", "Job has failed indexes", now
                    )
        if ctx.finished_condition is None:
            message = self._success_policy_met(ctx)
            if message is not None:
                ctx.finished_condition = new_condition(
                    "SuccessCriteriaMet", "True", "SuccessPolicy", message, now
                )

    def _failed_indexes(self, ctx: JobSync) -> set[int]:
        job, completions = ctx.job, ctx.completions or 0
        limit = int(_spec(job)["backoffLimitPerIndex"])
        failed = parse_indexes((job.get("status") or {}).get("failedIndexes"), completions)
        for pod in ctx.pods:
            ix = completion_index(pod)
            if ix is None or ix >= completions or not is_pod_failed(pod, job):
                continue
            if ix in ctx.succeeded_indexes:
                continue
            match = match_pod_failure_policy(job, pod)
            if match.action == "FailIndex" or (match.counts and _index_failures(pod) + 1 > limit):
                failed.add(ix)
        return failed

    def _success_policy_met(self, ctx: JobSync) -> str | None:
        rules = (_spec(ctx.job).get("successPolicy") or {}).get("rules") or []
        completions = ctx.completions or 0
        for rule in rules:
            wanted = (
                parse_indexes(rule["succeededIndexes"], completions)
                if rule.get("succeededIndexes")
                else set(range(completions))
            )
            done = wanted & ctx.succeeded_indexes
            count = rule.get("succeededCount")
            if (count is not None and len(done) >= int(count)) or (
                count is None and done == wanted
            ):
                return "Matched rules at index " + str(rules.index(rule))
        return None

    def _note_suspension(self, ctx: JobSync) -> bool:
        job, now = ctx.job, self.clock.now()
        conditions: list[Obj] = ctx.status.setdefault("conditions", [])
        if _suspended(job):
            changed = ensure_condition(
                conditions, "Suspended", "True", "JobSuspended", "Job suspended", now
            )
            if changed:
                self.recorder.event(job, "Normal", "Suspended", "Job suspended")
            return changed
        changed = ensure_condition(
            conditions, "Suspended", "False", "JobResumed", "Job resumed", now
        )
        if changed:
            self.recorder.event(job, "Normal", "Resumed", "Job resumed")
            # activeDeadlineSeconds counts the time the Job is continuously active
            ctx.status["startTime"] = format_time(now)
        return changed

    # -- pods -----------------------------------------------------------------------------

    async def _manage(
        self, ctx: JobSync, active_pods: list[Obj], *, succeeded: int
    ) -> tuple[int, BaseException | None]:
        """Create or delete pods toward the wanted number of active ones; (active, error)."""
        job, key = ctx.job, ctx.key
        active = len(active_pods)
        if _suspended(job):
            deleted, error = await self._delete_pods(key, job, active_pods)
            ctx.terminating += deleted
            return active - deleted, error
        parallelism = int(_spec(job).get("parallelism", 1))
        completions = ctx.completions
        if completions is None:
            want = active if succeeded > 0 else parallelism
        else:
            want = max(0, min(completions - succeeded, parallelism))
        surplus = self._surplus(ctx, active_pods, max(0, active - want))
        if surplus:
            deleted, error = await self._delete_pods(key, job, surplus)
            ctx.terminating += deleted
            return active - deleted, error
        terminating = ctx.terminating if only_replace_failed_pods(job) else 0
        diff = want - terminating - active
        if diff <= 0:
            return active, None
        if _spec(job).get("backoffLimitPerIndex") is None:
            remaining = ctx.new_backoff.remaining(self.clock)
            if remaining > 0:
                log.info(
                    "job %s: next pod waits %.0fs of failure back-off (%s)",
                    key,
                    remaining,
                    ctx.new_backoff,
                )
                self.requeue_after(key, remaining)
                return active, None
        diff = min(diff, MAX_POD_CREATE_DELETE_PER_SYNC)
        indexes: list[int | None] = [None] * diff
        if ctx.indexed:
            indexes = list(self._pending_indexes(ctx, active_pods, diff))
            diff = len(indexes)
            if not diff:
                return active, None
        created, error = await self._create_pods(ctx, indexes)
        return active + created, error

    def _surplus(self, ctx: JobSync, active_pods: list[Obj], at_least: int) -> list[Obj]:
        """Active pods to delete: duplicates of an index, indexes already done, then extras."""
        chosen: list[Obj] = []
        if ctx.indexed:
            seen: set[int] = set()
            completions = ctx.completions or 0
            for pod in sorted(active_pods, key=lambda p: p["metadata"].get("creationTimestamp")):
                ix = completion_index(pod)
                if ix is None or ix >= completions or ix in ctx.succeeded_indexes or ix in seen:
                    chosen.append(pod)
                else:
                    seen.add(ix)
        rest = [p for p in active_pods if p not in chosen]
        rest.sort(key=lambda p: (is_ready(p), p["metadata"].get("creationTimestamp") or ""))
        while len(chosen) < at_least and rest:
            chosen.append(rest.pop(0))
        return chosen[:MAX_POD_CREATE_DELETE_PER_SYNC]

    def _pending_indexes(self, ctx: JobSync, active_pods: list[Obj], count: int) -> list[int]:
        """The lowest indexes neither succeeded, failed, nor running."""
        taken = set(ctx.succeeded_indexes) | set(ctx.failed_indexes or ())
        taken |= {ix for p in active_pods if (ix := completion_index(p)) is not None}
        if only_replace_failed_pods(ctx.job):
            taken |= {
                ix
                for p in ctx.pods
                if _is_terminating(p) and (ix := completion_index(p)) is not None
            }
        free = (ix for ix in range(ctx.completions or 0) if ix not in taken)
        return [ix for ix, _ in zip(free, range(count), strict=False)]

    async def _create_pods(
        self, ctx: JobSync, indexes: list[int | None]
    ) -> tuple[int, BaseException | None]:
        job, key = ctx.job, ctx.key
        self.expectations.expect_creations(key, len(indexes))
        pending = list(indexes)

        async def create_one() -> None:
            index = pending.pop(0)
            body = self._pod_for(ctx, index)
            try:
                pod = await self.client.create(PODS, body, namespace=job["metadata"]["namespace"])
            except (ConnectionError, StatusError) as exc:
                self.expectations.creation_observed(key)
                self.recorder.event(
                    job, "Warning", "FailedCreate", f"Error creating: {_message(exc)}"
                )
                raise
            self.recorder.event(
                job, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}"
            )

        created, error = await slow_start_batch(len(indexes), initial=1, fn=create_one)
        for _ in pending:  # skipped after a failed batch: never going to be observed
            self.expectations.creation_observed(key)
        return created, error

    def _pod_for(self, ctx: JobSync, index: int | None) -> Obj:
        job = ctx.job
        meta = job["metadata"]
        template = copy.deepcopy(_spec(job).get("template") or {})
        tmeta = template.get("metadata") or {}
        spec = template.get("spec") or {}
        labels = dict(tmeta.get("labels") or {})
        annotations = dict(tmeta.get("annotations") or {})
        finalizers = list(tmeta.get("finalizers") or [])
        if JOB_TRACKING_FINALIZER not in finalizers:
            finalizers.append(JOB_TRACKING_FINALIZER)
        generate_name = f"{meta['name']}-"
        if index is not None:
            annotations[COMPLETION_INDEX_KEY] = str(index)
            labels[COMPLETION_INDEX_KEY] = str(index)
            spec["hostname"] = f"{meta['name']}-{index}"
            generate_name = f"{meta['name']}-{index}-"
            _add_index_env(spec)
            if _spec(job).get("backoffLimitPerIndex") is not None:
                annotations[INDEX_FAILURE_COUNT_KEY] = str(self._index_failure_count(ctx, index))
        pod_meta: Obj = {
            "generateName": generate_name,
            "namespace": meta.get("namespace"),
            "labels": labels,
            "finalizers": finalizers,
            "ownerReferences": [new_controller_ref(job, JOBS)],
        }
        if annotations:
            pod_meta["annotations"] = annotations
        return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}

    def _index_failure_count(self, ctx: JobSync, index: int) -> int:
        """Failures of ``index`` so far: its newest failed pod's count plus that failure."""
        counts = [
            _index_failures(p) + 1
            for p in ctx.pods
            if completion_index(p) == index
            and is_pod_failed(p, ctx.job)
            and match_pod_failure_policy(ctx.job, p).counts
        ]
        return max(counts, default=0)

    async def _delete_pods(
        self, key: str, job: Obj, pods: list[Obj]
    ) -> tuple[int, BaseException | None]:
        """Delete these pods (finalizers stay: counting removes them); (deleted, error)."""
        if not pods:
            return 0, None
        self.expectations.expect_deletions(key, [object_key(p) for p in pods])

        async def delete_one(pod: Obj) -> None:
            meta = pod["metadata"]
            try:
                await self.client.delete(
                    PODS,
                    meta["name"],
                    namespace=meta["namespace"],
                    preconditions={"uid": meta["uid"]},
                )
            except NotFound:
                self.expectations.deletion_observed(key, object_key(pod))
                return
            except (ConnectionError, StatusError) as exc:
                self.expectations.deletion_observed(key, object_key(pod))
                self.recorder.event(
                    job, "Warning", "FailedDelete", f"Error deleting: {_message(exc)}"
                )
                raise
            self.recorder.event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")

        results = await asyncio.gather(*(delete_one(p) for p in pods), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for err in errors:
            if isinstance(err, asyncio.CancelledError):
                raise err
        return len(pods) - len(errors), (errors[0] if errors else None)


def _add_index_env(spec: Obj) -> None:
    """``JOB_COMPLETION_INDEX`` from the index annotation in every container (not overriding)."""
    env_var = {
        "name": COMPLETION_INDEX_ENV,
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX_KEY}']"}},
    }
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            env = container.setdefault("env", [])
            if not any(e.get("name") == COMPLETION_INDEX_ENV for e in env):
                env.append(copy.deepcopy(env_var))


def _index_failures(pod: Obj) -> int:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_FAILURE_COUNT_KEY)
    try:
        return int(str(raw)) if raw is not None else 0
    except ValueError:
        return 0


def _differs(status: Obj, name: str, value: int) -> bool:
    return int(status.get(name) or 0) != value


def _set_count(status: Obj, name: str, value: int) -> None:
    if value:
        status[name] = value
    else:
        status.pop(name, None)
