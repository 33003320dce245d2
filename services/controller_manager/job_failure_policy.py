"""How the job controller judges a pod that ended badly: failed or not, which rule matched,
and how long to wait before the next pod.

Why a module of its own: Kubernetes spreads these rules over ``job_controller.go``,
``pod_failure_policy.go`` and ``backoff_utils.go``, and every one of them decides a number the
user sees (``status.failed``, the Job's fate, when the next pod starts). Kept here:

* ``is_pod_failed``: phase ``Failed``; or — unless the Job only replaces *failed* pods
  (``podReplacementPolicy: Failed`` or a ``podFailurePolicy``) — deleted and not ``Succeeded``
  (an orphaned or evicted pod may never reach a terminal phase);
* ``match_pod_failure_policy``: the first rule whose ``onExitCodes`` (a terminated container,
  exit code not 0, ``In``/``NotIn`` the values, optionally one container) or
  ``onPodConditions`` (type and status) matches decides: ``Ignore`` (not counted),
  ``Count`` (counted as usual), ``FailIndex``, ``FailJob`` (with Kubernetes' message
  "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 0");
  no match counts the failure;
* ``past_backoff_limit_on_failure``: with ``restartPolicy: OnFailure`` the container restarts
  of running pods count against ``backoffLimit``;
* ``BackoffStore``: failures since the last success and when the last one happened, per Job;
  the next pod waits ``10 s · 2^(failures-1)``, at most 10 min (``DefaultJobPodFailureBackOff``
  and ``MaxJobPodFailureBackOff``) after that last failure.

Limits: the back-off records live in this process, as Kubernetes' do: a restarted controller
starts every Job without back-off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from api.meta import parse_time
from services.controller_manager.clock import Clock

__all__ = [
    "DEFAULT_POD_FAILURE_BACKOFF",
    "MAX_POD_FAILURE_BACKOFF",
    "BackoffRecord",
    "BackoffStore",
    "PolicyMatch",
    "fail_job_message",
    "finished_time",
    "is_pod_failed",
    "match_pod_failure_policy",
    "only_replace_failed_pods",
    "past_backoff_limit_on_failure",
]

Obj = Mapping[str, Any]

DEFAULT_POD_FAILURE_BACKOFF = 10.0
"""Kubernetes' DefaultJobPodFailureBackOff (seconds)."""
MAX_POD_FAILURE_BACKOFF = 600.0
"""Kubernetes' MaxJobPodFailureBackOff: 10 minutes."""


def only_replace_failed_pods(job: Obj) -> bool:
    spec = job.get("spec") or {}
    return spec.get("podReplacementPolicy") == "Failed" or bool(spec.get("podFailurePolicy"))


def is_pod_failed(pod: Obj, job: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Failed":
        return True
    if only_replace_failed_pods(job):
        return False
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) and phase != "Succeeded"


@dataclass(frozen=True, slots=True)
class PolicyMatch:
    action: str | None
    """The matching rule's action; None when no rule matched (or there is no policy)."""
    counts: bool
    """Whether the failure counts against ``backoffLimit``."""
    message: str | None = None
    """For ``FailJob``: the Job's failure message."""


_NO_MATCH = PolicyMatch(action=None, counts=True)


def _matching_container(pod: Obj, requirement: Obj) -> Obj | None:
    status = pod.get("status") or {}
    values = set(requirement.get("values") or [])
    wanted_name = requirement.get("containerName")
    operator = requirement.get("operator")
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or []:
            terminated = (cs.get("state") or {}).get("terminated")
            if not terminated or (wanted_name and cs.get("name") != wanted_name):
                continue
            code = int(terminated.get("exitCode") or 0)
            if code == 0:
                continue
            if (operator == "In") == (code in values):
                return dict(cs)
    return None


def _matching_condition(pod: Obj, patterns: Iterable[Obj]) -> Obj | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    for pattern in patterns:
        for cond in conditions:
            if cond.get("type") == pattern.get("type") and cond.get("status") == pattern.get(
                "status", "True"
            ):
                return dict(cond)
    return None


def match_pod_failure_policy(job: Obj, pod: Obj) -> PolicyMatch:
    """What the Job's ``podFailurePolicy`` says about this failed pod."""
    policy = (job.get("spec") or {}).get("podFailurePolicy")
    if not policy:
        return _NO_MATCH
    meta = pod.get("metadata") or {}
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    for index, rule in enumerate(policy.get("rules") or []):
        action = str(rule.get("action"))
        if rule.get("onExitCodes"):
            container = _matching_container(pod, rule["onExitCodes"])
            if container is None:
                continue
            code = container["state"]["terminated"].get("exitCode")
            message = (
                f"Container {container.get('name')} for pod {where} failed with exit code "
                f"{code} matching {action} rule at index {index}"
            )
        elif rule.get("onPodConditions"):
            condition = _matching_condition(pod, rule["onPodConditions"])
            if condition is None:
                continue
            message = (
                f"Pod {where} has condition {condition.get('type')} matching {action} rule "
                f"at index {index}"
            )
        else:
            continue
        if action == "Ignore":
            return PolicyMatch(action=action, counts=False)
        if action == "FailJob":
            return PolicyMatch(action=action, counts=True, message=message)
        return PolicyMatch(action=action, counts=True)
    return _NO_MATCH


def fail_job_message(job: Obj, pods: Iterable[Obj]) -> str | None:
    """The message of the first failed pod that a ``FailJob`` rule matches."""
    if not (job.get("spec") or {}).get("podFailurePolicy"):
        return None
    for pod in pods:
        if is_pod_failed(pod, job):
            match = match_pod_failure_policy(job, pod)
            if match.message is not None:
                return match.message
    return None


def past_backoff_limit_on_failure(job: Obj, pods: Iterable[Obj]) -> bool:
    spec = job.get("spec") or {}
    if ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") != "OnFailure":
        return False
    restarts = 0
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") in ("Running", "Pending"):
            for key in ("initContainerStatuses", "containerStatuses"):
                restarts += sum(int(cs.get("restartCount") or 0) for cs in status.get(key) or [])
    limit = int(spec.get("backoffLimit", 6))
    return restarts > 0 if limit == 0 else restarts >= limit


def finished_time(pod: Obj, *, default: datetime) -> datetime:
    """When the pod finished: its containers' latest ``finishedAt``, else its deletion time."""
    status, meta = pod.get("status") or {}, pod.get("metadata") or {}
    latest: datetime | None = None
    for cs in status.get("containerStatuses") or []:
        at = ((cs.get("state") or {}).get("terminated") or {}).get("finishedAt")
        if at:
            t = parse_time(str(at))
            latest = t if latest is None or t > latest else latest
    if latest is not None:
        return latest
    if meta.get("deletionTimestamp"):
        return parse_time(str(meta["deletionTimestamp"]))
    return default


@dataclass(frozen=True, slots=True)
class BackoffRecord:
    failures_after_last_success: int = 0
    last_failure: datetime | None = None

    def remaining(self, clock: Clock) -> float:
        """Seconds before the next pod may be created (0: now)."""
        if self.failures_after_last_success == 0 or self.last_failure is None:
            return 0.0
        delay = min(
            DEFAULT_POD_FAILURE_BACKOFF * 2 ** (self.failures_after_last_success - 1),
            MAX_POD_FAILURE_BACKOFF,
        )
        elapsed = (clock.now() - self.last_failure) / timedelta(seconds=1)
        return float(max(0.0, delay - elapsed))


class BackoffStore:
    """Per-Job back-off records, advanced only once a sync's new failures are recorded."""

    def __init__(self) -> None:
        self._records: dict[str, BackoffRecord] = {}

    def get(self, key: str) -> BackoffRecord:
        return self._records.get(key, BackoffRecord())

    def forget(self, key: str) -> None:
        self._records.pop(key, None)

    def put(self, key: str, record: BackoffRecord) -> None:
        self._records[key] = record

    def next_record(
        self, key: str, *, succeeded: list[datetime], failed: list[datetime]
    ) -> BackoffRecord:
        """The record after pods newly finished at these times (Kubernetes' newBackoffRecord)."""
        record = self.get(key)
        failed = sorted(failed)
        if not succeeded:
            if not failed:
                return record
            return BackoffRecord(record.failures_after_last_success + len(failed), failed[-1])
        last_success = max(succeeded)
        after = [t for t in failed if t > last_success]
        return BackoffRecord(len(after), after[-1] if after else None)
