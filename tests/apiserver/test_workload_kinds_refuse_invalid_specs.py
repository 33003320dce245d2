"""Invalid Jobs, CronJobs, DaemonSets, StatefulSets, ControllerRevisions and budgets are 422
``Invalid`` Statuses whose causes read as Kubernetes words them, and the fields Kubernetes fixes
after creation stay fixed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.apiserver.conftest import Api

Obj = dict[str, Any]

APPS = "/apis/apps/v1/namespaces/default"
BATCH = "/apis/batch/v1/namespaces/default"
POLICY = "/apis/policy/v1/namespaces/default"
CONTAINERS = [{"name": "main", "image": "busybox"}]
TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": CONTAINERS}}


def cron_job(schedule: str, **spec: Any) -> Obj:
    pod_spec = {"containers": CONTAINERS, "restartPolicy": "OnFailure"}
    job_template = {"spec": {"template": {"spec": pod_spec}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "c"},
        "spec": {"schedule": schedule, "jobTemplate": job_template, **spec},
    }


def stateful_set(**spec: Any) -> Obj:
    base = {"selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE, "serviceName": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "web"},
        "spec": {**base, **spec},
    }


async def causes(api: Api, path: str, body: Any, *, method: str = "POST") -> list[str]:
    status, out = await api.request(method, path, body)
    assert status == 422, (status, out)
    assert out["reason"] == "Invalid", out
    return [f"{c['field']}: {c['message']}" for c in out["details"]["causes"]]


@pytest.mark.parametrize(
    "schedule,message",
    [
        ("x", 'Invalid value: "x": expected exactly 5 fields, found 1: [x]'),
        ("61 * * * *", 'Invalid value: "61 * * * *": end of range (61) above maximum (59): 61'),
        (
            "* * * * mon-foo",
            'Invalid value: "* * * * mon-foo": failed to parse int from foo: '
            'strconv.Atoi: parsing "foo": invalid syntax',
        ),
        (
            "*/0 * * * *",
            'Invalid value: "*/0 * * * *": step of range should be a positive number: */0',
        ),
        ("@sometimes", 'Invalid value: "@sometimes": unrecognized descriptor: @sometimes'),
        ("", "Required value"),
    ],
)
async def test_bad_cron_schedules_are_refused_with_robfig_cron_messages(
    api: Api, schedule: str, message: str
) -> None:
    assert await causes(api, f"{BATCH}/cronjobs", cron_job(schedule)) == [
        f"spec.schedule: {message}"
    ]


@pytest.mark.parametrize(
    "schedule", ["*/1 * * * *", "0 3 * jan-mar MON-fri", "@daily", "5,10 */2 1-15/3 * ?"]
)
async def test_standard_schedules_and_descriptors_are_accepted(api: Api, schedule: str) -> None:
    await api.ok("POST", f"{BATCH}/cronjobs", cron_job(schedule))


async def test_cron_time_zones_must_be_iana_names(api: Api) -> None:
    await api.ok("POST", f"{BATCH}/cronjobs", cron_job("0 * * * *", timeZone="Asia/Tokyo"))
    bad = cron_job("0 * * * *", timeZone="Mars/Olympus")
    assert await causes(api, f"{BATCH}/cronjobs", bad) == [
        'spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus'
    ]
    tz_in_schedule = cron_job("TZ=UTC 0 * * * *")
    tz_in_schedule["metadata"]["name"] = "tz"
    assert await causes(api, f"{BATCH}/cronjobs", tz_in_schedule) == [
        'spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule,'
        " use timeZone field instead"
    ]


async def test_job_pods_must_not_restart_always(api: Api) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"containers": CONTAINERS}}},
    }
    assert await causes(api, f"{BATCH}/jobs", job) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Always": '
        'supported values: "OnFailure", "Never"'
    ]


async def test_a_manual_job_selector_must_match_its_template(api: Api) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "manualSelector": True,
            "selector": {"matchLabels": {"app": "other"}},
            "template": {**TEMPLATE, "spec": {"containers": CONTAINERS, "restartPolicy": "Never"}},
        },
    }
    assert await causes(api, f"{BATCH}/jobs", job) == [
        'spec.template.metadata.labels: Invalid value: {"app":"web"}: '
        "`selector` does not match template `labels`"
    ]


async def test_a_jobs_template_and_selector_are_immutable(api: Api) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"containers": CONTAINERS, "restartPolicy": "Never"}}},
    }
    created = await api.ok("POST", f"{BATCH}/jobs", job)
    changed = copy.deepcopy(created)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "alpine"
    got = await causes(api, f"{BATCH}/jobs/j", changed, method="PUT")
    assert len(got) == 1 and got[0].startswith("spec.template: Invalid value: ")
    assert got[0].endswith(": field is immutable")
    # parallelism may change (and suspend): the job is scaled, not replaced
    await api.ok(
        "PUT", f"{BATCH}/jobs/j", dict(created, spec={**created["spec"], "parallelism": 3})
    )


async def test_controller_selectors_must_match_their_templates(api: Api) -> None:
    mismatched = stateful_set(selector={"matchLabels": {"app": "db"}})
    assert await causes(api, f"{APPS}/statefulsets", mismatched) == [
        'spec.template.metadata.labels: Invalid value: {"app":"web"}: '
        "`selector` does not match template `labels`"
    ]
    daemon = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {"selector": {}, "template": TEMPLATE},
    }
    assert await causes(api, f"{APPS}/daemonsets", daemon) == [
        "spec.selector: Invalid value: {}: empty selector is invalid for daemonset"
    ]


async def test_a_statefulset_changes_only_what_kubernetes_lets_change(api: Api) -> None:
    created = await api.ok("POST", f"{APPS}/statefulsets", stateful_set())
    scaled = copy.deepcopy(created)
    scaled["spec"]["replicas"] = 3
    scaled["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27"
    scaled = await api.ok("PUT", f"{APPS}/statefulsets/web", scaled)
    renamed = dict(scaled, spec={**scaled["spec"], "serviceName": "other"})
    assert await causes(api, f"{APPS}/statefulsets/web", renamed, method="PUT") == [
        "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', "
        "'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
        "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
    ]
    status, _ = await api.patch(
        f"{APPS}/statefulsets/web", {"spec": {"podManagementPolicy": "Parallel"}}
    )
    assert status == 422


async def test_statefulset_strategy_and_policy_values(api: Api) -> None:
    bad = stateful_set(
        podManagementPolicy="Random",
        updateStrategy={"type": "OnDelete", "rollingUpdate": {"partition": 1}},
        persistentVolumeClaimRetentionPolicy={"whenDeleted": "Keep"},
    )
    assert await causes(api, f"{APPS}/statefulsets", bad) == [
        "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'",
        'spec.updateStrategy.rollingUpdate: Invalid value: {"partition":1}: '
        "only allowed for updateStrategy 'RollingUpdate'",
        'spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: "Keep": '
        'supported values: "Retain", "Delete"',
    ]


async def test_a_budget_names_min_available_or_max_unavailable_not_both(api: Api) -> None:
    both = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "p"},
        "spec": {"minAvailable": 1, "maxUnavailable": "150%", "selector": {}},
    }
    got = await causes(api, f"{POLICY}/poddisruptionbudgets", both)
    assert got[0].startswith("spec: Invalid value: ")
    assert got[0].endswith(": minAvailable and maxUnavailable cannot be both set")
    assert got[1:] == ['spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%']


async def test_a_controller_revisions_data_is_fixed(api: Api) -> None:
    revision = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": "web-1"},
        "revision": 1,
    }
    assert await causes(api, f"{APPS}/controllerrevisions", revision) == [
        "data: Required value: data is mandatory"
    ]
    created = await api.ok("POST", f"{APPS}/controllerrevisions", dict(revision, data={"a": 1}))
    got = await causes(
        api, f"{APPS}/controllerrevisions/web-1", dict(created, data={"a": 2}), method="PUT"
    )
    assert got == ['data: Invalid value: {"a":2}: field is immutable']
