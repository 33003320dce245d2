"""Counting a Job's finished pods exactly once: ``uncountedTerminatedPods`` and the tracking finalizer.

Why: a Job's ``succeeded`` and ``failed`` must survive the pods (a finished pod may be deleted
by anyone) and the controller (kill -9 at any instant). Kubernetes makes the count durable with
a finalizer on every pod it creates (``batch.kubernetes.io/job-tracking``) and a two-phase
commit through the Job's status, in this order (``trackJobStatusAndRemoveFinalizers``):

1. every finished pod that still has the finalizer and is not yet recorded is added to
   ``status.uncountedTerminatedPods.succeeded`` / ``.failed`` by UID (Indexed Jobs record the
   index in ``completedIndexes`` instead), and that status is written — a compare-and-swap on
   the Job's resourceVersion, so a stale cache loses instead of double-writing;
2. only then is the finalizer removed from those pods;
3. each UID whose pod no longer has the finalizer (or is gone) leaves the uncounted list and is
   added to ``succeeded`` / ``failed`` — written in the next status write.

A crash between 1 and 2 leaves the UID uncounted with the finalizer on: the next controller
removes the finalizer and counts it once. A crash between 2 and 3 leaves the UID uncounted
without the finalizer: the next controller counts it. A pod is never counted while it still
has the finalizer, and never recorded twice, because recording skips UIDs already listed and
pods whose finalizer removal this process is still waiting to observe.

The finished conditions go through interim ones written *before* any finalizer is removed
(``FailureTarget``, ``SuccessCriteriaMet``); ``Failed`` / ``Complete`` (with ``completionTime``)
are written only once nothing is left uncounted and no pod is still terminating.

At most ``MAX_UNCOUNTED_PODS`` (500) UIDs are recorded per sync: the status stays under about
20 KB and one big Job cannot starve the others; the rest wait for the next sync.

Limits: a pod released from the Job (its labels changed) keeps its finalizer until it is
deleted with the Job; the pod and Job informers are separate watches, so a pod cache far
behind the Job's after a restart could see a counted pod as new (Kubernetes has the same gap).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from api.errors import NotFound
from api.meta import format_time
from api.registry import REGISTRY
from client.events import EventRecorder
from client.rest import ApiClient
from services.controller_manager.clock import Clock
from services.controller_manager.job_failure_policy import (
    BackoffRecord,
    BackoffStore,
    is_pod_failed,
    match_pod_failure_policy,
)
from services.controller_manager.job_indexes import completion_index, format_indexes

__all__ = [
    "JOBS",
    "JOB_TRACKING_FINALIZER",
    "MAX_UNCOUNTED_PODS",
    "FinalizerExpectations",
    "JobSync",
    "StatusTracker",
    "ensure_condition",
    "has_tracking_finalizer",
    "new_condition",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

JOBS = REGISTRY.require("batch", "Job")
PODS = REGISTRY.require("", "Pod")

JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
MAX_UNCOUNTED_PODS = 500
"""Kubernetes' MaxUncountedPods."""


def has_tracking_finalizer(pod: Obj) -> bool:
    return JOB_TRACKING_FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or [])


def new_condition(type_: str, status: str, reason: str, message: str, now: datetime) -> Obj:
    stamp = format_time(now)
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
    }


def ensure_condition(
    conditions: list[Obj], type_: str, status: str, reason: str, message: str, now: datetime
) -> bool:
    """Set ``type_`` to this status/reason/message in place; a False one is never added.

    Returns whether the list changed (Kubernetes' ensureJobConditionStatus).
    """
    for i, cond in enumerate(conditions):
        if cond.get("type") != type_:
            continue
        if (cond.get("status"), cond.get("reason"), cond.get("message")) == (
            status,
            reason,
            message,
        ):
            return False
        conditions[i] = new_condition(type_, status, reason, message, now)
        return True
    if status == "False":
        return False
    conditions.append(new_condition(type_, status, reason, message, now))
    return True


class FinalizerExpectations:
    """Per Job, the pod UIDs whose finalizer removal was written but not yet seen in the cache."""

    def __init__(self) -> None:
        self._uids: dict[str, set[str]] = {}

    def expect(self, key: str, uids: list[str]) -> None:
        self._uids.setdefault(key, set()).update(uids)

    def observed(self, key: str, uid: str) -> None:
        pending = self._uids.get(key)
        if pending is not None:
            pending.discard(uid)
            if not pending:
                del self._uids[key]

    def expected(self, key: str) -> frozenset[str]:
        return frozenset(self._uids.get(key, ()))

    def forget(self, key: str) -> None:
        self._uids.pop(key, None)


@dataclass
class JobSync:
    """One sync's view of a Job: the working copy of its status and what was decided so far."""

    key: str
    job: Obj
    """A deep copy; ``job["status"]`` is edited in place and written."""
    pods: list[Obj]
    expected_rm_finalizers: frozenset[str]
    uncounted_succeeded: set[str]
    uncounted_failed: set[str]
    terminating: int = 0
    finished_condition: Obj | None = None
    succeeded_indexes: set[int] = field(default_factory=set)
    prev_succeeded_indexes: set[int] = field(default_factory=set)
    failed_indexes: set[int] | None = None
    new_backoff: BackoffRecord = field(default_factory=BackoffRecord)

    @property
    def status(self) -> Obj:
        status: Obj = self.job.setdefault("status", {})
        return status

    @property
    def indexed(self) -> bool:
        return (self.job.get("spec") or {}).get("completionMode") == "Indexed"

    @property
    def completions(self) -> int | None:
        value = (self.job.get("spec") or {}).get("completions")
        return None if value is None else int(value)

    def uncounted(self) -> Obj:
        uncounted: Obj = self.status.setdefault("uncountedTerminatedPods", {})
        return uncounted


def _clean_uncounted(status: Obj, with_finalizer: set[str]) -> bool:
    """Count the uncounted UIDs whose pods lost the finalizer; whether anything changed."""
    uncounted = status.setdefault("uncountedTerminatedPods", {})
    changed = False
    for kind, counter in (("succeeded", "succeeded"), ("failed", "failed")):
        uids = list(uncounted.get(kind) or [])
        kept = [u for u in uids if u in with_finalizer]
        if len(kept) != len(uids):
            changed = True
            status[counter] = int(status.get(counter) or 0) + len(uids) - len(kept)
            if kept:
                uncounted[kind] = kept
            else:
                uncounted.pop(kind, None)
    return changed


def _is_success_criteria_met(cond: Obj | None) -> bool:
    return cond is not None and cond.get("type") == "SuccessCriteriaMet"


def _has_condition(job: Obj, type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


class StatusTracker:
    """Writes a Job's status and removes its pods' finalizers, in the crash-safe order."""

    def __init__(
        self,
        *,
        client: ApiClient,
        recorder: EventRecorder,
        clock: Clock,
        finalizers: FinalizerExpectations,
        backoffs: BackoffStore,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.clock = clock
        self.finalizers = finalizers
        self.backoffs = backoffs

    async def track(self, ctx: JobSync, *, needs_flush: bool) -> None:
        """Record finished pods, remove their finalizers, count them, finish the Job if due."""
        job, status = ctx.job, ctx.status
        ctx.uncounted()
        pods = ctx.pods
        if ctx.indexed:
            pods = sorted(pods, key=lambda p: completion_index(p) or 0)
        with_finalizer = {
            str(p["metadata"]["uid"])
            for p in pods
            if has_tracking_finalizer(p) and p["metadata"]["uid"] not in ctx.expected_rm_finalizers
        }
        if _clean_uncounted(status, with_finalizer):
            needs_flush = True
        uncounted = ctx.uncounted()
        new_succeeded: list[str] = list(uncounted.get("succeeded") or [])
        new_failed: list[str] = list(uncounted.get("failed") or [])
        new_indexes: list[int] = []
        to_release: list[Obj] = []
        reached_max = False
        completions = ctx.completions
        job_deleting = bool(job["metadata"].get("deletionTimestamp"))
        terminal_by_finish = ctx.finished_condition is not None and not _is_success_criteria_met(
            ctx.finished_condition
        )
        for pod in pods:
            uid = str(pod["metadata"]["uid"])
            if not has_tracking_finalizer(pod) or uid in ctx.expected_rm_finalizers:
                continue  # counted in an earlier sync
            failed = is_pod_failed(pod, job)
            phase = (pod.get("status") or {}).get("phase")
            if not (failed or phase == "Succeeded" or ctx.finished_condition or job_deleting):
                continue  # still running: the finalizer stays
            to_release.append(pod)
            ix = completion_index(pod)
            if phase == "Succeeded" and uid not in ctx.uncounted_failed:
                if ctx.indexed:
                    if (
                        ix is not None
                        and completions is not None
                        and ix < completions
                        and ix not in ctx.prev_succeeded_indexes
                    ):
                        new_indexes.append(ix)
                elif uid not in ctx.uncounted_succeeded:
                    needs_flush = True
                    new_succeeded.append(uid)
            elif failed or terminal_by_finish:
                valid_index = not ctx.indexed or (
                    ix is not None and completions is not None and ix < completions
                )
                if uid not in ctx.uncounted_failed and valid_index:
                    if match_pod_failure_policy(job, pod).counts:
                        needs_flush = True
                        new_failed.append(uid)
            if len(new_indexes) + len(new_succeeded) + len(new_failed) >= MAX_UNCOUNTED_PODS:
                reached_max = True
                break
        if new_succeeded:
            uncounted["succeeded"] = new_succeeded
        if new_failed:
            uncounted["failed"] = new_failed
        if ctx.indexed:
            ctx.succeeded_indexes |= set(new_indexes)
            text = format_indexes(ctx.succeeded_indexes)
            if text != (status.get("completedIndexes") or ""):
                needs_flush = True
            _set_count(status, "succeeded", len(ctx.succeeded_indexes))
            status["completedIndexes"] = text
            if ctx.failed_indexes is not None:
                failed_text = format_indexes(ctx.failed_indexes)
                if status.get("failedIndexes") != failed_text:
                    status["failedIndexes"] = failed_text
                    needs_flush = True
        if self._stage_interim_condition(ctx):
            needs_flush = True
        needs_flush = await self._flush_and_remove_finalizers(
            ctx, to_release, with_finalizer, needs_flush=needs_flush
        )
        finished = not reached_max and self._enact_finished(ctx)
        if finished or needs_flush:
            await self._write_status(ctx)
            if finished:
                self._record_finished(ctx)

    def _stage_interim_condition(self, ctx: JobSync) -> bool:
        """Append FailureTarget / SuccessCriteriaMet before finalizers go; aim at the final one.

        Returns whether an interim condition was added (the status must be written).
        """
        cond = ctx.finished_condition
        if cond is None:
            return False
        staged = False
        conditions: list[Obj] = ctx.status.setdefault("conditions", [])
        now = self.clock.now()
        if cond["type"] == "FailureTarget":
            if not _has_condition(ctx.job, "FailureTarget"):
                conditions.append(cond)
                staged = True
            ctx.finished_condition = new_condition(
                "Failed", "True", cond["reason"], cond["message"], now
            )
        elif cond["type"] == "SuccessCriteriaMet":
            if not _has_condition(ctx.job, "SuccessCriteriaMet"):
                conditions.append(cond)
                staged = True
            ctx.finished_condition = new_condition(
                "Complete", "True", cond["reason"], cond["message"], now
            )
        return staged

    async def _flush_and_remove_finalizers(
        self, ctx: JobSync, to_release: list[Obj], with_finalizer: set[str], *, needs_flush: bool
    ) -> bool:
        if needs_flush:
            await self._write_status(ctx)  # phase 1: the UIDs are durable before any finalizer goes
            self.backoffs.put(ctx.key, ctx.new_backoff)
            needs_flush = False
        error: BaseException | None = None
        if to_release:
            removed, error = await self._remove_finalizers(ctx.key, to_release)
            with_finalizer -= removed
        if _clean_uncounted(ctx.status, with_finalizer):  # phase 3: count what lost the finalizer
            needs_flush = True
        if error is not None:
            if needs_flush:
                await self._write_status(ctx)
            raise error
        return needs_flush

    async def _remove_finalizers(
        self, key: str, pods: list[Obj]
    ) -> tuple[set[str], BaseException | None]:
        uids = [str(p["metadata"]["uid"]) for p in pods]
        self.finalizers.expect(key, uids)
        results = await asyncio.gather(
            *(self._remove_finalizer(p) for p in pods), return_exceptions=True
        )
        removed: set[str] = set()
        error: BaseException | None = None
        for uid, result in zip(uids, results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):
                self.finalizers.observed(key, uid)  # the write failed: nothing to observe
                error = error or result
            else:
                removed.add(uid)
        return removed, error

    async def _remove_finalizer(self, pod: Obj) -> None:
        meta = pod["metadata"]
        patch = {
            "metadata": {
                "$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER],
            }
        }
        try:
            await self.client.patch(
                PODS, meta["name"], patch, namespace=meta["namespace"], patch_type="strategic"
            )
        except NotFound:
            return  # gone: it holds nothing any more

    def _enact_finished(self, ctx: JobSync) -> bool:
        cond = ctx.finished_condition
        if cond is None:
            return False
        uncounted = ctx.uncounted()
        if uncounted.get("succeeded") or uncounted.get("failed"):
            log.debug("job %s: delaying the finished condition: pods still uncounted", ctx.key)
            return False
        if ctx.terminating > 0:
            log.debug("job %s: delaying the finished condition: pods still terminating", ctx.key)
            return False
        conditions: list[Obj] = ctx.status.setdefault("conditions", [])
        ensure_condition(
            conditions, cond["type"], "True", cond["reason"], cond["message"], self.clock.now()
        )
        if cond["type"] == "Complete":
            ctx.status["completionTime"] = cond["lastTransitionTime"]
        return True

    async def _write_status(self, ctx: JobSync) -> None:
        """PUT the working status with the resourceVersion it was computed from (CAS)."""
        written = await self.client.update(JOBS, ctx.job, subresource="status")
        ctx.job["metadata"]["resourceVersion"] = written["metadata"]["resourceVersion"]

    def _record_finished(self, ctx: JobSync) -> None:
        cond = ctx.finished_condition or {}
        if cond.get("type") == "Complete":
            self.recorder.event(ctx.job, "Normal", "Completed", "Job completed")
        elif cond.get("type") == "Failed":
            self.recorder.event(ctx.job, "Warning", cond["reason"], cond["message"])


def _set_count(status: Obj, name: str, value: int) -> None:
    if value:
        status[name] = value
    else:
        status.pop(name, None)
