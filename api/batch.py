"""batch/v1: Job and CronJob — pods that run to completion, once or on a schedule.

Why: a Job runs pods until ``completions`` of them succeed (at most ``parallelism`` at once,
giving up after ``backoffLimit`` failures); a CronJob stamps out a Job from its ``jobTemplate``
on a cron ``schedule``. The kinds are served here so kubectl (``create job``, ``create cronjob``,
``create job --from=cronjob/...``), the official client and the later controllers share one
typed shape.

Wire facts kept here: a Job's pods are found by a selector the apiserver generates on create
(unless ``manualSelector: true``): ``generate_job_selector`` puts the Job's uid and name into the
template's labels under both the legacy (``controller-uid``, ``job-name``) and the
``batch.kubernetes.io/`` keys, and selects on ``batch.kubernetes.io/controller-uid``, as
Kubernetes' job strategy does. Defaults (``parallelism``, ``completions``, ``backoffLimit: 6``,
``completionMode: NonIndexed``, ``suspend: false``, ``podReplacementPolicy``; a CronJob's
``concurrencyPolicy: Allow`` and history limits) are ``api.defaults``'; the cron schedule, time
zone and which spec fields may change are ``api.validation``'s.

Limits: nothing here runs a Job or schedules a CronJob (that is the controller-manager's).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from api.core import ObjectReference, PodTemplateSpec
from api.meta import KubeModel, LabelSelectorSpec, ObjectMeta

__all__ = [
    "CONTROLLER_UID_LABEL",
    "CRONJOB_INSTANTIATE_ANNOTATION",
    "JOB_NAME_LABEL",
    "LEGACY_CONTROLLER_UID_LABEL",
    "LEGACY_JOB_NAME_LABEL",
    "CronJob",
    "CronJobSpec",
    "CronJobStatus",
    "Job",
    "JobCondition",
    "JobSpec",
    "JobStatus",
    "JobTemplateSpec",
    "PodFailurePolicy",
    "PodFailurePolicyOnExitCodesRequirement",
    "PodFailurePolicyOnPodConditionsPattern",
    "PodFailurePolicyRule",
    "SuccessPolicy",
    "SuccessPolicyRule",
    "UncountedTerminatedPods",
    "generate_job_selector",
]

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
CRONJOB_INSTANTIATE_ANNOTATION = "cronjob.kubernetes.io/instantiate"
"""``manual`` on a Job kubectl made from a CronJob (``kubectl create job --from=cronjob/c``)."""


class PodFailurePolicyOnExitCodesRequirement(KubeModel):
    container_name: str | None = None
    operator: str
    values: list[int] | None = None


class PodFailurePolicyOnPodConditionsPattern(KubeModel):
    type: str
    status: str | None = None
    """Defaulted to ``True``."""


class PodFailurePolicyRule(KubeModel):
    action: str
    on_exit_codes: PodFailurePolicyOnExitCodesRequirement | None = None
    on_pod_conditions: list[PodFailurePolicyOnPodConditionsPattern] | None = None


class PodFailurePolicy(KubeModel):
    rules: list[PodFailurePolicyRule] = Field(default_factory=list)


class SuccessPolicyRule(KubeModel):
    succeeded_indexes: str | None = None
    succeeded_count: int | None = None


class SuccessPolicy(KubeModel):
    rules: list[SuccessPolicyRule] = Field(default_factory=list)


class JobSpec(KubeModel):
    parallelism: int | None = None
    completions: int | None = None
    active_deadline_seconds: int | None = None
    pod_failure_policy: PodFailurePolicy | None = None
    success_policy: SuccessPolicy | None = None
    backoff_limit: int | None = None
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    selector: LabelSelectorSpec | None = None
    manual_selector: bool | None = None
    template: PodTemplateSpec | None = None
    ttl_seconds_after_finished: int | None = None
    completion_mode: str | None = None
    suspend: bool | None = None
    pod_replacement_policy: str | None = None
    managed_by: str | None = None


class JobCondition(KubeModel):
    type: str
    status: str
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class UncountedTerminatedPods(KubeModel):
    succeeded: list[str] | None = None
    failed: list[str] | None = None


class JobStatus(KubeModel):
    conditions: list[JobCondition] | None = None
    start_time: str | None = None
    completion_time: str | None = None
    active: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    terminating: int | None = None
    completed_indexes: str | None = None
    failed_indexes: str | None = None
    uncounted_terminated_pods: UncountedTerminatedPods | None = None
    ready: int | None = None


class Job(KubeModel):
    api_version: str = "batch/v1"
    kind: str = "Job"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSpec = Field(default_factory=JobSpec)
    status: JobStatus = Field(default_factory=JobStatus)


class JobTemplateSpec(KubeModel):
    metadata: ObjectMeta | None = None
    spec: JobSpec | None = None


class CronJobSpec(KubeModel):
    schedule: str = ""
    """Always on the wire (a Go field without ``omitempty``)."""
    time_zone: str | None = None
    starting_deadline_seconds: int | None = None
    concurrency_policy: str | None = None
    suspend: bool | None = None
    job_template: JobTemplateSpec = Field(default_factory=JobTemplateSpec)
    successful_jobs_history_limit: int | None = None
    failed_jobs_history_limit: int | None = None


class CronJobStatus(KubeModel):
    active: list[ObjectReference] | None = None
    last_schedule_time: str | None = None
    last_successful_time: str | None = None


class CronJob(KubeModel):
    api_version: str = "batch/v1"
    kind: str = "CronJob"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CronJobSpec = Field(default_factory=CronJobSpec)
    status: CronJobStatus = Field(default_factory=CronJobStatus)


def generate_job_selector(job: dict[str, Any]) -> None:
    """Give a new Job (a dict with ``metadata.uid`` set) its generated selector, in place.

    As Kubernetes' job strategy does on create unless ``spec.manualSelector`` is true: the
    template gets ``job-name``/``batch.kubernetes.io/job-name`` (the Job's name) and
    ``controller-uid``/``batch.kubernetes.io/controller-uid`` (its uid) where it lacks them, and
    the selector matches ``batch.kubernetes.io/controller-uid``. Labels the user set are kept, so
    a conflicting one fails validation instead of being overwritten. Malformed parts are left for
    validation to report.
    """
    meta, spec = job.get("metadata"), job.get("spec")
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return
    uid, name = meta.get("uid"), meta.get("name")
    if spec.get("manualSelector") is True or not isinstance(uid, str) or not uid:
        return
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    template_meta = template.setdefault("metadata", {})
    if not isinstance(template_meta, dict):
        return
    labels = template_meta.get("labels")
    if labels is None:
        labels = template_meta["labels"] = {}
    selector = spec.get("selector")
    if selector is None:
        selector = spec["selector"] = {}
    if not isinstance(labels, dict) or not isinstance(selector, dict):
        return
    for key in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        labels.setdefault(key, name)
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        labels.setdefault(key, uid)
    match_labels = selector.get("matchLabels")
    if match_labels is None:
        match_labels = selector["matchLabels"] = {}
    if isinstance(match_labels, dict):
        match_labels.setdefault(CONTROLLER_UID_LABEL, uid)
