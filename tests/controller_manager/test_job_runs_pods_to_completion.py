"""A Job runs its pods to completion on real processes (apiserver, scheduler, controller-manager,
sim kubelets whose containers exit by themselves): the right number of pods, never more than
``parallelism`` at once, each finished pod counted exactly once — also when the
controller-manager is killed -9 in the middle — and, for an Indexed Job, each index run once
with its annotation, label, hostname and ``JOB_COMPLETION_INDEX`` env; a ``podFailurePolicy``
``FailJob`` rule fails the Job on an exit code; the official client reads the finished Job."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client as k8s

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import EVENTS, LEASES, PODS, Obj, owned_by, rt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

JOBS = rt("batch", "Job")
FINALIZER = "batch.kubernetes.io/job-tracking"
INDEX = "batch.kubernetes.io/job-completion-index"


def condition(job: Obj | None, type_: str) -> Obj | None:
    for cond in ((job or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == type_ and cond["status"] == "True":
            return dict(cond)
    return None


def first(objects: list[Obj]) -> Obj | None:
    """The one Job a test made (None until the watch has seen it)."""
    return objects[0] if objects else None


def running(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


async def test_five_completions_at_parallelism_two(cluster: Cluster) -> None:
    await cluster.start_nodes("node1", "node2")
    client = cluster.client
    body = factories.job("five", factories.sim_exit(0, after=0.5), completions=5, parallelism=2)
    most_running = 0
    mine: list[Obj] = []

    def count(_type: str, _pod: Obj) -> None:
        nonlocal most_running
        if mine:
            live = [p for p in pods.objects() if owned_by(p, mine[0]) and running(p)]
            most_running = max(most_running, len(live))

    async with (
        Watcher(client, PODS, namespace="default", on_event=count) as pods,
        Watcher(client, JOBS, namespace="default") as jobs,
    ):
        mine.append(await client.create(JOBS, body, namespace="default"))
        done = await jobs.wait_until(
            lambda o: condition(first(o), "Complete") is not None, what="job five Complete"
        )
    job = done[0]
    status = job["status"]
    assert status["succeeded"] == 5 and "failed" not in status and "active" not in status
    assert status["uncountedTerminatedPods"] == {}
    assert condition(job, "SuccessCriteriaMet")["reason"] == "CompletionsReached"
    assert condition(job, "Complete")["message"] == "Reached expected number of succeeded pods"
    assert status["completionTime"] >= status["startTime"]
    assert 0 < most_running <= 2
    owned = [p for p in (await client.list(PODS, namespace="default"))["items"] if owned_by(p, job)]
    assert len(owned) == 5
    assert all(p["status"]["phase"] == "Succeeded" for p in owned)
    assert all(FINALIZER not in (p["metadata"].get("finalizers") or []) for p in owned)
    events = (await client.list(EVENTS, namespace="default"))["items"]
    reasons = [e["reason"] for e in events if e["involvedObject"]["name"] == "five"]
    assert reasons.count("SuccessfulCreate") == 5 and "Completed" in reasons
    completed = next(e for e in events if e["reason"] == "Completed")
    assert completed["message"] == "Job completed"
    assert completed["source"]["component"] == "job-controller"


async def test_kill_9_in_the_middle_counts_every_pod_once(cluster: Cluster) -> None:
    """The leader dies with pods finishing; its successor finishes the Job, counting each once."""
    await cluster.start_nodes("node1", "node2")
    client = cluster.client
    standby = cluster.new_cm()
    body = factories.job("survivor", factories.sim_exit(0, after=1), completions=5, parallelism=2)
    async with (
        Watcher(client, JOBS, namespace="default") as jobs,
        Watcher(client, LEASES, namespace="kube-system") as leases,
    ):
        await client.create(JOBS, body, namespace="default")
        await jobs.wait_until(
            lambda o: int((first(o) or {}).get("status", {}).get("succeeded") or 0) >= 1,
            what="a first counted success",
        )
        cluster.cm.kill()
        await asyncio.to_thread(standby.start)
        await leases.wait_until(
            lambda o: any(
                lease["metadata"]["name"] == "kube-controller-manager"
                and lease["spec"].get("holderIdentity", "").split("_")[0] != ""
                and int(lease["spec"].get("leaseTransitions") or 0) >= 1
                for lease in o
            ),
            what="the standby takes the lease",
            within=90,
        )
        done = await jobs.wait_until(
            lambda o: condition(first(o), "Complete") is not None,
            what="Complete after the takeover",
        )
    job = done[0]
    assert job["status"]["succeeded"] == 5
    assert job["status"]["uncountedTerminatedPods"] == {}
    owned = [p for p in (await client.list(PODS, namespace="default"))["items"] if owned_by(p, job)]
    succeeded = [p for p in owned if p["status"]["phase"] == "Succeeded"]
    assert len(succeeded) == 5
    assert all(FINALIZER not in (p["metadata"].get("finalizers") or []) for p in owned)


async def test_indexed_job_runs_each_index_once(cluster: Cluster) -> None:
    await cluster.start_nodes("node1")
    client = cluster.client
    body = factories.job(
        "ix", factories.sim_exit(0, after=0.2), completions=5, parallelism=3,
        completionMode="Indexed",
    )  # fmt: skip
    async with Watcher(client, JOBS, namespace="default") as jobs:
        await client.create(JOBS, body, namespace="default")
        done = await jobs.wait_until(
            lambda o: condition(first(o), "Complete") is not None, what="indexed job Complete"
        )
    job = done[0]
    assert job["status"]["completedIndexes"] == "0-4"
    assert job["status"]["succeeded"] == 5
    owned = [p for p in (await client.list(PODS, namespace="default"))["items"] if owned_by(p, job)]
    indexes = sorted(int(p["metadata"]["annotations"][INDEX]) for p in owned)
    assert indexes == [0, 1, 2, 3, 4]
    for pod in owned:
        ix = pod["metadata"]["annotations"][INDEX]
        assert pod["metadata"]["labels"][INDEX] == ix
        assert pod["metadata"]["name"].startswith(f"ix-{ix}-")
        assert pod["spec"]["hostname"] == f"ix-{ix}"
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == (
            f"metadata.annotations['{INDEX}']"
        )


async def test_pod_failure_policy_fails_the_job_on_an_exit_code(cluster: Cluster) -> None:
    await cluster.start_nodes("node1")
    client = cluster.client
    body = factories.job(
        "strict",
        factories.sim_exit(42, after=0.2),
        completions=3,
        parallelism=1,
        backoffLimit=6,
        podFailurePolicy={
            "rules": [
                {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
            ]
        },
    )
    async with Watcher(client, JOBS, namespace="default") as jobs:
        await client.create(JOBS, body, namespace="default")
        done = await jobs.wait_until(
            lambda o: condition(first(o), "Failed") is not None, what="job strict Failed"
        )
    job = done[0]
    failed = condition(job, "Failed")
    assert failed is not None and failed["reason"] == "PodFailurePolicy"
    assert condition(job, "FailureTarget") is not None
    owned = [p for p in (await client.list(PODS, namespace="default"))["items"] if owned_by(p, job)]
    assert len(owned) == 1  # failed at once: no retry despite backoffLimit 6
    pod = owned[0]["metadata"]["name"]
    assert failed["message"] == (
        f"Container main for pod default/{pod} failed with exit code 42 matching FailJob rule "
        "at index 0"
    )
    assert job["status"]["failed"] == 1


async def test_official_client_reads_a_finished_job(cluster: Cluster) -> None:
    await cluster.start_nodes("node1")
    client = cluster.client
    async with Watcher(client, JOBS, namespace="default") as jobs:
        await client.create(JOBS, factories.job("typed", completions=2), namespace="default")
        await jobs.wait_until(
            lambda o: condition(first(o), "Complete") is not None, what="Complete"
        )

    def read() -> Any:
        api_client = k8s.ApiClient(k8s.Configuration(host=cluster.api.url))
        try:
            return k8s.BatchV1Api(api_client).read_namespaced_job_status("typed", "default")
        finally:
            api_client.close()

    typed = await asyncio.to_thread(read)
    assert typed.status.succeeded == 2
    assert typed.status.completion_time is not None
    assert [c.type for c in typed.status.conditions] == ["SuccessCriteriaMet", "Complete"]
    assert typed.status.uncounted_terminated_pods is not None
    assert typed.spec.completion_mode == "NonIndexed"
