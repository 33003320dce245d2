"""Job, CronJob, DaemonSet, StatefulSet, ControllerRevision and PodDisruptionBudget through the
official ``kubernetes`` client's typed calls against a real apiserver process.

The client's models refuse a response missing a field Kubernetes always sends, so each typed
call returning an object proves the wire shape: create, read, list (label selector), replace,
the three patch types, watch (ADDED ... DELETED) and delete; the status subresources
(``read/replace/patch_namespaced_job_status`` ...) and the StatefulSet's scale; and the
defaults Kubernetes applies, read back through the typed models.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client, watch

from kubelite.testing import ComponentProcess

NS = "default"
MERGE, STRATEGIC, JSON_PATCH = (
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
)

POD_TEMPLATE = client.V1PodTemplateSpec(
    metadata=client.V1ObjectMeta(labels={"app": "web"}),
    spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="nginx")]),
)
RUN_ONCE = client.V1PodTemplateSpec(
    spec=client.V1PodSpec(
        containers=[client.V1Container(name="main", image="busybox", command=["true"])],
        restart_policy="Never",
    )
)
WEB = client.V1LabelSelector(match_labels={"app": "web"})


@dataclass(frozen=True)
class Kind:
    api: type[Any]
    """The client's API class (``client.BatchV1Api``)."""
    name: str
    """The snake_case name in its calls (``cron_job`` in ``create_namespaced_cron_job``)."""
    body: Callable[[], Any]
    """A typed object named ``demo`` labelled ``tier=test``."""


def _meta() -> client.V1ObjectMeta:
    return client.V1ObjectMeta(name="demo", labels={"tier": "test"})


KINDS = {
    "Job": Kind(
        client.BatchV1Api,
        "job",
        lambda: client.V1Job(metadata=_meta(), spec=client.V1JobSpec(template=RUN_ONCE)),
    ),
    "CronJob": Kind(
        client.BatchV1Api,
        "cron_job",
        lambda: client.V1CronJob(
            metadata=_meta(),
            spec=client.V1CronJobSpec(
                schedule="*/5 * * * *",
                job_template=client.V1JobTemplateSpec(spec=client.V1JobSpec(template=RUN_ONCE)),
            ),
        ),
    ),
    "DaemonSet": Kind(
        client.AppsV1Api,
        "daemon_set",
        lambda: client.V1DaemonSet(
            metadata=_meta(), spec=client.V1DaemonSetSpec(selector=WEB, template=POD_TEMPLATE)
        ),
    ),
    "StatefulSet": Kind(
        client.AppsV1Api,
        "stateful_set",
        lambda: client.V1StatefulSet(
            metadata=_meta(),
            spec=client.V1StatefulSetSpec(service_name="web", selector=WEB, template=POD_TEMPLATE),
        ),
    ),
    "ControllerRevision": Kind(
        client.AppsV1Api,
        "controller_revision",
        lambda: client.V1ControllerRevision(
            metadata=_meta(), data={"spec": {"template": {"metadata": {}}}}, revision=1
        ),
    ),
    "PodDisruptionBudget": Kind(
        client.PolicyV1Api,
        "pod_disruption_budget",
        lambda: client.V1PodDisruptionBudget(
            metadata=_meta(),
            spec=client.V1PodDisruptionBudgetSpec(min_available=1, selector=WEB),
        ),
    ),
}


def typed(url: str, kind: Kind) -> Callable[[str], Callable[..., Any]]:
    """``call("create")`` -> the bound ``create_namespaced_<kind>`` of a client for ``url``."""
    api = kind.api(client.ApiClient(client.Configuration(host=url)))
    return lambda verb: getattr(api, f"{verb}_namespaced_{kind.name}")


async def started(apiserver_process: Any) -> str:
    server: ComponentProcess = await asyncio.to_thread(apiserver_process, store="memory://")
    return server.url


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_typed_calls_of_each_kind(apiserver_process: Any, kind: str) -> None:
    url = await started(apiserver_process)
    await asyncio.to_thread(_crud, typed(url, KINDS[kind]), KINDS[kind])


def _crud(call: Callable[[str], Callable[..., Any]], kind: Kind) -> None:
    start_rv = call("list")(NS).metadata.resource_version
    created = call("create")(NS, kind.body())
    assert created.metadata.uid and created.metadata.labels["tier"] == "test"

    current = call("read")("demo", NS)
    current.metadata.labels["replaced"] = "yes"
    assert call("replace")("demo", NS, current).metadata.labels["replaced"] == "yes"
    for content_type, doc in (
        (MERGE, {"metadata": {"labels": {"merge": "yes"}}}),
        (STRATEGIC, {"metadata": {"labels": {"strategic": "yes"}}}),
        (JSON_PATCH, [{"op": "add", "path": "/metadata/labels/json", "value": "yes"}]),
    ):
        call("patch")("demo", NS, doc, _content_type=content_type)
    labels = call("read")("demo", NS).metadata.labels
    assert {k: labels[k] for k in ("replaced", "merge", "strategic", "json")} == {
        "replaced": "yes",
        "merge": "yes",
        "strategic": "yes",
        "json": "yes",
    }
    listed = call("list")(NS, label_selector="strategic=yes")
    assert [o.metadata.name for o in listed.items] == ["demo"]
    call("delete")("demo", NS)

    w = watch.Watch()
    types = []
    for event in w.stream(call("list"), NS, resource_version=start_rv, timeout_seconds=30):
        types.append(event["type"])
        if event["type"] == "DELETED":
            w.stop()
    assert types == ["ADDED"] + ["MODIFIED"] * 4 + ["DELETED"]


async def test_defaults_read_back_through_the_typed_models(apiserver_process: Any) -> None:
    url = await started(apiserver_process)
    await asyncio.to_thread(_defaults, url)


def _defaults(url: str) -> None:
    job = typed(url, KINDS["Job"])("create")(NS, KINDS["Job"].body()).spec
    assert (job.parallelism, job.completions, job.backoff_limit) == (1, 1, 6)
    assert (job.completion_mode, job.suspend, job.pod_replacement_policy) == (
        "NonIndexed",
        False,
        "TerminatingOrFailed",
    )
    assert job.manual_selector is None

    cron = typed(url, KINDS["CronJob"])("create")(NS, KINDS["CronJob"].body()).spec
    assert (cron.concurrency_policy, cron.suspend) == ("Allow", False)
    assert (cron.successful_jobs_history_limit, cron.failed_jobs_history_limit) == (3, 1)
    assert cron.job_template.spec.parallelism is None  # a template's Job spec is not defaulted

    ds = typed(url, KINDS["DaemonSet"])("create")(NS, KINDS["DaemonSet"].body())
    strategy = ds.spec.update_strategy
    assert (strategy.type, strategy.rolling_update.max_unavailable) == ("RollingUpdate", 1)
    assert (strategy.rolling_update.max_surge, ds.spec.revision_history_limit) == (0, 10)
    assert (ds.status.desired_number_scheduled, ds.status.number_ready) == (0, 0)

    sts = typed(url, KINDS["StatefulSet"])("create")(NS, KINDS["StatefulSet"].body())
    spec = sts.spec
    assert (spec.replicas, spec.pod_management_policy, spec.revision_history_limit) == (
        1,
        "OrderedReady",
        10,
    )
    assert (spec.update_strategy.type, spec.update_strategy.rolling_update.partition) == (
        "RollingUpdate",
        0,
    )
    retention = spec.persistent_volume_claim_retention_policy
    assert (retention.when_deleted, retention.when_scaled) == ("Retain", "Retain")
    assert (sts.status.replicas, sts.status.available_replicas) == (0, 0)

    pdb = typed(url, KINDS["PodDisruptionBudget"])("create")(
        NS, KINDS["PodDisruptionBudget"].body()
    )
    assert (pdb.status.disruptions_allowed, pdb.status.expected_pods) == (0, 0)


async def test_job_selector_and_labels_are_generated(apiserver_process: Any) -> None:
    url = await started(apiserver_process)
    job = await asyncio.to_thread(
        typed(url, KINDS["Job"])("create"),
        NS,
        client.V1Job(
            metadata=client.V1ObjectMeta(name="pi"), spec=client.V1JobSpec(template=RUN_ONCE)
        ),
    )
    uid = job.metadata.uid
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    generated = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "pi",
        "controller-uid": uid,
        "job-name": "pi",
    }
    assert job.spec.template.metadata.labels == generated
    assert job.metadata.labels == generated  # a Job without labels carries its template's


async def test_status_subresources_and_statefulset_scale(apiserver_process: Any) -> None:
    url = await started(apiserver_process)
    await asyncio.to_thread(_status_and_scale, url)


def _status_and_scale(url: str) -> None:
    jobs = typed(url, KINDS["Job"])
    jobs("create")(NS, KINDS["Job"].body())
    status = jobs("read")("demo", NS)
    status.status = client.V1JobStatus(
        active=1,
        start_time="2026-01-01T00:00:00Z",
        conditions=[client.V1JobCondition(type="Suspended", status="False")],
    )
    replaced = jobs("replace")  # the main resource ignores status ...
    assert replaced("demo", NS, status).status.active is None
    job_status = client.BatchV1Api(client.ApiClient(client.Configuration(host=url)))
    written = job_status.replace_namespaced_job_status("demo", NS, status)  # ... /status takes it
    assert written.status.active == 1 and written.metadata.generation == 1
    patched = job_status.patch_namespaced_job_status(
        "demo", NS, {"status": {"succeeded": 1}}, _content_type=MERGE
    )
    assert (patched.status.active, patched.status.succeeded) == (1, 1)
    assert job_status.read_namespaced_job_status("demo", NS).status.succeeded == 1

    apps = client.AppsV1Api(client.ApiClient(client.Configuration(host=url)))
    apps.create_namespaced_stateful_set(NS, KINDS["StatefulSet"].body())
    scale = apps.read_namespaced_stateful_set_scale("demo", NS)
    assert (scale.spec.replicas, scale.status.selector) == (1, "app=web")
    scale.spec.replicas = 3
    assert apps.replace_namespaced_stateful_set_scale("demo", NS, scale).spec.replicas == 3
    patched_scale = apps.patch_namespaced_stateful_set_scale(
        "demo", NS, {"spec": {"replicas": 2}}, _content_type=MERGE
    )
    assert patched_scale.spec.replicas == 2
    sts = apps.read_namespaced_stateful_set("demo", NS)
    assert (sts.spec.replicas, sts.metadata.generation) == (2, 3)
    sts_status = apps.patch_namespaced_stateful_set_status(
        "demo", NS, {"status": {"replicas": 2, "readyReplicas": 1}}, _content_type=MERGE
    )
    assert (sts_status.status.ready_replicas, sts_status.spec.replicas) == (1, 2)

    pdbs = client.PolicyV1Api(client.ApiClient(client.Configuration(host=url)))
    pdbs.create_namespaced_pod_disruption_budget(NS, KINDS["PodDisruptionBudget"].body())
    granted = pdbs.patch_namespaced_pod_disruption_budget_status(
        "demo",
        NS,
        {"status": {"observedGeneration": 1, "disruptionsAllowed": 1, "expectedPods": 2}},
        _content_type=MERGE,
    )
    assert (granted.status.disruptions_allowed, granted.status.current_healthy) == (1, 0)
